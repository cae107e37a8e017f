/**
 * The page's colour scales and mark colours, shared by the heatmap, its legend and the head grid.
 *
 * Probabilities use sequential scales on √p that start at a clearly visible tint, so every p > 0
 * is visibly coloured while an exact zero stays white (the difference between "small" and "zero"
 * is the point of entmax attention): ColorBrewer "Blues" for gold edges the current method keeps,
 * "Reds" for those it misses.
 */

/** Exact zero, not predicted. */
export const ZERO = "#ffffff";
/** Exact zero inside the method's predicted mask (the "shaded = predicted" overlay). */
export const SHADE = "#f2dfb5";
/** Mark of a gold edge the method keeps. */
export const CAUGHT = "#f59e0b";
export const CAUGHT_STROKE = "#7c2d12";
/** Mark (×, dot) of a gold edge the method misses. */
export const MISSED = "#dc2626";
/** Hover, lock and selection accents. */
export const ACCENT = "#111827";
export const CLUSTER = "#7c3aed";

const BLUES = ["#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"];
const REDS = ["#fcae91", "#fb6a4a", "#ef3b2c", "#cb181d", "#a50f15", "#67000d"];
const PURPLES = ["#f2f0f7", "#dadaeb", "#bcbddc", "#9e9ac8", "#807dba", "#6a51a3", "#4a1486"];
const VIRIDIS = [
  "#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58",
  "#b5de2b", "#fde725",
];

function hexToRgb(hex) {
  const v = parseInt(hex.slice(1), 16);
  return [(v >> 16) & 255, (v >> 8) & 255, v & 255];
}

/** Piecewise-linear interpolation through `stops` at t in [0, 1] -> [r, g, b]. */
function interpolate(stops, t) {
  const x = Math.min(1, Math.max(0, t)) * (stops.length - 1);
  const k = Math.min(stops.length - 2, Math.floor(x));
  const a = hexToRgb(stops[k]);
  const b = hexToRgb(stops[k + 1]);
  const f = x - k;
  return a.map((v, c) => Math.round(v + (b[c] - v) * f));
}

const css = ([r, g, b]) => `rgb(${r}, ${g}, ${b})`;

/** Colour of probability p > 0 of a kept (or unjudged) gold edge, as a CSS string. */
export function probColour(p) {
  return css(interpolate(BLUES, Math.sqrt(p)));
}

/** Colour of probability p > 0 of a gold edge the method misses, as a CSS string. */
export function missedColour(p) {
  return css(interpolate(REDS, Math.sqrt(p)));
}

/** Head-grid colour of a gold sparsity, normalised to [lo, hi]. */
export function sparsityColour(s, lo, hi) {
  return css(interpolate(PURPLES, hi > lo ? (s - lo) / (hi - lo) : 1));
}

/** Head-grid colour of a recall in [0, 1] (viridis: dark = low, yellow = high). */
export function recallColour(r) {
  return css(interpolate(VIRIDIS, r));
}

/** Readable text colour (near-black or white) on a background given as `rgb(r, g, b)`. */
export function textOn(rgb) {
  const L = luminance(rgb.match(/\d+/g).map(Number));
  // WCAG contrast ratios: white (L = 1), the page's ink #111827 (L ≈ 0.0116), black; mid tones
  // (L ≈ 0.2) reach 4.5:1 only with pure black
  const white = 1.05 / (L + 0.05);
  const ink = (L + 0.05) / (INK_L + 0.05);
  if (ink >= white) return ink >= 4.5 ? "#111827" : "#000000";
  return white >= 4.5 || white >= (L + 0.05) / 0.05 ? "#ffffff" : "#000000";
}

/** WCAG 2 relative luminance of an sRGB colour [r, g, b] in 0–255. */
function luminance(rgb) {
  const [r, g, b] = rgb.map((v) => {
    const c = v / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

const INK_L = luminance([0x11, 0x18, 0x27]);

/**
 * Pack a colour into the 32-bit word an `ImageData` Uint32 view expects (little-endian RGBA:
 * 0xAABBGGRR).
 */
function pack([r, g, b]) {
  return ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
}

/** 256-entry lookup tables for the heatmap cells: entry k is the colour of p with √p ≈ k / 255. */
const lut = (stops) => Uint32Array.from({ length: 256 }, (_, k) => pack(interpolate(stops, k / 255)));
export const PROB_LUT = lut(BLUES);
export const MISSED_LUT = lut(REDS);
export const ZERO_PX = pack(hexToRgb(ZERO));
export const SHADE_PX = pack(hexToRgb(SHADE));
/** One solid colour for a missed edge (the embed view, embed.js). */
export const MISSED_PX = pack(hexToRgb(MISSED));

/** LUT index of probability p > 0. */
export function probIndex(p) {
  return Math.min(255, Math.round(Math.sqrt(p) * 255));
}

/**
 * Method styles for plots (the Pareto plot, its exports, the corpus results): the family gives the
 * hue (sparse_core.methods.FAMILIES, the API's `family`), the method its shade and its marker, so
 * that no two methods share a colour and no two of a family share a marker. Markers are Plotly
 * symbol names (`MARKER_PATHS` draws them in a legend swatch).
 */
export const FAMILY_SHADES = {
  "sparse-transformer": ["#08519c", "#3182bd", "#6baed6"],
  learned: ["#4a1486", "#6a51a3", "#9e9ac8", "#807dba", "#3f007d"],
  baselines: ["#00441b", "#238b45", "#41ab5d", "#86bd7a"],
  predictors: ["#7f2704", "#c2410c", "#f97316", "#b91c1c", "#e11d48", "#a16207", "#d4a017"],
  oracles: ["#111827", "#6b7280"],
};
/** Marker symbols, one per method of a family, in the registry's order. */
export const MARKERS = ["circle", "square", "diamond", "triangle-up", "triangle-down", "cross", "x"];
/** Colours for a method of no known family (an older server): after every family's shades. */
const OTHER = ["#0e7490", "#be185d", "#4d7c0f", "#78350f", "#334155"];

/**
 * The style of every method of `methods` (the analysis' list, registry order: `name`, `family`).
 * @param {{name: string, family?: string}[]} methods
 * @returns {Map<string, {colour: string, marker: string}>}
 */
export function methodStyles(methods) {
  const seen = new Map(); // family -> how many of it so far
  const out = new Map();
  let other = 0;
  for (const m of methods) {
    const shades = FAMILY_SHADES[m.family ?? ""];
    const k = seen.get(m.family) ?? 0;
    seen.set(m.family, k + 1);
    if (shades && k < shades.length) out.set(m.name, { colour: shades[k], marker: MARKERS[k % MARKERS.length] });
    else {
      out.set(m.name, { colour: OTHER[other % OTHER.length], marker: MARKERS[(other + 2) % MARKERS.length] });
      other += 1;
    }
  }
  return out;
}

/** SVG path of a marker of radius r centred at (0, 0) (a legend swatch; Plotly draws the plot's). */
export function markerPath(marker, r = 5) {
  const t = (a) => [r * Math.cos(a), r * Math.sin(a)];
  const poly = (pts) => `M${pts.map(([x, y]) => `${x.toFixed(2)},${y.toFixed(2)}`).join("L")}Z`;
  const q = r * 0.35;
  switch (marker) {
    case "square": return `M${-r * 0.85},${-r * 0.85}H${r * 0.85}V${r * 0.85}H${-r * 0.85}Z`;
    case "diamond": return poly([[0, -r], [r, 0], [0, r], [-r, 0]]);
    case "triangle-up": return poly([t(-Math.PI / 2), t(Math.PI / 6), t((5 * Math.PI) / 6)]);
    case "triangle-down": return poly([t(Math.PI / 2), t((7 * Math.PI) / 6), t(-Math.PI / 6)]);
    case "cross": return `M${-q},${-r}H${q}V${-q}H${r}V${q}H${q}V${r}H${-q}V${q}H${-r}V${-q}H${-q}Z`;
    case "x": return `M${-r},${-r + q}L${-r + q},${-r}L0,${-q}L${r - q},${-r}L${r},${-r + q}L${q},0L${r},${r - q}L${r - q},${r}L0,${q}L${-r + q},${r}L${-r},${r - q}L${-q},0Z`;
    default: return `M${r},0A${r},${r} 0 1,1 ${-r},0A${r},${r} 0 1,1 ${r},0Z`;
  }
}

/** A legend swatch: the method's marker in its colour on a short line (as the plot draws it). */
export function swatch(colour, marker) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("class", "pareto-swatch");
  svg.setAttribute("viewBox", "-10 -6 20 12");
  svg.setAttribute("aria-hidden", "true");
  const line = document.createElementNS(NS, "path");
  line.setAttribute("d", "M-10,0H10");
  line.setAttribute("stroke", colour);
  line.setAttribute("stroke-width", "2");
  const mark = document.createElementNS(NS, "path");
  mark.setAttribute("d", markerPath(marker, 4.5));
  mark.setAttribute("fill", colour);
  svg.append(line, mark);
  return svg;
}
