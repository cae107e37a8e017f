/** heatmap-focus.js under node:test: the zoom in the address, the focus on a locked row. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { focusRow, zoomKey, zoomOfKey } from "../../frontend/js/heatmap-focus.js";
import { STAR_MIN } from "../../frontend/js/heatmap-layout.js";
import { NO_ZOOM } from "../../frontend/js/heatmap-zoom.js";

const lay = (m, cell) => ({ m, cell, left: 60, top: 60, size: m * cell });

test("zoom 1 is no key; a zoom round-trips through its key", () => {
  assert.equal(zoomKey(NO_ZOOM), "");
  const l = lay(500, 1.76);
  const z = { z: 5.11, r0: 120.25, c0: 98 };
  assert.equal(zoomKey(z), "5.11@120.3,98");
  assert.deepEqual(zoomOfKey(l, zoomKey(z)), { z: 5.11, r0: 120.3, c0: 98 });
});

test("a bad or out-of-range key: no zoom, or the zoom kept on the matrix", () => {
  const l = lay(100, 5);
  assert.deepEqual(zoomOfKey(l, ""), NO_ZOOM);
  assert.deepEqual(zoomOfKey(l, "abc"), NO_ZOOM);
  assert.deepEqual(zoomOfKey(l, "4@-3,2"), NO_ZOOM);
  const far = zoomOfKey(l, "4@900,900"); // 25 cells a side in view: at most 75
  assert.deepEqual(far, { z: 4, r0: 75, c0: 75 });
  assert.equal(zoomOfKey(l, "999@0,0").z, 44 / 5); // the largest zoom
});

test("a long text's locked row opens with legible marks, centred on its diagonal", () => {
  const l = lay(500, 1.76);
  const z = focusRow(l, 250);
  assert.ok(Math.abs(z.z * l.cell - STAR_MIN) < 1e-9);
  const k = l.m / z.z;
  assert.ok(Math.abs(z.r0 + k / 2 - 250.5) < 1e-9 && z.r0 === z.c0);
  assert.equal(focusRow(l, -1), null);
  assert.equal(focusRow(lay(15, 28), 3), null); // marks already legible
  assert.deepEqual(focusRow(l, 0), { z: z.z, r0: 0, c0: 0 }); // kept on the matrix
});
