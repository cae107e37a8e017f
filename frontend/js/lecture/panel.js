/**
 * Building blocks of a slide's formula panel: formulas, short prose, big numbers and sliders.
 * @module lecture/panel
 */

import { swatch } from "../colours.js";
import { el } from "../dom.js";
import { tex } from "./tex.js";

/**
 * Append a display formula, with an optional caption under it.
 * @param {HTMLElement} panel
 * @param {string} source TeX (our own strings only)
 * @param {string} [caption] plain text
 * @returns {HTMLElement}
 */
export function formula(panel, source, caption) {
  const box = el("figure", { class: "formula-box" }, [tex(source)]);
  if (caption) box.append(el("figcaption", { text: caption }));
  panel.append(box);
  fitWidth(box);
  return box;
}

/**
 * Shrink a formula that is wider than its column (never below 60 % of its size), so a long
 * formula on a narrow panel is smaller rather than cut off.
 * @param {HTMLElement} box an element in the document
 */
export function fitWidth(box) {
  box.style.fontSize = "";
  const wide = box.scrollWidth;
  const room = box.clientWidth;
  if (room > 0 && wide > room) box.style.fontSize = `${Math.max(0.6, (0.97 * room) / wide)}em`;
}

/**
 * Append a paragraph. Parts are strings (text) or TeX snippets `{tex: "..."}` rendered inline.
 * @param {HTMLElement} panel
 * @param {...(string|{tex: string}|{b: string})} parts `{b}` is bold text
 * @returns {HTMLElement}
 */
export function prose(panel, ...parts) {
  const p = el("p", { class: "prose" });
  for (const part of parts) {
    if (typeof part === "string") p.append(part);
    else if ("tex" in part) p.append(tex(part.tex, { display: false }));
    else p.append(el("strong", { text: part.b }));
  }
  panel.append(p);
  return p;
}

/**
 * Fit every formula of a panel again (KaTeX's fonts arrive after the first layout and widen it).
 * @param {HTMLElement} panel
 */
export function refitAll(panel) {
  panel.querySelectorAll(".formula-box").forEach((box) => fitWidth(/** @type {HTMLElement} */ (box)));
}

/**
 * A row of big numbers ("stats").
 * @param {HTMLElement} panel
 * @param {{label: string, value: string, id?: string, tone?: string, title?: string}[]} items
 * @returns {HTMLElement}
 */
export function stats(panel, items) {
  const box = el("dl", { class: "stats" });
  for (const it of items) {
    box.append(
      el("div", { class: `stat ${it.tone ? `stat-${it.tone}` : ""}`.trim(), title: it.title }, [
        el("dt", { text: it.label }),
        el("dd", { text: it.value, attrs: { id: it.id } }),
      ]),
    );
  }
  panel.append(box);
  return box;
}

/**
 * A labelled range slider. `onInput` runs on every move (keep it cheap), `onChange` when released.
 * The slider gives keyboard focus back to the slide on pointer release, so ←/→ keep turning pages.
 * @param {HTMLElement} panel
 * @param {{id: string, label: string, min: number, max: number, step: number, value: number,
 *   format: (v: number) => string, onInput?: (v: number) => void, onChange?: (v: number) => void,
 *   ticks?: [number, string][]}} o
 * @returns {HTMLInputElement}
 */
export function slider(panel, o) {
  const input = /** @type {HTMLInputElement} */ (
    el("input", {
      attrs: {
        type: "range",
        id: o.id,
        min: o.min,
        max: o.max,
        step: o.step,
        value: o.value,
        "aria-label": o.label,
      },
    })
  );
  // the browser snaps the value to the step: show the value the slider really holds
  const out = el("output", {
    class: "slider-value",
    text: o.format(Number(input.value)),
    attrs: { for: o.id },
  });
  const head = el("label", { class: "slider-label", attrs: { for: o.id } }, [
    el("span", { text: o.label }),
    out,
  ]);
  const box = el("div", { class: "slider" }, [head, input]);
  if (o.ticks) {
    const ticks = el("div", { class: "slider-ticks" });
    for (const [v, label] of o.ticks) {
      const t = el("span", { text: label });
      t.style.left = `${(100 * (v - o.min)) / (o.max - o.min)}%`;
      ticks.append(t);
    }
    box.append(ticks);
  }
  input.addEventListener("input", () => {
    const v = Number(input.value);
    out.textContent = o.format(v);
    o.onInput?.(v);
  });
  input.addEventListener("change", () => o.onChange?.(Number(input.value)));
  input.addEventListener("pointerup", () => input.blur());
  panel.append(box);
  return input;
}

/**
 * A small legend of coloured swatches.
 * @param {HTMLElement} parent
 * @param {{color: string, label: string, shape?: "square"|"star"|"circle"|"hatch"}[]} items
 * @returns {HTMLElement}
 */
export function legend(parent, items) {
  const box = el("ul", { class: "legend" });
  for (const it of items) {
    // a method's line with its marker (the explorer's Pareto legend), or a plain swatch
    const sw = it.marker ? swatch(it.color, it.marker) : el("span", { class: `swatch swatch-${it.shape ?? "square"}` });
    if (!it.marker) sw.style.setProperty("--c", it.color);
    box.append(el("li", {}, [sw, el("span", { text: it.label })]));
  }
  parent.append(box);
  return box;
}
