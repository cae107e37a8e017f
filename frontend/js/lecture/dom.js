/**
 * Tiny DOM helpers for the lecture view. Text always goes in through textContent, never innerHTML:
 * the sentence and its tokens come from the URL and must never be parsed as markup.
 * @module lecture/dom
 */

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * Create an HTML element.
 * @param {string} tag
 * @param {Record<string, string|number|boolean|null|undefined>} [attrs] attributes; "text" sets
 *   textContent, "class" the class list; null/false values are skipped
 * @param {...(Node|string|null|undefined)} children strings become text nodes
 * @returns {HTMLElement}
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  applyAttrs(node, attrs);
  for (const c of children) if (c != null) node.append(c);
  return node;
}

/**
 * Create an SVG element (same attribute rules as {@link el}).
 * @param {string} tag
 * @param {Record<string, string|number|boolean|null|undefined>} [attrs]
 * @param {...(Node|string|null|undefined)} children
 * @returns {SVGElement}
 */
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  applyAttrs(node, attrs);
  for (const c of children) if (c != null) node.append(c);
  return node;
}

/** @param {Element} node @param {Record<string, any>} attrs */
function applyAttrs(node, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === "text") node.textContent = String(v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
}

/**
 * Remove every child of a node.
 * @param {Element} node
 * @returns {Element} the node, emptied
 */
export function clear(node) {
  node.replaceChildren();
  return node;
}

/**
 * Format a number for a slide: fixed decimals, a true minus sign.
 * @param {number} x
 * @param {number} [digits=2]
 * @returns {string}
 */
export function fmt(x, digits = 2) {
  if (x === -Infinity) return "−∞";
  if (!Number.isFinite(x)) return "–";
  const s = x.toFixed(digits);
  if (Number(s) === 0) return (0).toFixed(digits); // no "−0.0"
  return s.startsWith("-") ? `−${s.slice(1)}` : s;
}

/**
 * A percentage with one decimal, e.g. 0.8123 → "81.2 %".
 * @param {number} x a share in [0, 1]
 * @returns {string}
 */
export function pct(x) {
  return Number.isFinite(x) ? `${(100 * x).toFixed(1)} %` : "–";
}

/**
 * Debounce: call fn once `ms` after the last call.
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
