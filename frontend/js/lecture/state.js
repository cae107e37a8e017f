/**
 * The lecture's state lives in the URL, so that every slide is a shareable link:
 * `/lecture?step=K&text=...&alpha=1.5&causal=1&layer=L&head=H`.
 * @module lecture/state
 */

/** Number of steps in the lecture. */
export const STEPS = 12;

/**
 * @typedef {object} LectureState
 * @property {number} step   1..STEPS
 * @property {string} text   the sentence
 * @property {number} alpha  entmax α in [1, 2]
 * @property {boolean} causal decoder-style mask (j ≤ i)
 * @property {string|null} model a served model's id (null: the server's default)
 * @property {number|null} layer chosen layer (null: pick one from the analysis)
 * @property {number|null} head  chosen head (null: pick one)
 */

/**
 * Parse the query string into a state, clamping every value to its allowed range.
 * @param {string} search location.search
 * @param {{text: string, alpha: number}} defaults
 * @returns {LectureState}
 */
export function parseState(search, defaults) {
  const q = new URLSearchParams(search);
  const num = (name, fallback) => {
    const raw = q.get(name);
    if (raw === null || raw.trim() === "") return fallback;
    const v = Number(raw);
    return Number.isFinite(v) ? v : fallback;
  };
  const intOrNull = (name) => {
    const v = num(name, null);
    return v === null || v < 0 ? null : Math.floor(v);
  };
  const text = q.get("text");
  return {
    step: clamp(Math.round(num("step", 1)), 1, STEPS),
    text: text && text.trim() ? text : defaults.text,
    alpha: roundAlpha(clamp(num("alpha", defaults.alpha), 1, 2)),
    causal: !["0", "false", "no", "off"].includes((q.get("causal") ?? "1").toLowerCase()),
    layer: intOrNull("layer"),
    head: intOrNull("head"),
    model: q.get("model") || null,
  };
}

/**
 * The query string for a state (only the parameters that are not defaults, step always first).
 * @param {LectureState} s
 * @param {{text: string, alpha: number}} defaults
 * @returns {string} starting with "?"
 */
export function toSearch(s, defaults) {
  const q = new URLSearchParams();
  q.set("step", String(s.step));
  if (s.text !== defaults.text) q.set("text", s.text);
  if (s.alpha !== defaults.alpha) q.set("alpha", String(s.alpha));
  if (!s.causal) q.set("causal", "0");
  if (s.model) q.set("model", s.model);
  if (s.layer !== null && s.head !== null) {
    q.set("layer", String(s.layer));
    q.set("head", String(s.head));
  }
  return `?${q.toString()}`;
}

/**
 * @param {number} x @param {number} lo @param {number} hi
 * @returns {number}
 */
export function clamp(x, lo, hi) {
  return Math.min(hi, Math.max(lo, x));
}

/** α on the slider's 0.05 grid (keeps URLs and the analysis cache tidy). */
export function roundAlpha(a) {
  return Math.round(a * 20) / 20;
}
