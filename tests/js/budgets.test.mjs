/**
 * budgets.js's pure parts under node:test: the histogram of a head's budgets (every query in
 * exactly one bin, in the bin its value falls in) and how a budget is written.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { fmtBudget, histogram } from "../../frontend/js/budgets.js";

const total = (bins) => bins.reduce((a, b) => a + b.count, 0);

test("k: every query counted once, in its own bin", () => {
  const values = [1, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 40, 512, 513, 700];
  const bins = histogram(values, "k");
  assert.equal(total(bins), values.length);
  const at = (label) => bins.find((b) => b.label === label).count;
  assert.equal(at("1"), 2);
  assert.equal(at("5–6"), 2);
  assert.equal(at("9–12"), 1);
  assert.equal(at("13–16"), 1);
  assert.equal(at("33–48"), 1);
  assert.equal(at("385–512"), 1);
  assert.equal(at("513+"), 2);
});

test("k: bins stop at the largest value; queries without support are left out", () => {
  const bins = histogram([0, 1, 2, 2, 3], "k");
  assert.deepEqual(bins.map((b) => [b.label, b.count]), [["1", 1], ["2", 2], ["3", 1]]);
  assert.deepEqual(histogram([0, 0], "k"), []);
});

test("p: 0.05-wide bins from the lowest value's up to 1 (1 in the last)", () => {
  const bins = histogram([0.42, 0.5, 0.97, 1, 1], "p");
  assert.equal(bins[0].label, "0.40–0.45");
  assert.equal(bins.at(-1).label, "0.95–1.00");
  assert.equal(total(bins), 5);
  assert.equal(bins.at(-1).count, 3);
  assert.equal(bins[2].count, 1); // 0.5 opens the bin 0.50–0.55
  assert.equal(histogram([1, 1], "p").length, 1);
});

test("fmtBudget: keys as integers (quantiles between two to one decimal), masses to 3 places", () => {
  assert.equal(fmtBudget(4, "k"), "4");
  assert.equal(fmtBudget(2.6, "k"), "2.6");
  assert.equal(fmtBudget(0.98765, "p"), "0.988");
  assert.equal(fmtBudget(null, "k"), "–");
});
