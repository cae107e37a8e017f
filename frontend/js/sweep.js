/**
 * The current setting on every head, computed in the browser: `headRecall` (L·H recalls, for the
 * head grid's "recall" colouring) and `meanMetrics` (the plain mean over heads of the four metrics
 * and of the block sparsity at every tile size, definitions §4 "overall", for the Pareto plot's mean
 * scope).
 *
 * Only needed, and only run, while the grid shows recall, the Pareto plot shows the mean or the
 * whole model is shown (model-view.js paints each head as it is done: `onSweepHead`). It
 * starts once the sliders have been still for a moment and works in slices of at most about
 * SLICE_MS (as many heads as fit, at least one) between which it yields to the event loop, so
 * that an input and its frame wait for one slice at most; a newer setting cancels a running
 * sweep. The yield is a MessageChannel message (an ordinary task, after which input and a due
 * frame run): not `setTimeout(0)`, which browsers clamp to 4 ms once timers nest five deep (a
 * sweep of 72 heads in one-head slices would idle ~0.3 s), nor `scheduler.yield()`, whose
 * continuation goes ahead of other tasks.
 */

import { computeMetrics } from "./metrics.js";
import { predict } from "./methods.js";
import { loadHead } from "./session.js";
import * as store from "./state.js";

const SETTLE_MS = 250;
/** Work between two yields to the event loop (ms): one head at least. */
const SLICE_MS = 5;

let timer = 0;
let generation = 0;

/** Listeners told of every head the sweep has done (model-view.js). */
const headListeners = new Set();

/**
 * Call `fn({k, head, mask, metrics, setting})` for every head the sweep evaluates: `k` its index
 * (layer-major), `head` its prepared payload (head.js), `mask` the setting's n·n mask, `setting`
 * the sweep's `settingKey` (a newer setting's sweep has another).
 * @param {(done: {k: number, head: object, mask: Uint8Array, metrics: object, setting: string}) => void} fn
 */
export function onSweepHead(fn) {
  headListeners.add(fn);
}

/** The method and slider values of a state, as one string (which setting a sweep evaluates). */
export function settingKey(s) {
  return `${s.analysis?.id ?? ""}|${s.method}|${JSON.stringify(s.params)}`;
}

/** Yield to the event loop (a task, so input and frames run in between). */
function nextTask() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

async function run(gen) {
  const s = store.get();
  const a = s.analysis;
  const count = a.layers * a.heads;
  const recall = new Float64Array(count).fill(NaN);
  const sum = { recall: 0, sparsity: 0, exact: 0, precision: 0, mass_recall: 0 };
  const blocks = {};
  const setting = settingKey(s);
  let slice = performance.now();
  for (let k = 0; k < count; k++) {
    let head;
    try {
      head = await loadHead(Math.floor(k / a.heads), k % a.heads);
    } catch {
      return; // the analysis changed or the server is gone: a later change restarts the sweep
    }
    if (gen !== generation) return;
    const mask = predict(head, s.method, s.params);
    const m = computeMetrics(mask, head.gold, head.n, head.causal, undefined, head.probs);
    for (const fn of headListeners) fn({ k, head, mask, metrics: m, setting });
    recall[k] = m.recall;
    for (const key of Object.keys(sum)) sum[key] += m[key];
    for (const [b, v] of Object.entries(m.block_sparsity)) blocks[b] = (blocks[b] ?? 0) + v;
    if (s.gridColour === "recall" && (k % a.heads === a.heads - 1 || k === count - 1)) {
      store.set({ headRecall: Float64Array.from(recall) });
    }
    if (performance.now() - slice < SLICE_MS) continue;
    await nextTask();
    if (gen !== generation) return;
    slice = performance.now();
  }
  const mean = Object.fromEntries(Object.entries(sum).map(([key, v]) => [key, v / count]));
  mean.block_sparsity = Object.fromEntries(Object.entries(blocks).map(([b, v]) => [b, v / count]));
  store.set({ headRecall: recall, meanMetrics: mean });
}

function schedule() {
  generation++;
  clearTimeout(timer);
  const s = store.get();
  if (!s.analysis || (s.scope !== "mean" && s.gridColour !== "recall" && s.view !== "model")) return;
  const gen = generation;
  timer = setTimeout(() => run(gen).catch(() => {}), SETTLE_MS);
}

/** Subscribe the sweep to the store. */
export function initSweep() {
  store.subscribe((s, changed) => {
    if (["analysis", "method", "params"].some((k) => changed.has(k))) {
      store.set({ headRecall: null, meanMetrics: null });
      schedule();
    } else if (changed.has("view") && s.view === "model") {
      schedule(); // the whole model paints every head's mask as the sweep goes
    } else if (changed.has("scope") || changed.has("gridColour")) {
      if (!s.meanMetrics) schedule();
    }
  });
}
