/** slider-scale.js under node:test: a slider scale that fits n. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { POSITIONS, sliderScale, typedValue } from "../../frontend/js/slider-scale.js";

const windowAt = (n) => ({ kind: "int", min: 0, max: 2 * n - 1, step: 1 });

test("a short range stays linear: positions are the values", () => {
  const s = sliderScale(windowAt(15), 240);
  assert.equal(s.kind, "linear");
  assert.deepEqual([s.min, s.max, s.step], [0, 29, 1]);
  assert.equal(s.toValue(7), 7);
  assert.equal(sliderScale({ kind: "float", min: 0, max: 4, step: 0.05 }, 240).kind, "linear");
});

test("the window at n = 512 (0–1023) takes a square-root scale: fine where widths are small", () => {
  const s = sliderScale(windowAt(512), 240);
  assert.equal(s.kind, "sqrt");
  assert.equal(s.toValue(0), 0);
  assert.equal(s.toValue(POSITIONS), 1023);
  // the first tenth of the slider holds only the first 1 % of the values: small widths are reachable
  assert.ok(s.toValue(POSITIONS / 10) <= 11);
  // one pixel (1000 / 240 positions) near the start moves the width by at most one
  assert.ok(s.toValue(Math.round(POSITIONS / 240)) <= 1);
  // every value maps back to a position that gives it (within a pixel's worth near the top)
  for (const v of [0, 1, 3, 5, 11, 63, 127, 511, 1023]) {
    const back = s.toValue(s.toPos(v));
    assert.ok(Math.abs(back - v) <= Math.max(1, v * 0.01), `${v} -> ${s.toPos(v)} -> ${back}`);
  }
  // monotone
  let last = -1;
  for (let p = 0; p <= POSITIONS; p++) {
    const v = s.toValue(p);
    assert.ok(v >= last);
    last = v;
  }
});

test("typed values are kept in range; a half-typed one is not a value yet", () => {
  const spec = windowAt(512);
  assert.equal(typedValue(spec, "2000"), 1023);
  assert.equal(typedValue(spec, "-4"), 0);
  assert.equal(typedValue(spec, "37"), 37);
  assert.equal(typedValue(spec, ""), null);
  assert.equal(typedValue(spec, "abc"), null);
});
