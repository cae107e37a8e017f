/**
 * The lecture's twelve steps, one idea each, in order. A step renders a picture into `ctx.figure`
 * and its formulas into `ctx.panel`; `refresh`, when present, redraws after a new analysis
 * without rebuilding the panel (so a slider being dragged stays put).
 * @module lecture/steps
 */

import { renderMask, renderScores, renderTokens, renderVectors } from "./steps-attention.js";
import { refreshEntmax, renderEntmax, renderGraph } from "./steps-sparse.js";
import { renderPatterns } from "./step-patterns.js";
import { renderFinder } from "./step-finder.js";
import { renderPareto } from "./step-pareto.js";
import { renderBlocks } from "./step-blocks.js";
import { renderFlow } from "./step-flow.js";
import { renderAdaptive } from "./step-adaptive.js";

/**
 * @typedef {object} StepContext
 * @property {import("./state.js").LectureState} state
 * @property {any} analysis       POST /api/analyze body
 * @property {number} layer
 * @property {number} head
 * @property {string[]} labels    token texts
 * @property {boolean[]} special  special tokens ([CLS], [SEP])
 * @property {number} focus       the query row the slides follow
 * @property {any} headData       GET …/heads/{layer}/{head} body
 * @property {import("../head.js").HeadData} prepared  that body prepared for the explorer's
 *   predictors (../methods.js) and metrics (../metrics.js)
 * @property {{queries: number[][], keys: number[][], scores: number[][], d_head: number,
 *   d_model: number} | null} raw  GET …/raw/{layer}/{head} body, null when unavailable
 * @property {string} rawError    why `raw` is null
 * @property {Float64Array} P     dense (n, n) entmax probabilities, row-major
 * @property {Uint8Array} gold   G as a row-major 0/1 mask
 * @property {number} goldCount   |G|
 * @property {HTMLElement} figure the picture area (emptied before render)
 * @property {HTMLElement} panel  the formula panel (emptied before render)
 * @property {{width: number, height: number}} size  the picture area in CSS px
 * @property {(patch: object) => void} update  change alpha / causal / head and re-run
 * @property {() => Promise<any>} pareto  the head's Pareto sweep (fetched on demand)
 */

/**
 * @typedef {object} Step
 * @property {string} short  label in the progress bar
 * @property {string} title  slide title
 * @property {(ctx: StepContext) => (void|Promise<void>)} render
 * @property {(ctx: StepContext) => void} [refresh]
 * @property {boolean} [wide]  two pictures side by side: give the picture more of the width
 */

/** @type {Step[]} */
export const STEP_LIST = [
  { short: "tokens", title: "Tokens become vectors", render: renderTokens },
  { short: "q · k", title: "Queries and keys", render: renderVectors },
  { short: "scores", title: "Scores: scaled dot products", render: renderScores },
  { short: "mask", title: "The causal mask", render: renderMask },
  {
    short: "entmax",
    title: "softmax vs α-entmax: exact zeros",
    render: renderEntmax,
    refresh: refreshEntmax,
    wide: true,
  },
  { short: "graph", title: "The attention graph G", render: renderGraph },
  {
    short: "patterns",
    title: "Sparse Transformer: strided and fixed",
    render: renderPatterns,
    wide: true,
  },
  { short: "Sparsefinder", title: "Sparsefinder: learned projections", render: renderFinder },
  { short: "trade-off", title: "The sparsity–recall trade-off", render: renderPareto },
  { short: "blocks", title: "Block selection: what kernels keep", render: renderBlocks },
  { short: "flow", title: "Through the layers: information flow", render: renderFlow },
  { short: "own α", title: "Adaptive sparsity: α per head", render: renderAdaptive },
];
