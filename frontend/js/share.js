/**
 * The main page's Share button: save the current view (`POST /api/share`, app/web/routes/share.py)
 * and show its short link, with a Copy button. The saved state is the page's view state in the
 * ShareState shape, so `/s/{id}` reopens exactly this view (main.js reads it back from the
 * `shared-state` island).
 */

import * as api from "./api.js";
import { el } from "./dom.js";
import { toShare } from "./view-state.js";

/**
 * The ShareState (app/web/routes/share.py) of the page's state (view-state.js `toShare`: the view's
 * one definition), the analysis' window and model, and the scalar slider values.
 * @param {import("./state.js").State} s
 * @returns {object}
 */
export function shareState(s) {
  const params = {};
  for (const [k, v] of Object.entries(s.params ?? {})) {
    if (["boolean", "number", "string"].includes(typeof v)) params[k] = v;
  }
  return toShare({
    ...s,
    causal: Boolean(s.causal),
    truncate: Boolean(s.analysis?.truncated),
    model: s.analysis?.model ?? s.model ?? null,
    params,
    lockedRow: s.lockedRow ?? null,
    cluster: s.cluster ?? null,
  });
}

/**
 * POST the state; resolve to the absolute short URL and embed URL.
 * @param {object} state a ShareState
 * @returns {Promise<{id: string, url: string, embed: string}>}
 */
export async function createShare(state) {
  const body = await api.share(state);
  return {
    id: body.id,
    url: new URL(body.url, location.origin).href,
    embed: new URL(body.embed, location.origin).href,
  };
}

/** Copy `text` to the clipboard (the async API, else a selected input and execCommand). */
async function copyText(text, input) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    input.focus();
    input.select();
    return document.execCommand?.("copy") ?? false;
  }
}

/**
 * Mount the Share button and its result box in `root`.
 * @param {HTMLElement} root
 * @param {() => import("./state.js").State} getState
 */
export function initShare(root, getState) {
  const button = el("button", { class: "tool share-button", text: "Share", attrs: { type: "button", "aria-haspopup": "true" } });
  const url = el("input", { class: "share-url", attrs: { type: "text", readonly: "", "aria-label": "short link to this view" } });
  const copy = el("button", { class: "tool", text: "Copy", attrs: { type: "button" } });
  const embed = el("a", { class: "share-embed", text: "embed", attrs: { target: "_blank", rel: "noopener" } });
  const note = el("span", { class: "share-note", attrs: { role: "status" } });
  // the embed as an iframe snippet to paste into a page, a slide or a notebook (800 × 600 fits)
  const snippet = el("input", { class: "share-iframe", attrs: { type: "text", readonly: "",
    "aria-label": "iframe snippet that embeds this view" } });
  const copyIframe = el("button", { class: "tool", text: "Copy iframe", attrs: { type: "button" } });
  const embedRow = el("div", { class: "share-embed-row", attrs: { hidden: "" } }, [snippet, copyIframe]);
  const box = el("div", { class: "share-box", attrs: { hidden: "" } }, [url, copy, embed, note, embedRow]);
  root.append(button, box);

  button.addEventListener("click", async () => {
    const s = getState();
    if (!s.analysis) return;
    box.hidden = false;
    url.value = "saving…";
    note.textContent = "";
    embed.hidden = true;
    embedRow.hidden = true;
    button.disabled = true;
    try {
      const res = await createShare(shareState(s));
      url.value = res.url;
      embed.href = res.embed;
      embed.hidden = false;
      snippet.value = iframeSnippet(res.embed);
      embedRow.hidden = false;
      url.focus();
      url.select();
    } catch (err) {
      url.value = "";
      note.textContent = err.message;
    } finally {
      button.disabled = false;
    }
  });
  copyIframe.addEventListener("click", async () => {
    if (!snippet.value) return;
    note.textContent = (await copyText(snippet.value, snippet)) ? "iframe copied" : "select the snippet and copy it";
  });
  copy.addEventListener("click", async () => {
    if (!url.value || url.value === "saving…") return;
    note.textContent = (await copyText(url.value, url)) ? "copied" : "select the link and copy it";
  });
  return { button };
}

/** The HTML that embeds a shared view (its /embed/{id} URL, escaped for an attribute). */
export function iframeSnippet(embedUrl) {
  const src = String(embedUrl).replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
  return `<iframe src="${src}" width="800" height="600" style="border:0" ` +
    `title="sparsescope: sparse attention view" loading="lazy"></iframe>`;
}
