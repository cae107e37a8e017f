/**
 * A slider's scale that fits its range, pure (tests/js/slider_scale.test.mjs). A range of a few
 * hundred values on a slider of a few hundred pixels is linear; a wider one (the window width at
 * n = 512 runs 0–1023) takes a square-root scale, so small values (where a width matters most) get
 * many pixels each and the far end fewer; the number field beside it reaches every value exactly.
 */

/** The slider positions of a square-root scale. */
export const POSITIONS = 1000;

/**
 * @typedef {object} Scale
 * @property {"linear"|"sqrt"} kind
 * @property {number} min the range input's min
 * @property {number} max the range input's max
 * @property {number|string} step the range input's step
 * @property {(pos: number) => number} toValue a slider position -> the parameter value
 * @property {(value: number) => number} toPos a parameter value -> the slider position
 */

/**
 * The scale of a numeric ParamSpec on a slider of `px` CSS pixels.
 * @param {{kind: string, min: number, max: number, step?: number|null}} spec
 * @param {number} px
 * @returns {Scale}
 */
export function sliderScale(spec, px) {
  const step = spec.step ?? (spec.kind === "int" ? 1 : 0);
  const span = spec.max - spec.min;
  const values = step > 0 ? span / step : Infinity;
  if (spec.kind !== "int" || values <= 2 * px || span <= 0) {
    return {
      kind: "linear", min: spec.min, max: spec.max, step: step || "any",
      toValue: (pos) => pos, toPos: (v) => v,
    };
  }
  const toValue = (pos) => {
    const t = Math.min(1, Math.max(0, pos / POSITIONS));
    return spec.min + Math.round((t * t * span) / step) * step;
  };
  const toPos = (v) => {
    const f = Math.min(1, Math.max(0, (v - spec.min) / span));
    return Math.round(Math.sqrt(f) * POSITIONS);
  };
  return { kind: "sqrt", min: 0, max: POSITIONS, step: 1, toValue, toPos };
}

/**
 * A number typed in the number field, kept in [min, max] (null: not a number yet, e.g. "" or
 * "-" while typing: the view keeps its value).
 */
export function typedValue(spec, raw) {
  if (raw === "" || raw === null || raw === undefined) return null;
  const v = Number(raw);
  if (!Number.isFinite(v)) return null;
  return Math.min(spec.max, Math.max(spec.min, v));
}
