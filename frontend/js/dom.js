/**
 * DOM helpers of both pages (the explorer and the lecture) that never parse HTML: user text
 * (tokens, sentences from the URL, error messages) only ever reaches the page through
 * `textContent` and `createElement`, and Plotly labels go through `escapeHtml`.
 */

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * @typedef {object} ElOptions
 * @property {string} [class] the class attribute
 * @property {string} [text] textContent
 * @property {string} [title] the title attribute (a tooltip)
 * @property {Object<string, string|number|boolean|null|undefined>} [attrs] attributes; null,
 *   undefined and false are left out, true is the empty (present) attribute
 */

/** Fill a new element from its options and children (strings become text nodes). */
function build(node, opts, children) {
  if (opts.class) node.setAttribute("class", opts.class);
  if (opts.text !== undefined) node.textContent = opts.text;
  if (opts.title !== undefined) node.setAttribute("title", opts.title);
  for (const [k, v] of Object.entries(opts.attrs ?? {})) {
    if (v === null || v === undefined || v === false) continue;
    node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c !== null && c !== undefined) node.append(c);
  }
  return node;
}

/**
 * Create an HTML element.
 * @param {string} tag
 * @param {ElOptions} [opts]
 * @param {Array<Node|string|null|undefined>} [children] strings become text nodes
 * @returns {HTMLElement}
 */
export function el(tag, opts = {}, children = []) {
  return build(document.createElement(tag), opts, children);
}

/**
 * Create an SVG element (same options as {@link el}; geometry goes in `attrs`).
 * @param {string} tag
 * @param {ElOptions} [opts]
 * @param {Array<Node|string|null|undefined>} [children]
 * @returns {SVGElement}
 */
export function svg(tag, opts = {}, children = []) {
  return build(document.createElementNS(SVG_NS, tag), opts, children);
}

/** `document.getElementById` that fails loudly when the template lacks the element. */
export function byId(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error(`the page has no #${id}`);
  return node;
}

/** Read a `<script type="application/json">` data island. */
export function readIsland(id) {
  return JSON.parse(byId(id).textContent);
}

const HTML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/**
 * Escape text for Plotly labels (Plotly renders a subset of HTML tags in hover and tick text).
 * @param {string} s
 */
export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

/**
 * Format a number with fixed decimals and a true minus sign, e.g. 0.9731 -> "0.973",
 * -1.5 -> "−1.500"; −∞ -> "−∞", anything else not finite -> "–"; never "−0.000".
 * @param {number} x
 * @param {number} [digits]
 */
export function fmt(x, digits = 3) {
  if (x === -Infinity) return "−∞";
  if (!Number.isFinite(x)) return "–";
  const s = x.toFixed(digits);
  if (Number(s) === 0) return (0).toFixed(digits);
  return s.startsWith("-") ? `−${s.slice(1)}` : s;
}

/**
 * A share as a percentage with one decimal, e.g. 0.8123 -> "81.2 %".
 * @param {number} x a share in [0, 1]
 */
export function pct(x) {
  return Number.isFinite(x) ? `${(100 * x).toFixed(1)} %` : "–";
}

/**
 * Debounce: call `fn` once, `ms` after the last call.
 * @template {(...args: any[]) => void} F
 * @param {F} fn
 * @param {number} ms
 * @returns {F}
 */
export function debounce(fn, ms) {
  let timer = 0;
  return /** @type {F} */ ((...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  });
}
