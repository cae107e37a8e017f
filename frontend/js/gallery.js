/**
 * The gallery page (/gallery): draw each card's thumbnail of its head and mark the examples the
 * server has precomputed. The cards themselves (titles, explanations, figures) are rendered by
 * the server (frontend/templates/gallery.html); a card is a plain link to /gallery/{slug}.
 *
 * A thumbnail is `m` × `m` characters, row-major (scripts/build_gallery.py): `-` an exact zero,
 * `s` a zero inside the example's pattern, `1`–`f` p > 0 on the page's √p blue ramp.
 */

import { probColour, SHADE, ZERO } from "./colours.js";

/** Colour of one thumbnail character. */
function cellColour(ch) {
  if (ch === "-") return ZERO;
  if (ch === "s") return SHADE;
  const k = parseInt(ch, 16);
  return Number.isFinite(k) ? probColour((k / 15) ** 2) : ZERO;
}

/**
 * Paint a thumbnail on a canvas, crisp at the device's pixel ratio.
 * @param {HTMLCanvasElement} canvas
 * @param {{m: number, cells: string}} thumb
 */
export function drawThumb(canvas, thumb) {
  const size = canvas.clientWidth || canvas.width;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(size * dpr);
  canvas.height = Math.round(size * dpr);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = ZERO;
  ctx.fillRect(0, 0, size, size);
  const { m, cells } = thumb;
  const cell = size / m;
  for (let a = 0; a < m; a++) {
    for (let b = 0; b < m; b++) {
      const ch = cells[a * m + b];
      if (ch === "-" || ch === undefined) continue;
      ctx.fillStyle = cellColour(ch);
      // overlap by a hair so no seams show between cells
      ctx.fillRect(b * cell, a * cell, cell + 0.5, cell + 0.5);
    }
  }
  ctx.strokeStyle = "#9ca3af";
  ctx.lineWidth = 1;
  ctx.strokeRect(0.5, 0.5, size - 1, size - 1);
}

/** Ask the server which examples are precomputed, until all are (or a minute has passed). */
async function watchReady(status) {
  for (let k = 0; k < 30; k++) {
    let body;
    try {
      const resp = await fetch("/api/gallery", { headers: { Accept: "application/json" } });
      if (!resp.ok) return;
      body = await resp.json();
    } catch {
      return;
    }
    for (const ex of body.examples) {
      const chip = document.querySelector(`[data-ready-for="${CSS.escape(ex.slug)}"]`);
      if (chip) chip.hidden = !ex.ready;
    }
    if (body.precomputed) {
      status.textContent = "Every example is precomputed: it opens at once.";
      status.dataset.precomputed = "true";
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

function main() {
  const island = document.getElementById("gallery-thumbs");
  const thumbs = island ? JSON.parse(island.textContent) : {};
  for (const canvas of document.querySelectorAll("canvas[data-thumb]")) {
    const thumb = thumbs[canvas.dataset.thumb];
    if (thumb) drawThumb(canvas, thumb);
  }
  const status = document.getElementById("gallery-status");
  if (status && status.dataset.precomputed !== "true") watchReady(status);
}

main();
