/**
 * heatmap-layout.js under node:test: cell size, margins and canvas size for n tokens and the
 * room given, with special tokens hidden or not; the height it may take; label placement.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  BELOW_HEATMAP, LABEL_PX, MAX_CELL, MAX_LABEL, MAX_SIZE, MIN_FIT_CELL, fitHeight, labelPlan, layoutOf,
  minimapBox,
} from "../../frontend/js/heatmap-layout.js";
import { viewport } from "../../frontend/js/heatmap-zoom.js";
import { tokens } from "./heatmap_fixtures.mjs";

const measure = (t) => 7 * t.length;

function lay(n, { hideSpecial = false, width = 800, fit = 700, toks = tokens(n), wide = measure } = {}) {
  return layoutOf({ tokens: toks, n, hideSpecial, measure: wide, width, fit });
}

test("a short text: whole-pixel cells, at most MAX_CELL, margins from the widest label", () => {
  const l = lay(15);
  assert.equal(l.m, 15);
  assert.equal(l.left, Math.ceil(7 * 5) + 10); // "[CLS]"
  assert.equal(l.top, l.left);
  assert.equal(l.cell, MAX_CELL); // (700 − 45) / 15 > 28
  assert.equal(l.size, 15 * MAX_CELL);
  assert.equal(l.width, l.left + l.size + 8);
  assert.equal(l.height, l.width);
  assert.equal(l.step, 1);
  assert.deepEqual([...l.vis], [...Array(15).keys()]);
});

test("a long text: the height decides, cells are whole pixels while at least 4 px", () => {
  const l = lay(128, { width: 2000, fit: 700 });
  assert.equal(l.cell, Math.floor((700 - l.left) / 128));
  assert.ok(Number.isInteger(l.cell));
  assert.equal(l.step, Math.ceil(LABEL_PX / l.cell));
  const wide = lay(128, { width: 600, fit: 5000 }); // the width decides
  assert.equal(wide.cell, Math.floor((600 - wide.left - 12) / 128));
});

test("tiny cells stay fractional, the matrix at most MAX_SIZE and at least 160 px", () => {
  const l = lay(512, { width: 3000, fit: 3000 });
  assert.equal(l.size, MAX_SIZE);
  assert.equal(l.cell, MAX_SIZE / 512);
  assert.ok(!Number.isInteger(l.cell));
  const cramped = lay(512, { width: 100, fit: 100 });
  assert.equal(cramped.size, 160);
});

test("labels wider than MAX_LABEL cap the margin", () => {
  const toks = tokens(6).map((t, k) => (k === 2 ? { ...t, text: "x".repeat(40) } : t));
  const l = lay(6, { toks, wide: (t) => 10 * t.length });
  assert.equal(l.left, MAX_LABEL + 10);
  assert.equal(l.labels[2], `${"x".repeat(13)}…`); // tokenLabel: 14 characters at most
});

test("hideSpecial drops [CLS] and [SEP]: visible index <-> token both ways", () => {
  const l = lay(10, { hideSpecial: true });
  assert.equal(l.m, 8);
  assert.deepEqual([...l.vis], [1, 2, 3, 4, 5, 6, 7, 8]);
  assert.equal(l.pos[0], -1);
  assert.equal(l.pos[9], -1);
  for (let a = 0; a < l.m; a++) assert.equal(l.pos[l.vis[a]], a);
  assert.equal(l.left, 7 * 2 + 10); // "w9" is the widest now
  const only = lay(2, { hideSpecial: true }); // specials only: they stay
  assert.equal(only.m, 2);
});

test("fitHeight: the rest of a wide window, Infinity on a narrow one, at least 300", () => {
  assert.equal(fitHeight({ innerWidth: 1440, innerHeight: 900, top: 300 }), 900 - 300 - BELOW_HEATMAP);
  assert.equal(fitHeight({ innerWidth: 1440, innerHeight: 400, top: 300 }), 300);
  assert.equal(fitHeight({ innerWidth: 390, innerHeight: 844, top: 300 }), Infinity);
});

test("the minimap sits in the labels' corner, at least 40 px", () => {
  assert.deepEqual(minimapBox({ left: 80, top: 60 }), { x: 4, y: 4, side: 44 });
  assert.equal(minimapBox({ left: 20, top: 20 }).side, 40);
});

test("labelPlan: every step-th label and the strong ones, at their cells' centres", () => {
  const l = lay(128, { width: 2000, fit: 700 });
  const v = viewport(l, { z: 1, r0: 0, c0: 0 });
  const plan = labelPlan(l, v, new Set([5, -1]));
  const drawn = plan.map((p) => p.a);
  for (let a = 0; a < 128; a += l.step) assert.ok(drawn.includes(a));
  assert.ok(drawn.includes(5) && plan.find((p) => p.a === 5).strong);
  assert.equal(plan.filter((p) => p.strong).length, 1);
  assert.equal(drawn.length, Math.ceil(128 / l.step) + (5 % l.step === 0 ? 0 : 1));
  for (const p of plan) {
    assert.equal(p.row, l.top + (p.a + 0.5) * l.cell);
    assert.equal(p.col, l.left + (p.a + 0.5) * l.cell);
    assert.equal(p.text, l.labels[p.a]);
  }
});

test("labelPlan when zoomed: one label per cell, those off the view have no position", () => {
  const l = lay(128, { width: 2000, fit: 700 });
  const z = { z: 4, r0: 10, c0: 100 }; // rows 10..42, columns 100..128 on screen
  const plan = labelPlan(l, viewport(l, z), new Set());
  assert.equal(Math.ceil(LABEL_PX / (l.cell * 4)), 1);
  assert.equal(plan.length, 128);
  const shown = (key) => plan.filter((p) => p[key] !== null).map((p) => p.a);
  assert.deepEqual(shown("row"), Array.from({ length: 32 }, (_, k) => 10 + k));
  assert.deepEqual(shown("col"), Array.from({ length: 28 }, (_, k) => 100 + k));
});

test("a text too long to fit the height with cells of MIN_FIT_CELL px takes the width", () => {
  // n = 500 in the centre of a 1440 × 900 window (the wide layout): ~1000 px wide, 600 px high
  const l = lay(500, { width: 1000, fit: 600 });
  assert.ok(500 * MIN_FIT_CELL > 600 - l.left);
  assert.ok(l.size >= 700, `${l.size}`);
  assert.equal(l.size, Math.min(MAX_SIZE, 1000 - l.left - 12));
  // a text whose cells stay big enough at the height keeps fitting it (one screen)
  const short = lay(128, { width: 1000, fit: 600 });
  assert.equal(short.cell, Math.floor((600 - short.left) / 128));
});
