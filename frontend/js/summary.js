/**
 * The analysis' per-head summary, method by method. The head grid shows one method's
 * figures at a time (`analysis.summary[k].methods[<shown>]`), so the page's `POST /api/analyze`
 * asks for the shown method's only (`summary: [method]`: the server computes the rest later);
 * once the first view is on screen (the head and its Pareto data) the page fetches every other
 * method's (`GET /api/analyses/{id}/summary`), and a method switched to before that is fetched
 * on its own. The rows arrive in the analysis' order and are merged into its `summary` rows in
 * place; `summaryAt` (a counter in the store) tells the grid to repaint.
 */

import * as api from "./api.js";
import { methodAvailable } from "./controls.js";
import * as store from "./state.js";

/** Analyses (by object) whose every method's summary is in, or on its way. */
const whole = new WeakSet();
/** "id/method" requests in flight. */
const pending = new Map();

/** The `summary` field of the page's analyze request: the method it will show. */
export function firstSummary(s) {
  return [s.method];
}

/** Whether analysis `a`'s rows hold `method`'s figures. */
function holds(a, method) {
  return !!a.summary?.length && method in a.summary[0].methods;
}

/** Merge the rows of `GET …/summary` into `a.summary` (same heads, same order). */
function merge(a, rows) {
  if (!a.summary || rows.length !== a.summary.length) return;
  rows.forEach((row, k) => Object.assign(a.summary[k].methods, row.methods));
  if (store.get().analysis === a) store.set({ summaryAt: (store.get().summaryAt ?? 0) + 1 });
}

/** Fetch `methods` (empty: every one) of analysis `a` once; failures are left to the grid ("–"). */
function fetchInto(a, methods) {
  const key = `${a.id}/${methods.join(",")}`;
  if (pending.has(key)) return pending.get(key);
  const p = api.getSummary(a.id, methods).then((rows) => merge(a, rows)).catch(() => {})
    .finally(() => pending.delete(key));
  pending.set(key, p);
  return p;
}

/** Whether `a`'s rows hold every method it has (a whole body: a share's, a cached one's). */
function holdsAll(a) {
  return (a.methods ?? []).every((m) => !methodAvailable(a, m) || holds(a, m.name));
}

/** Every method's summary of `a` (after its first view is on screen), once. */
export function completeSummary(a) {
  if (!a || whole.has(a) || holdsAll(a)) return Promise.resolve();
  whole.add(a);
  return fetchInto(a, []);
}

/**
 * The shown method's summary of `a` when its rows lack it (a method switched to before the
 * whole summary came); nothing for a method the analysis does not have (sf-* without artefact).
 */
export function ensureMethod(a, method) {
  if (!a?.summary?.length || holds(a, method)) return Promise.resolve();
  const spec = a.methods?.find((m) => m.name === method);
  if (!spec || !methodAvailable(a, spec)) return Promise.resolve();
  return fetchInto(a, [method]);
}
