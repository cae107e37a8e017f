/** roving.js under node:test: the arrow / Home / End moves of a roving-tabindex grid. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { nextIndex } from "../../frontend/js/roving.js";

test("a 6 × 12 head grid: arrows move by one head or one layer and stop at the edges", () => {
  assert.equal(nextIndex("ArrowRight", 0, 72, 12), 1);
  assert.equal(nextIndex("ArrowDown", 0, 72, 12), 12);
  assert.equal(nextIndex("ArrowLeft", 12, 72, 12), 12); // first column: stays
  assert.equal(nextIndex("ArrowRight", 11, 72, 12), 11); // last column: stays
  assert.equal(nextIndex("ArrowUp", 5, 72, 12), 5);
  assert.equal(nextIndex("ArrowDown", 70, 72, 12), 70);
  assert.equal(nextIndex("Home", 27, 72, 12), 24);
  assert.equal(nextIndex("End", 27, 72, 12), 35);
});

test("one row of token chips: left / right, Home / End to the ends; other keys are not ours", () => {
  assert.equal(nextIndex("ArrowRight", 4, 10, 10), 5);
  assert.equal(nextIndex("ArrowLeft", 0, 10, 10), 0);
  assert.equal(nextIndex("ArrowRight", 9, 10, 10), 9);
  assert.equal(nextIndex("Home", 6, 10, 10), 0);
  assert.equal(nextIndex("End", 2, 10, 10), 9);
  assert.equal(nextIndex("Enter", 2, 10, 10), null);
  assert.equal(nextIndex("a", 2, 10, 10), null);
  assert.equal(nextIndex("ArrowRight", 0, 0, 1), null);
});
