/** token-search.js `findTokens` under node:test: sub-word markers off, case-insensitive, exact
 * matches first, then prefixes, then the rest, each in text order, at most `limit`. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { bare, findTokens } from "../../frontend/js/token-search.js";

const toks = ["[CLS]", "The", "cat", "##s", "scat", "Cat", "catalogue", "Ġcat", "[SEP]"].map(
  (text) => ({ text }),
);

test("bare strips sub-word markers and case", () => {
  assert.equal(bare("##ing"), "ing");
  assert.equal(bare("ĠThe"), "the");
  assert.equal(bare("▁Cat"), "cat");
});

test("exact, then prefix, then substring matches, in text order", () => {
  const { hits, total } = findTokens(toks, "cat");
  assert.deepEqual(hits, [2, 5, 7, 6, 4]);
  assert.equal(total, 5);
});

test("the limit cuts the list, not the count; empty queries find nothing", () => {
  assert.deepEqual(findTokens(toks, "CAT", 2), { hits: [2, 5], total: 5 });
  assert.deepEqual(findTokens(toks, "   "), { hits: [], total: 0 });
  assert.deepEqual(findTokens(toks, "dog"), { hits: [], total: 0 });
  assert.deepEqual(findTokens(toks, "##s").hits, [3, 4, 0, 8]); // typed markers are ignored too
});
