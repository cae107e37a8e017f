/**
 * Plotly, loaded only when a panel needs it and never before the heatmap is painted: the bundle
 * (plotly.js's cartesian distribution, 1.5 MB: static/vendor/plotly-cartesian-4.1.1) is added as a `<script>` by the first `loadPlotly()` (the Pareto panel, once it has
 * data), so it never delays the page's modules, its first request or its first paint. The URL
 * is the config island's `plotly` (versioned and immutable: cached once, see app/web/main.py).
 */

import { readIsland } from "./dom.js";

let loading = null;

/** @returns {any|null} `window.Plotly` once loaded, else null */
export function plotlyNow() {
  return window.Plotly ?? null;
}

/**
 * Load Plotly once; resolves to `window.Plotly`.
 * @returns {Promise<any>}
 */
export function loadPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (loading) return loading;
  // after the next paint: executing the bundle must not hold back the heatmap's first frame
  const painted = new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  loading = painted.then(() => new Promise((resolve, reject) => {
    let url = "/static/vendor/plotly.min.js";
    try {
      url = readIsland("config").plotly ?? url;
    } catch {
      // a page without the config island keeps the plain URL
    }
    const script = document.createElement("script");
    script.src = url;
    script.async = true;
    script.onload = () => (window.Plotly ? resolve(window.Plotly) : reject(new Error("Plotly did not load")));
    script.onerror = () => {
      loading = null;
      reject(new Error("Plotly could not be loaded"));
    };
    document.head.append(script);
  }));
  return loading;
}
