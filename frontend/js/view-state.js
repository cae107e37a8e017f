/**
 * The page's view state, read from its one definition (view-schema.js, generated from
 * sparse_core/view_schema.py VIEW_FIELDS): the store's defaults (state.js), the address codec
 * (url.js) and the share codec (share.js, main.js, embed.js). The server reads addresses and
 * shares with the same rules and the same messages (sparse_core.view_codec: decode_query,
 * from_share, to_share; tests/test_view_schema.py runs both on the same cases).
 *
 * A field: `key` (the store's name), `kind` (bool | int | float | enum | str | params),
 * `default`, `query` (its address key), `share` (its ShareState key; `view.<name>` for a flag),
 * `write` (when the address holds it), bounds (`lo`/`hi`, `values`, `maxLen`, `pattern`), and
 * `nullable`. A value a field does not allow is left out and reported as
 * `<key> must be <what is allowed>, got <the value as JSON>`; in an address, a number outside its
 * field's range is clamped to the nearest end instead, with a notice
 * `<key>=<value> is above the maximum <hi>: using <hi>` (or below the minimum).
 */

import { VIEW_SCHEMA } from "./view-schema.js";

/** Every field, in the order the address writes them. */
export const VIEW_FIELDS = VIEW_SCHEMA.fields;
const BY_KEY = new Map(VIEW_FIELDS.map((f) => [f.key, f]));
/** The `ShareState.view` flags by name (`grid` -> the gridColour field). */
export const FLAGS = new Map(
  VIEW_FIELDS.filter((f) => f.share?.startsWith("view.")).map((f) => [f.share.slice(5), f]),
);
export const MAX_TEXT_IN_URL = VIEW_SCHEMA.maxTextInUrl;
const PREFIX = VIEW_SCHEMA.paramPrefix;
const PARAM_NAME = new RegExp(VIEW_SCHEMA.paramName);

/** The field named `key` of the store. */
export function field(key) {
  const f = BY_KEY.get(key);
  if (!f) throw new Error(`no view field ${key}`);
  return f;
}

/** Store keys the address holds (a change of one rewrites it, session.js). */
export const QUERY_KEYS = VIEW_FIELDS.filter((f) => f.query && f.state !== false).map((f) => f.key);

/** The store's view fields at their defaults (a fresh `params` object each call). */
export function viewDefaults() {
  const out = {};
  for (const f of VIEW_FIELDS) if (f.state !== false) out[f.key] = copy(f.default);
  return out;
}

function copy(v) {
  return v !== null && typeof v === "object" ? { ...v } : v;
}

// ------------------------------------------------------------------ messages

/** A value as a message quotes it: JSON, a long string cut to `shownChars` characters. */
export function shown(value) {
  if (typeof value === "string") {
    const chars = [...value]; // code points, as Python counts them
    if (chars.length > VIEW_SCHEMA.shownChars) {
      return `${JSON.stringify(chars.slice(0, VIEW_SCHEMA.shownChars).join(""))}…`;
    }
  }
  return JSON.stringify(value);
}

/** What `f` allows (after "must be"), from the address (`source` "query") or a share. */
export function allowed(f, source) {
  const empty = source === "query" ? " or empty" : " or null";
  if (f.kind === "bool") return source === "query" ? "1 or 0" : "true or false";
  if (f.kind === "int") return `a whole number in [${f.lo}, ${f.hi}]${f.nullable ? empty : ""}`;
  if (f.kind === "float") {
    return `a number in [${f.lo}, ${f.hi}]${(f.values ?? []).map((v) => ` or ${v}`).join("")}`;
  }
  if (f.kind === "enum") return `one of ${f.values.join(", ")}`;
  if (f.kind === "params") {
    return `at most ${VIEW_SCHEMA.maxParams} values, each named ${VIEW_SCHEMA.paramHint}`;
  }
  let what = f.hint || "a string";
  if (f.maxLen != null) what += ` of at most ${f.maxLen} characters`;
  return what + (f.nullable ? empty : "");
}

/** A value a field does not allow; the message says what is allowed and what came. */
export class Rejected extends Error {}

/** An address number outside its field's range: `value` is the nearest allowed one. */
export class Clamped extends Error {
  /** @param {string} message @param {number} value */
  constructor(message, value) {
    super(message);
    this.value = value;
  }
}

const SIGNED = /^-?[0-9]+$/;

/** The clamp of an address number out of `f`'s range, or null (not a number of its kind). */
function clampOf(f, raw) {
  const whole = f.kind === "int" && SIGNED.test(raw);
  if (!whole && !(f.kind === "float" && DECIMAL.test(raw))) return null;
  const v = Number(raw);
  const where = f.query ?? f.key;
  if (v > f.hi) return new Clamped(`${where}=${raw} is above the maximum ${f.hi}: using ${f.hi}`, f.hi);
  if (v < f.lo) return new Clamped(`${where}=${raw} is below the minimum ${f.lo}: using ${f.lo}`, f.lo);
  return null;
}

function reject(where, f, value, source) {
  return new Rejected(`${where} must be ${allowed(f, source)}, got ${shown(value)}`);
}

// ------------------------------------------------------------------ one value

const DIGITS = /^[0-9]+$/;
const DECIMAL = /^-?[0-9]+(\.[0-9]+)?$/;

function fits(f, s) {
  if (f.maxLen != null && [...s].length > f.maxLen) return false;
  return f.pattern == null || new RegExp(f.pattern).test(s);
}

/** The value of address string `raw` for field `f`; throws Rejected when it does not fit. */
export function queryValue(f, raw) {
  if (f.nullable && raw === "") return null;
  if (f.kind === "bool" && (raw === "1" || raw === "0")) return raw === "1";
  if (f.kind === "int" && DIGITS.test(raw) && Number(raw) >= f.lo && Number(raw) <= f.hi) {
    return Number(raw);
  }
  if (f.kind === "float" && DECIMAL.test(raw) && Number(raw) >= f.lo && Number(raw) <= f.hi) {
    return Number(raw);
  }
  if (f.kind === "float" && f.values?.includes(raw)) return raw; // a word beside the numbers
  if (f.kind === "enum" && f.values.includes(raw)) return raw;
  if (f.kind === "str" && fits(f, raw)) return raw;
  throw clampOf(f, raw) ?? reject(f.query ?? f.key, f, raw, "query");
}

const isNumber = (v) => typeof v === "number" && Number.isFinite(v);

/**
 * The value of JSON value `value` for field `f` in a share (a tile size given as a number
 * becomes its string); throws Rejected when it does not fit.
 */
export function shareValue(f, value, where = f.share ?? f.key) {
  if (value === null || value === undefined) {
    if (f.nullable) return null;
  } else if (f.kind === "bool") {
    if (typeof value === "boolean") return value;
  } else if (f.kind === "int") {
    if (Number.isInteger(value) && value >= f.lo && value <= f.hi) return value;
  } else if (f.kind === "float") {
    if (isNumber(value) && value >= f.lo && value <= f.hi) return value;
    if (typeof value === "string" && f.values?.includes(value)) return value;
  } else if (f.kind === "enum") {
    const text = isNumber(value) ? String(value) : value;
    if (typeof text === "string" && f.values.includes(text)) return text;
  } else if (f.kind === "str") {
    if (typeof value === "string" && fits(f, value)) return value;
  }
  throw reject(where, f, value ?? null, "share");
}

// ------------------------------------------------------------------ the address

/** A store value as the address writes it. */
function queryString(f, v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "boolean") return v ? "1" : "0";
  return String(v);
}

/**
 * The query string of a state (without the leading "?"). `withText: false` (a page opened on a
 * saved view): no text, and every `changed` field written out, so that it overrides the view.
 * @param {import("./state.js").State} s
 */
export function encodeQuery(s, { withText = true } = {}) {
  const q = new URLSearchParams();
  const all = !withText;
  for (const f of VIEW_FIELDS) {
    const v = s[f.key] === undefined ? f.default : s[f.key];
    switch (f.write) {
      case "text":
        if (!withText);
        else if (v && v.length <= MAX_TEXT_IN_URL) q.set(f.query, v);
        else if (s.analysis) q.set(field("id").query, s.analysis.id);
        break;
      case "set":
        if (v !== null && v !== undefined && v !== "") q.set(f.query, queryString(f, v));
        break;
      case "analysis":
        if (s.analysis) q.set(f.query, queryString(f, v));
        break;
      case "truncate":
        if (s.truncate) q.set(f.query, queryString(f, v ?? f.default));
        break;
      case "changed":
        if (v !== f.default || all) q.set(f.query, queryString(f, v));
        break;
      case "always":
        if (f.kind !== "params") q.set(f.query, queryString(f, v));
        else for (const [k, x] of Object.entries(v ?? {})) q.set(`${PREFIX}${k}`, queryString(f, x));
        break;
      default: // "never"
    }
  }
  return q.toString();
}

/**
 * Read a query string: the store fields its keys name (the first value of a repeated key),
 * `params` (raw strings: controls.js coerces them against the method's ParamSpecs) only with
 * a `method` read or a `p.` key, so that it can override a saved view; `start` with `truncate: true`.
 * Values a field does not allow are left out, each with a message keyed by its address key
 * (`errors`); numbers out of their field's range are clamped to it, each with a notice
 * (`notices`, keyed likewise).
 * @param {string} search e.g. `location.search`
 * @returns {{state: object, errors: Object<string, string>, notices: Object<string, string>}}
 */
export function decodeQuery(search) {
  const first = new Map();
  for (const [k, v] of new URLSearchParams(search)) if (!first.has(k)) first.set(k, v);
  const state = {};
  const errors = {};
  const notices = {};
  for (const f of VIEW_FIELDS) {
    if (!f.query) continue;
    if (f.kind === "params") {
      const keys = [...first.keys()].filter((k) => k.startsWith(PREFIX));
      // only with a method read (the field before) or a slider value
      if (keys.length || "method" in state) state[f.key] = decodeParams(first, keys, errors);
      continue;
    }
    if (!first.has(f.query)) continue;
    try {
      state[f.key] = queryValue(f, first.get(f.query));
    } catch (err) {
      if (err instanceof Clamped) {
        state[f.key] = err.value;
        notices[f.query] = err.message;
      } else if (err instanceof Rejected) {
        errors[f.query] = err.message;
        continue;
      } else throw err;
    }
    if (f.write === "truncate") state.truncate = true;
  }
  return { state, errors, notices };
}

function decodeParams(first, keys, errors) {
  const out = {};
  let count = 0;
  for (const k of keys) {
    const name = k.slice(PREFIX.length);
    const raw = first.get(k);
    if (!PARAM_NAME.test(name)) {
      errors[k] = `${shown(k)} is not a slider: a name is ${VIEW_SCHEMA.paramHint}`;
    } else if ([...raw].length > VIEW_SCHEMA.paramMaxChars) {
      errors[k] = `${k} must be at most ${VIEW_SCHEMA.paramMaxChars} characters, got ${shown(raw)}`;
    } else if (count >= VIEW_SCHEMA.maxParams) {
      errors[k] = `${k} is one slider too many: at most ${VIEW_SCHEMA.maxParams}`;
    } else {
      out[name] = raw;
      count += 1;
    }
  }
  return out;
}

// ------------------------------------------------------------------ share links

/**
 * The known flags of a `ShareState.view` checked (other keys, another client's, pass), with a
 * message per flag left out (keyed `view.<name>`).
 */
export function shareFlags(view) {
  const flags = {};
  const errors = {};
  for (const [name, value] of Object.entries(view ?? {})) {
    const f = FLAGS.get(name);
    if (!f) {
      flags[name] = value;
      continue;
    }
    try {
      flags[name] = shareValue(f, value);
    } catch (err) {
      if (!(err instanceof Rejected)) throw err;
      errors[`view.${name}`] = err.message;
    }
  }
  return { flags, errors };
}

/**
 * The store fields of a saved view (a ShareState the server validated): every shared field (its
 * default where the share omits it, or holds null where null is not allowed) and the valid
 * `view` flags.
 * @returns {{state: object, errors: Object<string, string>}}
 */
export function fromShare(share) {
  const view = share.view !== null && typeof share.view === "object" ? share.view : {};
  const { flags, errors } = shareFlags(view);
  const state = {};
  for (const f of VIEW_FIELDS) {
    if (!f.share || f.state === false) continue;
    const name = f.share.startsWith("view.") ? f.share.slice(5) : null;
    if (name !== null) {
      if (name in flags) state[f.key] = flags[name];
      continue;
    }
    const v = share[f.share] ?? null;
    state[f.key] = v === null && !f.nullable ? copy(f.default) : v;
  }
  state.truncate = Boolean(state.truncate);
  return { state, errors };
}

/**
 * The ShareState of store fields: every top-level field, `start` only for a window (`truncate`
 * and not 0), `view` flags only where they differ from their default, `lecture_step` null.
 */
export function toShare(s) {
  const out = {};
  const view = {};
  for (const f of VIEW_FIELDS) {
    if (!f.share || f.state === false) continue;
    const v = s[f.key] === undefined ? f.default : s[f.key];
    if (f.share.startsWith("view.")) {
      if (v !== f.default) view[f.share.slice(5)] = v;
    } else if (f.write === "truncate") {
      if (s.truncate && v) out[f.share] = v;
    } else out[f.share] = copy(v);
  }
  out.lecture_step = null;
  out.view = view;
  return out;
}
