#!/usr/bin/env node
/**
 * Check the browser's JS twins against golden data written by Python (tests/test_twins.py):
 *
 *     node tests/js/check_twins.mjs <golden.json> [--js <frontend/js folder>]
 *
 * Plain ESM imports of the page's own modules (head.js, methods.js, metrics.js, params.js,
 * rng.js; no npm packages, no browser). Golden format "sparsescope-twins/1":
 *
 *     registry   [name, ...]                 sparse_core.methods.METHODS, in order: methods.js
 *                                            PREDICTORS must name exactly these, in this order
 *     rng        [{ints, u32, uniform}]      rng.js hashU32 / hashUniform
 *     coercion   [{method, spec, raw, value | rejected}]
 *                                            params.js cleanParam(spec, raw) === value, or throws
 *                                            a ParamError where ParamSpec.clean raised
 *     heads      [{name, n, causal, payload, methods, cases, pareto}]
 *         payload  the GET /api/analyses/{id}/heads/{l}/{h} body, prepared by head.js
 *         methods  the analysis' method specs (POST /api/analyze "methods")
 *         cases    [{method, params, mask, metrics} | {method, params, rejected}]: the page's path,
 *                  predict(head, method, resolveParams(spec, params)), must give `mask` ("0"/"1"
 *                  n² characters, row-major) and computeMetrics every key of `metrics` exactly
 *                  (===), or throw where Python rejected the setting
 *         pareto   {points: [{method, params, sparsity, recall, exact, precision}]}: the server's
 *                  sweep for this head (figures rounded to 6 decimals); the JS must reproduce each
 *                  figure within that rounding
 *
 * Every mismatch is printed with the head, method, params, n, causal and (masks) the first
 * differing cell; the last line counts what was checked. Exit status 0: no mismatch; 1: some;
 * 2: the golden file or the modules could not be read.
 */

import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const FORMAT = "sparsescope-twins/1";
const SHOWN = 40;
/** Pareto figures come rounded to 6 decimals (sparse_core.pareto._r). */
const ROUNDING = 5e-7 + 1e-12;
/**
 * Metrics that are float sums rather than ratios of integers: mass recall adds P in another order
 * here (row-major) than numpy does, so it agrees to ~1e-15, not to the bit.
 */
const FLOAT_SUMS = { mass_recall: 1e-12 };

function usage(message) {
  process.stderr.write(`check_twins: ${message}\n`);
  process.stderr.write("usage: node tests/js/check_twins.mjs <golden.json> [--js <folder>]\n");
  process.exit(2);
}

function parseArgs(argv) {
  const here = dirname(fileURLToPath(import.meta.url));
  let js = resolve(here, "..", "..", "frontend", "js");
  let golden = null;
  for (let k = 0; k < argv.length; k++) {
    if (argv[k] === "--js") js = resolve(argv[++k] ?? usage("--js needs a folder"));
    else if (golden === null) golden = argv[k];
    else usage(`unexpected argument ${argv[k]}`);
  }
  if (golden === null) usage("no golden file given");
  return { golden, js };
}

async function loadModules(js) {
  const load = (name) => import(pathToFileURL(resolve(js, name)).href);
  const [head, methods, metrics, params, rng] = await Promise.all(
    ["head.js", "methods.js", "metrics.js", "params.js", "rng.js"].map(load),
  );
  return { head, methods, metrics, params, rng };
}

/** Collects mismatches; prints the first SHOWN of them. */
class Report {
  constructor() {
    this.mismatches = 0;
    this.counts = {};
  }

  count(what) {
    this.counts[what] = (this.counts[what] ?? 0) + 1;
  }

  fail(line) {
    this.mismatches++;
    if (this.mismatches <= SHOWN) process.stdout.write(`MISMATCH ${line}\n`);
  }
}

/** The golden data itself is wrong (exit status 2, not a twin mismatch). */
class GoldenError extends Error {}

const show = (v) => (v === undefined ? "undefined" : JSON.stringify(v));

function checkRegistry(golden, m, report) {
  const names = Object.keys(m.methods.PREDICTORS);
  const want = golden.registry;
  for (const name of want) if (!names.includes(name)) report.fail(`registry: missing predictor for ${name}`);
  for (const name of names) if (!want.includes(name)) report.fail(`registry: extra predictor ${name} (not in sparse_core.methods.METHODS)`);
  const common = names.filter((x) => want.includes(x));
  const order = want.filter((x) => names.includes(x));
  if (common.join() !== order.join()) {
    report.fail(`registry: predictors in order ${common.join(", ")}, the registry's is ${order.join(", ")}`);
  }
  report.counts.registry = want.length;
}

function checkRng(golden, m, report) {
  for (const { ints, u32, uniform } of golden.rng) {
    const got = [m.rng.hashU32(...ints), m.rng.hashUniform(...ints)];
    if (got[0] !== u32 || got[1] !== uniform) {
      report.fail(`rng: ints ${show(ints)}: python ${u32} / ${uniform}, js ${got[0]} / ${got[1]}`);
    }
    report.count("rng");
  }
}

function checkCoercion(golden, m, report) {
  for (const c of golden.coercion) {
    const { name, kind, choices, min, max } = c.spec;
    const allowed = kind === "choice" ? ` of ${choices.join("|")}` : kind === "bool" ? "" : ` in [${min}, ${max}]`;
    const what = `coercion: ${name} (${kind}${allowed}) raw ${show(c.raw)}`;
    let got;
    try {
      got = { value: m.params.cleanParam(c.spec, c.raw) };
    } catch (err) {
      got = err instanceof m.params.ParamError ? { rejected: err.message } : { error: String(err) };
    }
    const py = "rejected" in c ? `rejected (${c.rejected})` : `${show(c.value)}`;
    if (got.error) report.fail(`${what}: python ${py}, js threw ${got.error}`);
    else if ("rejected" in c && !("rejected" in got)) report.fail(`${what}: python ${py}, js ${show(got.value)}`);
    else if ("value" in c && got.value !== c.value) {
      report.fail(`${what}: python ${py}, js ${"rejected" in got ? `rejected (${got.rejected})` : show(got.value)}`);
    }
    report.count("coercion");
  }
}

/** Every key of Python's metrics (nested objects key by key), to the last bit. */
function compareMetrics(where, want, got, report) {
  for (const [key, w] of Object.entries(want)) {
    if (got === null || typeof got !== "object" || !(key in got)) {
      report.fail(`${where}.${key}: computeMetrics does not give it`);
    } else if (w !== null && typeof w === "object") {
      compareMetrics(`${where}.${key}`, w, got[key], report);
    } else if (key in FLOAT_SUMS ? !(Math.abs(got[key] - w) <= FLOAT_SUMS[key]) : got[key] !== w) {
      report.fail(`${where}.${key}: python ${w}, js ${got[key]}`);
    }
  }
}

/** Block sparsity of random masks at lengths the heads do not reach (ragged tiles of 16–128). */
function checkBlocks(golden, m, report) {
  for (const { n, causal, mask, block_sparsity: want } of golden.blocks ?? []) {
    const cells = Uint8Array.from(mask, (ch) => Number(ch));
    const got = m.metrics.computeMetrics(cells, new Uint8Array(n * n), n, causal);
    compareMetrics(`blocks n=${n} causal=${causal}: block_sparsity`, want, got.block_sparsity, report);
    report.count("block masks");
  }
}

/** First differing cell of an expected "0"/"1" string and a 0/1 array, and how many differ. */
function compareMask(want, got, n) {
  let first = -1;
  let diff = 0;
  for (let x = 0; x < n * n; x++) {
    if (Number(want[x]) !== got[x]) {
      diff++;
      if (first < 0) first = x;
    }
  }
  return { first, diff };
}

/** The page's path: the analysis' spec, the params it resolves, the finished mask. */
function pagePredict(m, h, head, method, raw) {
  const spec = h.methods.find((s) => s.name === method);
  if (!spec) throw new Error(`${method} is not in the analysis' methods`);
  for (const [k, v] of Object.entries(raw)) {
    const p = spec.params.find((s) => s.name === k);
    if (!p) throw new GoldenError(`${method} has no parameter ${k}`);
    try {
      m.params.cleanParam(p, v);
    } catch (err) {
      // mask cases hold values each spec accepts; refusals are coercion cases
      throw new GoldenError(`${method} ${k} = ${show(v)} is refused by its spec: ${err.message}`);
    }
  }
  const params = m.params.resolveParams(spec, raw);
  return m.methods.predict(head, method, params);
}

function checkHead(h, m, report) {
  const head = m.head.prepareHead(h.payload, h.causal);
  const n = head.n;
  if (n !== h.n) report.fail(`[${h.name}] payload n = ${n}, golden n = ${h.n}`);
  for (const c of h.cases) {
    const where = `[${h.name}] method=${c.method} params=${show(c.params)} n=${n} causal=${h.causal}`;
    let mask = null;
    let error = null;
    try {
      mask = pagePredict(m, h, head, c.method, c.params);
    } catch (err) {
      if (err instanceof GoldenError) throw err;
      error = err;
    }
    report.count(c.rejected !== undefined ? "rejections" : "masks");
    if (c.rejected !== undefined) {
      if (!error) report.fail(`${where}: python rejects it (${c.rejected}), js computed a mask`);
      continue;
    }
    if (error) {
      report.fail(`${where}: python computed a mask, js threw ${error.name}: ${error.message}`);
      continue;
    }
    const { first, diff } = compareMask(c.mask, mask, n);
    if (diff > 0) {
      const i = Math.floor(first / n);
      const j = first % n;
      report.fail(
        `${where}: mask differs at (i=${i}, j=${j}): python ${c.mask[first]}, js ${mask[first]} ` +
          `(${diff} of ${n * n} cells differ)`,
      );
      continue;
    }
    const got = m.metrics.computeMetrics(mask, head.gold, n, head.causal, undefined, head.probs);
    compareMetrics(`${where}: metrics`, c.metrics, got, report);
  }
  h.pareto.points.forEach((p, k) => {
    const where = `[${h.name}] pareto point ${k} method=${p.method} params=${show(p.params)} n=${n} causal=${h.causal}`;
    let got;
    try {
      const mask = pagePredict(m, h, head, p.method, p.params);
      got = m.metrics.computeMetrics(mask, head.gold, n, head.causal, undefined, head.probs);
    } catch (err) {
      if (err instanceof GoldenError) throw err;
      report.fail(`${where}: js threw ${err.name}: ${err.message}`);
      return;
    }
    for (const key of ["sparsity", "recall", "exact", "precision", "mass_recall"]) {
      if (key in p && !(Math.abs(got[key] - p[key]) <= ROUNDING)) {
        report.fail(`${where}: ${key}: server ${p[key]}, js ${got[key]}`);
      }
    }
    for (const [b, want] of Object.entries(p.block_sparsity ?? {})) {
      const js = got.block_sparsity?.[b];
      if (!(Math.abs(js - want) <= ROUNDING)) report.fail(`${where}: block_sparsity.${b}: server ${want}, js ${js}`);
    }
    report.count("pareto points");
  });
  report.count("heads");
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  let golden;
  try {
    golden = JSON.parse(readFileSync(args.golden, "utf8"));
  } catch (err) {
    usage(`cannot read ${args.golden}: ${err.message}`);
  }
  if (golden?.format !== FORMAT) usage(`${args.golden} is not ${FORMAT} golden data (format ${show(golden?.format)})`);
  let m;
  try {
    m = await loadModules(args.js);
  } catch (err) {
    usage(`cannot import the JS modules from ${args.js}: ${err.message}`);
  }
  const report = new Report();
  checkRegistry(golden, m, report);
  checkRng(golden, m, report);
  checkCoercion(golden, m, report);
  checkBlocks(golden, m, report);
  try {
    for (const h of golden.heads) checkHead(h, m, report);
  } catch (err) {
    if (err instanceof GoldenError) usage(`bad golden data: ${err.message}`);
    throw err;
  }
  if (report.mismatches > SHOWN) process.stdout.write(`… and ${report.mismatches - SHOWN} more\n`);
  const counts = Object.entries(report.counts).map(([k, v]) => `${v} ${k}`).join(", ");
  process.stdout.write(`twins: checked ${counts}: ${report.mismatches} mismatches\n`);
  process.exit(report.mismatches > 0 ? 1 : 0);
}

await main();
