/**
 * Minimal SVG plotting for slides: linear scales, axes with ticks and a frame, in large type.
 * @module lecture/plot
 */

import { svg } from "../dom.js";

/**
 * @typedef {object} Frame
 * @property {SVGSVGElement} root
 * @property {SVGGElement} layer group to draw data into
 * @property {(x: number) => number} sx data → pixel x
 * @property {(y: number) => number} sy data → pixel y
 * @property {{left: number, top: number, right: number, bottom: number}} box plot area (px)
 */

/**
 * Create an SVG with axes.
 * @param {{width: number, height: number, x: [number, number], y: [number, number],
 *   xLabel?: string, yLabel?: string, xTicks?: number[], yTicks?: number[],
 *   tickFormat?: (v: number) => string, square?: boolean, axes?: boolean}} o
 * @returns {Frame}
 */
export function frame(o) {
  // 18 px at least: read from the back of a lecture hall (a projector at 1280 × 720)
  const font = Math.round(Math.max(18, Math.min(22, o.height / 34)));
  const m =
    o.axes === false
      ? { left: font * 0.5, right: font * 0.5, top: font * 0.5, bottom: font * 0.5 }
      : { left: font * 4, right: font, top: font, bottom: font * 3.4 };
  let pw = o.width - m.left - m.right;
  let ph = o.height - m.top - m.bottom;
  if (o.square) {
    const s = Math.min(pw, ph);
    pw = s;
    ph = s;
  }
  const W = pw + m.left + m.right;
  const H = ph + m.top + m.bottom;
  const root = /** @type {SVGSVGElement} */ (
    svg("svg", { class: "plot", attrs: { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" } })
  );
  root.style.fontSize = `${font}px`;
  // an image needs a name (axe svg-img-alt): the plot's axes say what it shows
  const name = o.title ?? [o.yLabel, o.xLabel].filter(Boolean).join(" against ");
  root.setAttribute("aria-label", name || "plot");
  const title = svg("title", {});
  title.textContent = name || "plot";
  root.append(title);
  const [x0, x1] = o.x;
  const [y0, y1] = o.y;
  const sx = (x) => m.left + ((x - x0) / (x1 - x0)) * pw;
  const sy = (y) => m.top + ph - ((y - y0) / (y1 - y0)) * ph;
  const box = { left: m.left, top: m.top, right: m.left + pw, bottom: m.top + ph };
  const fmt = o.tickFormat ?? ((v) => String(v));
  root.append(
    svg("rect", {
      class: "plot-bg",
      attrs: { x: box.left, y: box.top, width: pw, height: ph },
    }),
  );
  if (o.axes !== false) {
    for (const t of o.xTicks ?? []) {
      root.append(svg("line", { class: "grid", attrs: { x1: sx(t), x2: sx(t), y1: box.top, y2: box.bottom } }));
      root.append(
        svg("text", { text: fmt(t), attrs: { x: sx(t), y: box.bottom + font * 1.2, "text-anchor": "middle" } }),
      );
    }
    for (const t of o.yTicks ?? []) {
      root.append(svg("line", { class: "grid", attrs: { x1: box.left, x2: box.right, y1: sy(t), y2: sy(t) } }));
      root.append(
        svg("text", {
          text: fmt(t),
          attrs: { x: box.left - font * 0.4, y: sy(t) + font * 0.35, "text-anchor": "end" },
        }),
      );
    }
    if (o.xLabel)
      root.append(
        svg("text", {
          class: "axis-label",
          text: o.xLabel,
          attrs: { x: (box.left + box.right) / 2, y: box.bottom + font * 2.6, "text-anchor": "middle" },
        }),
      );
    if (o.yLabel)
      root.append(
        svg("text", {
          class: "axis-label",
          text: o.yLabel,
          attrs: {
            x: -(box.top + box.bottom) / 2,
            y: font * 1.1,
            transform: "rotate(-90)",
            "text-anchor": "middle",
          },
        }),
      );
  }
  const layer = /** @type {SVGGElement} */ (svg("g"));
  root.append(layer);
  return { root, layer, sx, sy, box };
}

/** Ten distinguishable colours (clusters, methods). */
export const PALETTE = [
  "#2563eb",
  "#ea580c",
  "#059669",
  "#c026d3",
  "#ca8a04",
  "#0891b2",
  "#dc2626",
  "#4f46e5",
  "#65a30d",
  "#9d174d",
];
