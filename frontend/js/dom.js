/**
 * DOM helpers that never parse HTML: user text (tokens, error messages) only ever reaches the page
 * through `textContent` and `createElement`, and Plotly labels go through `escapeHtml`.
 */

/**
 * Create an element.
 * @param {string} tag
 * @param {{class?: string, text?: string, attrs?: Object<string, string>, title?: string}} [opts]
 * @param {Array<Node|string>} [children] strings become text nodes
 * @returns {HTMLElement}
 */
export function el(tag, opts = {}, children = []) {
  const node = document.createElement(tag);
  if (opts.class) node.className = opts.class;
  if (opts.text !== undefined) node.textContent = opts.text;
  if (opts.title !== undefined) node.title = opts.title;
  for (const [k, v] of Object.entries(opts.attrs ?? {})) node.setAttribute(k, v);
  for (const c of children) node.append(typeof c === "string" ? document.createTextNode(c) : c);
  return node;
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
 * Format a ratio in [0, 1] for display, e.g. 0.9731 -> "0.973".
 * @param {number} x
 * @param {number} [digits]
 */
export function fmt(x, digits = 3) {
  return Number.isFinite(x) ? x.toFixed(digits) : "–";
}
