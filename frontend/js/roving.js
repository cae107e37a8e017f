/**
 * Roving tabindex (WAI-ARIA Authoring Practices, "keyboard navigation inside components"): a set
 * of items (the head grid's tiles, the token chips) is ONE tab stop; the arrow keys, Home and End
 * move between its items. `nextIndex` is pure (tests/js/roving.test.mjs); `rove` wires a
 * container's items.
 */

/**
 * The item an arrow / Home / End key moves to, in a row-major grid of `cols` columns (cols =
 * count: one row; 1: one column), or null for another key. Moves stop at the edges.
 * @param {string} key KeyboardEvent.key
 * @param {number} at the current item
 * @param {number} count how many items
 * @param {number} cols items per row
 * @returns {number|null}
 */
export function nextIndex(key, at, count, cols) {
  if (count <= 0) return null;
  const here = Math.min(Math.max(0, at), count - 1);
  const col = here % cols;
  switch (key) {
    case "ArrowLeft": return col > 0 ? here - 1 : here;
    case "ArrowRight": return col < cols - 1 && here + 1 < count ? here + 1 : here;
    case "ArrowUp": return here - cols >= 0 ? here - cols : here;
    case "ArrowDown": return here + cols < count ? here + cols : here;
    case "Home": return cols < count ? here - col : 0;
    case "End": return cols < count ? Math.min(count - 1, here - col + cols - 1) : count - 1;
    default: return null;
  }
}

/**
 * Make `items` one tab stop: `active` gets tabindex 0, the others −1.
 * @param {HTMLElement[]} items
 * @param {number} active
 */
export function setStop(items, active) {
  items.forEach((it, k) => it.setAttribute("tabindex", k === active ? "0" : "-1"));
}

/**
 * Arrow keys inside `container` move the focus between `items()` (a grid of `cols()` columns;
 * hidden items are skipped over by `usable`), calling `onMove(k)` for the item focused.
 * @param {HTMLElement} container
 * @param {() => HTMLElement[]} items
 * @param {{cols: () => number, onMove?: (k: number) => void, usable?: (el: HTMLElement) => boolean}} o
 */
export function rove(container, items, { cols, onMove = () => {}, usable = (it) => !it.hidden }) {
  container.addEventListener("keydown", (ev) => {
    if (ev.altKey || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
    const all = items();
    const at = all.indexOf(/** @type {HTMLElement} */ (ev.target));
    if (at < 0) return;
    let k = nextIndex(ev.key, at, all.length, cols());
    if (k === null) return;
    ev.preventDefault();
    const step = k >= at ? 1 : -1; // skip hidden items (hidden special tokens)
    while (k >= 0 && k < all.length && !usable(all[k])) k += step;
    if (k < 0 || k >= all.length) return;
    setStop(all, k);
    all[k].focus();
    onMove(k);
  });
}

/**
 * A group of buttons (a toggle group, a figure's download buttons, a legend) as ONE tab stop: the
 * pressed button (else the first usable one) takes the tab stop, the arrow keys move along the
 * group. Returns `sync`, to call after the buttons' pressed states or set changed.
 * @param {HTMLElement} container
 * @returns {() => void}
 */
export function roveButtons(container) {
  const items = () =>
    /** @type {HTMLButtonElement[]} */ ([...container.querySelectorAll("button")]).filter(
      (b) => !b.hidden && !b.disabled,
    );
  const sync = () => {
    const all = items();
    if (!all.length) return;
    if (all.includes(/** @type {any} */ (document.activeElement))) return; // focus inside: it moves itself
    const pressed = all.findIndex((b) => b.getAttribute("aria-pressed") === "true");
    setStop(all, Math.max(0, pressed));
  };
  rove(container, items, { cols: () => items().length });
  container.addEventListener("focusin", (ev) => {
    const all = items();
    const k = all.indexOf(/** @type {any} */ (ev.target));
    if (k >= 0) setStop(all, k);
  });
  // buttons enabled or disabled later (figures become ready): the tab stop follows
  new MutationObserver(sync).observe(container, { subtree: true, attributes: true, attributeFilter: ["disabled", "aria-pressed", "hidden"], childList: true });
  sync();
  return sync;
}
