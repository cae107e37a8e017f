/**
 * heatmap-hit.js under node:test: a pointer -> the cell (or label, or minimap) under it, and a
 * cell -> its box and centre, the two inverse of each other at any zoom and pan, special tokens
 * hidden or not.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { cellBox, cellCentre, hitTest, minimapPoint, onMatrix } from "../../frontend/js/heatmap-hit.js";
import { layoutOf, minimapBox } from "../../frontend/js/heatmap-layout.js";
import { NO_ZOOM, clampPan, maxZoom } from "../../frontend/js/heatmap-zoom.js";
import { tokens } from "./heatmap_fixtures.mjs";

const lay = (n, hideSpecial = false, fit = 700) =>
  layoutOf({ tokens: tokens(n), n, hideSpecial, measure: (t) => 7 * t.length, width: 1200, fit });

function zooms(l) {
  const out = [NO_ZOOM];
  for (const z of [1.5, 2, maxZoom(l)]) {
    for (const [r0, c0] of [[0, 0], [1.3, 2.7], [l.m, l.m]]) out.push(clampPan(l, { z, r0, c0 }));
  }
  return out;
}

test("every visible cell's centre hits that cell, and its box's inner corners too", () => {
  let checked = 0;
  for (const l of [lay(15), lay(15, true), lay(128), lay(512, false, 3000), lay(3)]) {
    for (const z of zooms(l)) {
      for (let a = 0; a < l.m; a += Math.max(1, Math.floor(l.m / 17))) {
        for (let b = 0; b < l.m; b += Math.max(1, Math.floor(l.m / 13))) {
          const c = cellCentre(l, z, a, b);
          const box = cellBox(l, z, a, b);
          const mm = minimapBox(l);
          const underMinimap = (x, y) => z.z > 1 && x <= mm.x + mm.side && y <= mm.y + mm.side;
          const onScreen = (x, y) => onMatrix(l, x, y) && x - l.left < l.size &&
            y - l.top < l.size && !underMinimap(x, y);
          if (!onScreen(c.x, c.y)) continue;
          assert.deepEqual(hitTest(l, z, c.x, c.y), { kind: "cell", a, b });
          checked += 1;
          const e = box.side * 1e-3;
          for (const [x, y] of [[box.x + e, box.y + e], [box.x + box.side - e, box.y + box.side - e]]) {
            if (onScreen(x, y)) assert.deepEqual(hitTest(l, z, x, y), { kind: "cell", a, b });
          }
        }
      }
    }
  }
  assert.ok(checked > 1000, `${checked} cells checked`);
});

test("left of the matrix is a row label, above it a column label, else nothing", () => {
  const l = lay(15);
  const c = cellCentre(l, NO_ZOOM, 4, 9);
  assert.deepEqual(hitTest(l, NO_ZOOM, l.left - 5, c.y), { kind: "row", a: 4 });
  assert.deepEqual(hitTest(l, NO_ZOOM, c.x, l.top - 5), { kind: "col", b: 9 });
  assert.deepEqual(hitTest(l, NO_ZOOM, l.left - 5, l.top - 5), { kind: "none" });
  assert.deepEqual(hitTest(l, NO_ZOOM, l.left + l.size + 1, c.y), { kind: "none" });
  assert.deepEqual(hitTest(l, NO_ZOOM, c.x, l.top + l.size), { kind: "none" }); // the edge is out
  assert.deepEqual(hitTest(l, NO_ZOOM, l.left, l.top), { kind: "cell", a: 0, b: 0 });
});

test("zoomed, a row label is the row on screen beside it", () => {
  const l = lay(128);
  const z = clampPan(l, { z: 4, r0: 50.5, c0: 3 });
  const c = cellCentre(l, z, 60, 10);
  assert.deepEqual(hitTest(l, z, l.left - 2, c.y), { kind: "row", a: 60 });
});

test("the minimap, only when zoomed: the matrix point in cells", () => {
  const l = lay(128);
  const mm = minimapBox(l);
  const z = clampPan(l, { z: 2, r0: 0, c0: 0 });
  const h = hitTest(l, z, mm.x + mm.side / 4, mm.y + mm.side / 2);
  assert.deepEqual(h, { kind: "minimap", u: 32, v: 64 });
  assert.deepEqual(minimapPoint(l, mm.x + mm.side / 4, mm.y + mm.side / 2), { u: 32, v: 64 });
  assert.equal(hitTest(l, NO_ZOOM, mm.x + mm.side / 4, mm.y + mm.side / 2).kind, "none");
});

test("onMatrix: the wheel zooms only over the matrix, its edges included", () => {
  const l = lay(15);
  assert.ok(onMatrix(l, l.left, l.top));
  assert.ok(onMatrix(l, l.left + l.size, l.top + l.size));
  assert.ok(!onMatrix(l, l.left - 1, l.top + 10));
  assert.ok(!onMatrix(l, l.left + 10, l.top + l.size + 1));
});
