/**
 * What the page changed of its address once the analysis is known (tests/js/address_notices.test.mjs).
 *
 * The address codec (view-state.js `decodeQuery`) clamps a number to its field's fixed range and
 * says so; some ranges are only known with the analysis: the model's layers and heads, the
 * text's tokens (the locked row) and the method's slider ranges (its ParamSpecs). The page
 * clamps those to the nearest allowed value too (session.js `adopt`, params.js `coerceParam`);
 * `analysisNotices` compares the address's values with the view adopted and words each change,
 * e.g. `layer=9 is above the last layer 5: using 5`, `p.window=5000 is above the maximum 64:
 * using 64`, or, for a value that is no number at all, `p.window="abc" is not a value of window:
 * using the default 3`.
 */

import { plainNumber } from "./params.js";

/**
 * Notices (keyed by address key) for the address values `query` (decodeQuery's state: params as
 * raw strings) that the adopted view `s` (the store, its `analysis` set) does not show as given.
 * @param {object} query
 * @param {object} s
 * @returns {Object<string, string>}
 */
export function analysisNotices(query, s) {
  const a = s.analysis;
  const out = {};
  if (!a) return out;
  const bound = (key, value, shown, last, what) => {
    if (!Number.isInteger(value) || value === shown) return;
    out[key] = value > last
      ? `${key}=${value} is above the last ${what} ${last}: using ${shown}`
      : `${key}=${value} is not allowed here: using ${shown}`;
  };
  bound("layer", query.layer, s.layer, a.layers - 1, "layer");
  bound("head", query.head, s.head, a.heads - 1, "head");
  if (Number.isInteger(query.lockedRow) && s.lockedRow !== query.lockedRow && s.lockedRow !== null) {
    bound("row", query.lockedRow, s.lockedRow, a.n - 1, "token");
  }
  const spec = (a.methods ?? []).find((m) => m.name === s.method);
  if (!spec || !query.params || (query.method !== undefined && query.method !== s.method)) return out;
  for (const [name, raw] of Object.entries(query.params)) {
    const p = spec.params.find((q) => q.name === name);
    const key = `p.${name}`;
    if (!p) {
      out[key] = `${key} is not a slider of ${s.method}: left out`;
      continue;
    }
    const got = s.params[name];
    if (p.kind === "int" || p.kind === "float") {
      const v = plainNumber(String(raw));
      if (v !== null && Number.isFinite(v) && v === got) continue;
      if (v !== null && Number.isFinite(v) && v > p.max && got === p.max) {
        out[key] = `${key}=${raw} is above the maximum ${p.max}: using ${p.max}`;
      } else if (v !== null && Number.isFinite(v) && v < p.min && got === p.min) {
        out[key] = `${key}=${raw} is below the minimum ${p.min}: using ${p.min}`;
      } else out[key] = `${key}=${JSON.stringify(raw)} is not a value of ${name}: using the default ${got}`;
    } else if (String(got) !== String(raw) && !(p.kind === "bool" && ["0", "1"].includes(raw) && (raw === "1") === got)) {
      out[key] = `${key}=${JSON.stringify(raw)} is not a value of ${name}: using the default ${got}`;
    }
  }
  return out;
}
