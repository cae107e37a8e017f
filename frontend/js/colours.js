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
