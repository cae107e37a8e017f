/**
 * Formula rendering with the vendored KaTeX (static/vendor/katex-<version>/katex.min.js, loaded by
 * lecture.html as a classic deferred script, so it is `globalThis.katex` by the time modules run).
 * Only our own formula strings are ever passed to KaTeX; user text never is.
 * @module lecture/tex
 */

/**
 * Render a TeX string into a fresh element.
 * @param {string} tex our own formula source
 * @param {{display?: boolean, className?: string}} [opts]
 * @returns {HTMLElement} a div (display) or span holding the rendered formula
 */
export function tex(tex, { display = true, className = "" } = {}) {
  const node = document.createElement(display ? "div" : "span");
  node.className = `${display ? "formula" : "formula-inline"} ${className}`.trim();
  const katex = /** @type {any} */ (globalThis).katex;
  if (katex) {
    katex.render(tex, node, { displayMode: display, throwOnError: false, output: "html" });
  } else {
    node.textContent = tex; // KaTeX missing: still show the source, never fail the slide
    node.classList.add("formula-raw");
  }
  return node;
}
