#!/usr/bin/env node
/**
 * Run the page's view-state codec (frontend/js/view-state.js) on cases written by Python
 * (tests/test_view_schema.py), which runs sparse_core.view_schema on the same cases and compares:
 *
 *     node tests/js/view_state_cases.mjs <cases.json> [--js <frontend/js folder>]
 *
 * cases.json: [{op: "decode", query} | {op: "encode", state, withText} | {op: "toShare", state}
 * | {op: "fromShare", share}]; stdout: one JSON array, one answer per case in order: decode and
 * fromShare give {state, errors}, encode a query string, toShare a ShareState. `--js` reads the
 * modules from another folder (a copy whose view-schema.js has a field more). Exit status 2 when
 * the cases or the modules cannot be read.
 */

import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const at = args.indexOf("--js");
const root = at >= 0 ? resolve(args[at + 1]) : resolve(dirname(fileURLToPath(import.meta.url)), "../../frontend/js");
const file = args.find((a, k) => !a.startsWith("--") && (at < 0 || k !== at + 1));
let codec;
let cases;
try {
  codec = await import(pathToFileURL(resolve(root, "view-state.js")).href);
  cases = JSON.parse(readFileSync(file, "utf8"));
} catch (err) {
  process.stderr.write(`view_state_cases: ${err.message}\n`);
  process.exit(2);
}

const answers = cases.map((c) => {
  if (c.op === "decode") return codec.decodeQuery(c.query);
  if (c.op === "encode") return codec.encodeQuery(c.state, { withText: c.withText });
  if (c.op === "toShare") return codec.toShare(c.state);
  if (c.op === "fromShare") return codec.fromShare(c.share);
  throw new Error(`unknown op ${c.op}`);
});
process.stdout.write(JSON.stringify(answers));
