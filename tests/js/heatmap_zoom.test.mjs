/**
 * heatmap-zoom.js under node:test: the viewport, the zoom range, zooming around a point (the
 * point stays put), panning kept on the matrix, keys, the wheel, the minimap and ↑ / ↓.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  KEY_STEP, NO_ZOOM, arrowPan, centreOn, clampPan, dragPan, keyZoom, maxZoom, refit, revealRow,
  viewport, wheelScrolls, wheelZoom, zoomAround,
} from "../../frontend/js/heatmap-zoom.js";

/** A layout as heatmap-layout.js makes it (only what the zoom reads). */
const lay = (m, cell, left = 60, top = 60) => ({ m, cell, left, top, size: m * cell });
const close = (a, b, eps = 1e-9) => assert.ok(Math.abs(a - b) <= eps, `${a} != ${b}`);

test("the viewport: zoomed cell size and where cell (0, 0) sits", () => {
  const l = lay(128, 5);
  assert.deepEqual(viewport(l, NO_ZOOM), { ec: 5, x0: 60, y0: 60 });
  assert.deepEqual(viewport(l, { z: 4, r0: 10, c0: 20 }), { ec: 20, x0: 60 - 400, y0: 60 - 200 });
});

test("the largest zoom: cells of 44 px, at least 4× from 48 tokens, 1 without a layout", () => {
  assert.equal(maxZoom(lay(15, 28)), 44 / 28);
  assert.equal(maxZoom(lay(128, 5)), 44 / 5);
  assert.equal(maxZoom(lay(64, 20)), 4);
  assert.equal(maxZoom(lay(10, 50)), 1);
  assert.equal(maxZoom(null), 1);
});

test("clampPan keeps the view on the matrix and at the origin when not zoomed", () => {
  const l = lay(100, 5);
  assert.deepEqual(clampPan(l, { z: 2, r0: -3, c0: 70 }), { z: 2, r0: 0, c0: 50 });
  assert.deepEqual(clampPan(l, { z: 1, r0: 5, c0: 5 }), { z: 1, r0: 0, c0: 0 });
  const z = { z: 4, r0: 10, c0: 20 };
  assert.deepEqual(clampPan(l, z), z);
  assert.notEqual(clampPan(l, z), z); // a new zoom, the old one untouched
});

test("zooming around a point keeps the matrix point under it", () => {
  const l = lay(128, 5);
  let z = NO_ZOOM;
  for (const [factor, px, py] of [[2, 100, 300], [1.5, 320, 40], [0.5, 10, 600], [3, 640, 640]]) {
    const next = zoomAround(l, z, z.z * factor, px, py);
    const before = viewport(l, z), after = viewport(l, next);
    // the matrix point (u, v) in cells under (px, py), before and after (unless clamped)
    const u0 = (l.left + px - before.x0) / before.ec, u1 = (l.left + px - after.x0) / after.ec;
    const clamped = next.c0 === 0 || next.c0 === l.m - l.m / next.z;
    if (!clamped) close(u0, u1);
    assert.ok(next.z >= 1 && next.z <= maxZoom(l));
    z = next;
  }
  assert.equal(zoomAround(l, NO_ZOOM, 100).z, maxZoom(l)); // kept in range
  assert.deepEqual(zoomAround(l, { z: 3, r0: 4, c0: 4 }, 0.2), NO_ZOOM);
  const centred = zoomAround(l, NO_ZOOM, 2); // default: the matrix's centre
  close(centred.c0, 32);
  close(centred.r0, 32);
});

test("refit: a new layout keeps the zoom under its largest", () => {
  const z = refit(lay(15, 28), { z: 8, r0: 3, c0: 3 });
  assert.equal(z.z, 44 / 28);
  assert.ok(z.c0 <= 15 - 15 / z.z);
});

test("keys and the wheel", () => {
  const z = { z: 2, r0: 0, c0: 0 };
  assert.equal(keyZoom(z, "+"), 2 * KEY_STEP);
  assert.equal(keyZoom(z, "="), 2 * KEY_STEP);
  assert.equal(keyZoom(z, "-"), 2 / KEY_STEP);
  assert.equal(keyZoom(z, "0"), 1);
  assert.equal(keyZoom(z, "a"), null);
  close(wheelZoom(z, -100, 0), 2 * Math.exp(0.25)); // pixels
  close(wheelZoom(z, 3, 1), 2 * Math.exp(-0.15)); // lines
  const l = lay(128, 5);
  assert.equal(wheelScrolls(l, NO_ZOOM, 0.9), true); // out at 1: the page scrolls
  assert.equal(wheelScrolls(l, NO_ZOOM, 1.1), false);
  const top = { z: maxZoom(l), r0: 0, c0: 0 };
  assert.equal(wheelScrolls(l, top, top.z * 1.1), true); // in at the largest
  assert.equal(wheelScrolls(l, top, top.z * 0.9), false);
});

test("panning: a drag, the minimap, Shift + arrows", () => {
  const l = lay(100, 5);
  const z = { z: 4, r0: 40, c0: 40 };
  assert.deepEqual(dragPan(l, z, z, 40, -20), { z: 4, r0: 41, c0: 38 }); // 20 px a cell
  assert.deepEqual(dragPan(l, z, z, -1e6, 0), { z: 4, r0: 40, c0: 75 });
  assert.deepEqual(centreOn(l, z, 50, 10), { z: 4, r0: 0, c0: 37.5 });
  assert.deepEqual(arrowPan(l, z, "ArrowRight"), { z: 4, r0: 40, c0: 46.25 });
  assert.deepEqual(arrowPan(l, z, "ArrowUp"), { z: 4, r0: 33.75, c0: 40 });
  assert.equal(arrowPan(l, z, "Enter"), null);
});

test("revealRow scrolls just enough to show the row", () => {
  const l = lay(100, 5);
  const z = { z: 4, r0: 40, c0: 10 }; // rows 40..65 visible
  assert.deepEqual(revealRow(l, z, 50), z);
  assert.equal(revealRow(l, z, 30).r0, 30);
  assert.equal(revealRow(l, z, 70).r0, 46);
  assert.equal(revealRow(l, z, 70).c0, 10);
  assert.deepEqual(revealRow(l, NO_ZOOM, 99), NO_ZOOM);
});
