/**
 * Head roles in colours and words (definitions §11, sparse_core/roles.py): the head grid's colour,
 * tile label and legend for each role, and the sentence that says what one head does. Pure
 * functions: no fetching (roles.js loads the roles; grid.js paints them).
 */

/**
 * Each role: its tile colour (Okabe–Ito, told apart with common colour-vision deficiencies; grey
 * for sink, light grey for mixed), its tile label and what the top key is, in words.
 */
export const ROLE_INFO = Object.freeze({
  sink: { colour: "rgb(107, 114, 128)", label: "sink", what: "[CLS], [SEP] or the first token" },
  previous: { colour: "rgb(0, 114, 178)", label: "prev", what: "the previous token" },
  next: { colour: "rgb(86, 180, 233)", label: "next", what: "the next token" },
  self: { colour: "rgb(204, 121, 167)", label: "self", what: "itself" },
  delimiter: { colour: "rgb(230, 159, 0)", label: "punct", what: "punctuation" },
  syntactic: {
    colour: "rgb(0, 158, 115)", label: "syn",
    what: "its word's dependency head or a dependent",
  },
  local: { colour: "rgb(240, 228, 66)", label: "near", what: "a token two positions away" },
  broad: { colour: "rgb(213, 94, 0)", label: "broad", what: "" },
  mixed: { colour: "rgb(229, 231, 235)", label: "mix", what: "" },
});

/** The roles in the order the server tests them, then mixed (the legend's order). */
export const ROLE_ORDER = Object.freeze(Object.keys(ROLE_INFO));

/** A share as a whole percentage with a thin space ("83 %"). */
export function pct(x) {
  return `${Math.round(100 * x)} %`;
}

/** What the rows of `role` do, as a verb phrase ("attends to the previous token"). */
function doing(role) {
  if (role === "broad") return "spreads over more than half of the keys";
  return `attends to ${ROLE_INFO[role]?.what ?? role}`;
}

/**
 * The sentence for one head's role item ({role, share, leading, shares, rows, syntax}).
 * @param {{role: string, share: number, leading: string, rows: number,
 *   syntax: {relation: string, direction: string, accuracy: number, rows: number,
 *   baseline: number, offset: number}|null}} item
 * @returns {string}
 */
export function roleSentence(item) {
  if (!item || !item.rows) return "No query rows to describe.";
  let s;
  if (item.role === "mixed") {
    s = `No single role (mixed): it most often ${doing(item.leading)}, in ${pct(item.share)} of rows.`;
  } else if (item.share < 0.5) {
    s = `Mostly broad: it ${doing("broad")} in ${pct(item.share)} of rows.`;
  } else {
    const what = doing(item.role);
    s = `${what[0].toUpperCase()}${what.slice(1)} in ${pct(item.share)} of rows (${item.role}).`;
  }
  const x = item.syntax;
  if (x) {
    const hit = x.direction === "head" ? "the word's head" : `a ${x.relation} dependent of the word`;
    const k = x.offset > 0 ? `+${x.offset}` : String(x.offset);
    s += ` Tracks ${x.relation} best: the top key is ${hit} in ${pct(x.accuracy)} of its ` +
      `${x.rows} rows (always taking the token at ${k}: ${pct(x.baseline)}).`;
  }
  return s;
}
