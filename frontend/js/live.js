/**
 * The live pipeline: a method or slider change -> the mask (methods.js) -> the metrics
 * (metrics.js) -> `store.result`, which the heatmap, the metrics panel and the Pareto point
 * repaint from, synchronously, inside one animation frame.
 *
 * Slider events are coalesced with requestAnimationFrame: however many `input` events arrive
 * between two frames, the work runs once per frame on the latest values. Timings are recorded
 * with the User Timing API so tests and bench/bench_page.py can read them:
 *
 * - "slider-update": first input event after the last frame -> mask, metrics, heatmap and Pareto
 *   point repainted; "slider-work": the same without the wait for the frame (the work itself);
 * - "head-open": a head was asked for (grid click, keys, URL) -> its payload fetched, prepared,
 *   mask computed and everything repainted;
 * - "hover" (heatmap.js): the pointer entered a new cell -> tooltip and crosshair drawn.
 */

import { computeMetrics } from "./metrics.js";
import { predict } from "./methods.js";
import * as store from "./state.js";

let frame = 0;
let inputPending = false;

/** Record the start of a user change (called by the controls on every input event). */
export function markInput() {
  if (inputPending) return;
  inputPending = true;
  performance.mark("slider-start");
}

/** Record the start of opening a head (measured when its first result is painted). */
export function markHeadStart() {
  performance.clearMarks("head-start");
  performance.mark("head-start");
}

/** Mask and metrics of the current setting on the open head, or an error message. */
function evaluate(s) {
  const head = s.headData;
  if (!head) return null;
  try {
    const mask = predict(head, s.method, s.params);
    return { mask, metrics: computeMetrics(mask, head.gold, head.n, head.causal, undefined, head.probs), error: null };
  } catch (err) {
    return { mask: null, metrics: null, error: err.message };
  }
}

function measure(name, start) {
  if (performance.getEntriesByName(start, "mark").length === 0) return;
  performance.measure(name, start);
  performance.clearMarks(start);
}

function runFrame() {
  const start = performance.now();
  frame = 0;
  store.set({ result: evaluate(store.get()) });
  if (inputPending) {
    inputPending = false;
    measure("slider-update", "slider-start");
    performance.measure("slider-work", { start });
  }
}

/** Subscribe the pipeline to the store. */
export function initLive() {
  store.subscribe((s, changed) => {
    if (changed.has("headData")) {
      // a new head: compute now, in the same task that received its payload
      if (frame) cancelAnimationFrame(frame);
      frame = 0;
      inputPending = false;
      store.set({ result: evaluate(s) });
      if (s.headData) measure("head-open", "head-start");
    } else if ((changed.has("method") || changed.has("params")) && !frame) {
      frame = requestAnimationFrame(runFrame);
    }
  });
}
