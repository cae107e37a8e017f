/**
 * Method parameters: the JS twin of `sparse_core.methods.ParamSpec.clean` (strict coercion of one
 * value to a ParamSpec's kind and range), and the page's lenient completion of a parameter set
 * built on it (`resolveParams`). The specs are the ones GET /api/methods and POST /api/analyze
 * serve (docs/architecture.md, "Web contract"): `{name, kind, min, max, choices, default, ...}`.
 *
 * `cleanParam(spec, raw)` accepts or rejects exactly the values Python accepts or rejects, with
 * the same result (checked against golden data from Python by tests/js/check_twins.mjs):
 *
 *     int / float   a number, or a string in the plain form (`plainNumber`: one optional "-",
 *                   ASCII digits, an optional fraction; no whitespace, "+", "_", exponent or
 *                   other digits); finite; an int must be integral (5.0 -> 5);
 *                   never a boolean; then min ≤ v ≤ max
 *     bool          true / false, 0 / 1, or "true" "1" "yes" "on" / "false" "0" (any case)
 *     choice        a member of `choices`; with integer choices a numeric string or number
 *                   must be integral ("8.0" -> 8; "8.5" is refused, never rounded to a choice)
 *
 * JSON cannot tell 1 from 1.0, so for a bool spec the number 1 is read as the int 1 (accepted);
 * Python rejects the float 1.0, which no page value ever is.
 */

/** A value that a ParamSpec refuses; `field` is the parameter's name. */
export class ParamError extends Error {
  /** @param {string} field @param {string} message */
  constructor(field, message) {
    super(message);
    this.name = "ParamError";
    this.field = field;
  }
}

const PLAIN_RE = /^-?[0-9]+(?:\.[0-9]+)?$/;

/**
 * A number string in the plain form the server reads (sparse_core/methods/spec.py): one optional
 * "-", ASCII digits, an optional fraction. Anything else ("+4", " 5", "1_0", "1e1", "３") is null.
 * @param {string} s
 * @returns {number|null}
 */
export function plainNumber(s) {
  return PLAIN_RE.test(s) ? Number(s) : null;
}

const TRUE_WORDS = ["true", "1", "yes", "on"];
const BOOL_WORDS = [...TRUE_WORDS, "false", "0"];

/** "an integer in [1, 12]" etc., as ParamSpec's messages word it. */
function kindWords(spec) {
  if (spec.kind === "choice") return `one of ${(spec.choices ?? []).join(", ")}`;
  if (spec.kind === "bool") return "true or false";
  return `${spec.kind === "int" ? "an integer" : "a number"} in [${spec.min}, ${spec.max}]`;
}

/** Numeric choices read strings as numbers; integer choices take only integral values. */
function coerceChoice(spec, raw, bad) {
  const choices = spec.choices ?? [];
  const numeric = choices.length > 0 && typeof choices[0] === "number";
  const ints = numeric && choices.every(Number.isInteger);
  let v = raw;
  if (typeof v === "string" && numeric) {
    const f = plainNumber(v);
    if (f === null || !Number.isFinite(f) || (ints && !Number.isInteger(f))) throw bad;
    v = f;
  }
  if (typeof v === "boolean" || !choices.some((c) => c === v)) {
    throw new ParamError(spec.name, `${spec.name} must be one of ${choices.join(", ")}, got ${JSON.stringify(raw)}`);
  }
  return v;
}

/**
 * One value coerced to `spec`'s kind and range-checked: the twin of `ParamSpec.clean`.
 * @param {{name: string, kind: string, min?: number|null, max?: number|null,
 *   choices?: Array<string|number>|null}} spec
 * @param {unknown} raw a number, boolean or string (a URL value, a slider value)
 * @returns {number|boolean|string}
 * @throws {ParamError} naming the parameter, the value and what is allowed
 */
export function cleanParam(spec, raw) {
  const bad = new ParamError(spec.name, `${spec.name} must be ${kindWords(spec)}, got ${JSON.stringify(raw)}`);
  if (spec.kind === "choice") return coerceChoice(spec, raw, bad);
  if (spec.kind === "bool") {
    if (typeof raw === "boolean") return raw;
    if (typeof raw === "string" && BOOL_WORDS.includes(raw.toLowerCase())) {
      return TRUE_WORDS.includes(raw.toLowerCase());
    }
    if (raw === 0 || raw === 1) return raw === 1;
    throw bad;
  }
  let v = raw;
  if (typeof v === "string") v = plainNumber(v);
  if (typeof v !== "number" || !Number.isFinite(v)) throw bad;
  if (spec.kind === "int" && !Number.isInteger(v)) throw bad;
  const lo = spec.min ?? -Infinity;
  const hi = spec.max ?? Infinity;
  if (v < lo || v > hi) {
    throw new ParamError(spec.name, `${spec.name} must be in [${spec.min}, ${spec.max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

/**
 * `cleanParam`, or the nearest end of the range for a number outside it (an int must still be
 * integral), or the spec's default when the value is missing or refused: how the page reads a
 * URL value, a Pareto point's value or a control's value (address-notices.js words the change).
 * @param {object} spec ParamSpec
 * @param {unknown} raw
 */
export function coerceParam(spec, raw) {
  if (raw === undefined || raw === null || raw === "") return spec.default;
  try {
    return cleanParam(spec, raw);
  } catch (err) {
    if (!(err instanceof ParamError)) throw err;
    const v = typeof raw === "string" ? plainNumber(raw) : typeof raw === "number" ? raw : null;
    const numeric = (spec.kind === "int" || spec.kind === "float") && v !== null && Number.isFinite(v);
    if (numeric && (spec.kind === "float" || Number.isInteger(v))) {
      if (spec.max != null && v > spec.max) return spec.max;
      if (spec.min != null && v < spec.min) return spec.min;
    }
    return spec.default;
  }
}

/**
 * Every parameter of a method (add-ons included) from `raw`; missing or refused values take
 * their defaults, unknown names are dropped. Cross-parameter rules (c ≤ stride, top_k ≤ B) are
 * the predictors' (methods.js), which throw as `Method.validate` does.
 * @param {{params: object[]}} methodSpec one entry of analysis.methods
 * @param {Object<string, unknown>} [raw]
 * @returns {Object<string, number|boolean|string>}
 */
export function resolveParams(methodSpec, raw = {}) {
  return Object.fromEntries(methodSpec.params.map((p) => [p.name, coerceParam(p, raw[p.name])]));
}
