/**
 * The POS panel (paper Figure 6, definitions §5): for the open head's Sparsefinder k-means clusters, the
 * share of each Universal POS tag among the query tokens, and separately among the key tokens,
 * assigned to each cluster. Assignment is the k-means predictor's own: a token belongs to the
 * clusters of its top-k nearest centroids (methods.js `topKCentroids`), with B and k taken from the
 * sf-kmeans sliders while that method is active, else from the panel's B selector and k = 1.
 * Special tokens (no POS tag) are left out of the shares.
 *
 * Clicking a bar selects that cluster (store `cluster`), which highlights its tokens in the
 * heatmap and the token strip (store `clusterMembers`); hovering a token outlines its clusters.
 * Plain DOM bars: a few hundred elements at most, all text set with textContent.
 */

import { el } from "./dom.js";
import { kmeansMembership } from "./methods.js";
import * as store from "./state.js";

/** The 17 Universal POS tags, in the order of the stacks, with a categorical colour each. */
export const UPOS = [
  ["NOUN", "#4e79a7"], ["PROPN", "#a0cbe8"], ["PRON", "#86bcb6"], ["VERB", "#e15759"],
  ["AUX", "#ff9d9a"], ["ADJ", "#59a14f"], ["ADV", "#8cd17d"], ["ADP", "#f28e2b"],
  ["DET", "#ffbe7d"], ["CCONJ", "#b6992d"], ["SCONJ", "#f1ce63"], ["PART", "#d37295"],
  ["NUM", "#fabfd2"], ["PUNCT", "#79706e"], ["SYM", "#bab0ac"], ["INTJ", "#b07aa1"],
  ["X", "#d4a6c8"],
];

/**
 * POS shares per cluster for one side (queries or keys).
 * @param {Uint8Array[]} member member[c][t] = 1 iff token t is assigned to cluster c
 * @param {Array<string|null>} pos tag of every token (null: special token, left out)
 * @returns {Array<{count: number, shares: Map<string, number>}>} per cluster: its number of
 *   tokens (tagged or not) and each tag's share among its tagged tokens
 */
export function posShares(member, pos) {
  return member.map((row) => {
    const counts = new Map();
    let count = 0;
    let tagged = 0;
    row.forEach((on, t) => {
      if (!on) return;
      count++;
      if (!pos[t]) return;
      counts.set(pos[t], (counts.get(pos[t]) ?? 0) + 1);
      tagged++;
    });
    const shares = new Map([...counts].map(([tag, c]) => [tag, c / tagged]));
    return { count, shares };
  });
}

/**
 * The cluster setting the panel shows: B and k of the sf-kmeans sliders when that method is
 * active, else the panel's own B and k = 1. Null when the head has no centroids.
 * @returns {{clusters: number, topK: number}|null}
 */
export function clusterSetting(s) {
  const head = s.headData;
  if (!head || head.centroids.size === 0 || !head.qp) return null;
  if (s.method === "sf-kmeans" && head.centroids.has(Number(s.params.n_clusters))) {
    return { clusters: Number(s.params.n_clusters), topK: Number(s.params.top_k) };
  }
  const available = [...head.centroids.keys()];
  // default: 8 clusters (the paper's and the docs' setting; 2 tells little), else the nearest
  const fallback = available.includes(8) ? 8 : available[available.length - 1];
  const clusters = available.includes(s.posClusters) ? s.posClusters : fallback;
  return { clusters, topK: 1 };
}

/**
 * Mount the POS panel in `root`.
 * @param {HTMLElement} root
 */
export function initPos(root) {
  const select = el("select", { attrs: { "aria-label": "number of k-means clusters" } });
  const caption = el("span", { class: "muted" });
  const bars = el("div", { class: "pos-bars" });
  const legend = el("div", { class: "pos-legend" });
  root.append(
    el("div", { class: "pos-controls" }, [el("label", { text: "clusters B " }, [select]), caption]),
    bars,
    legend,
  );
  let view = null; // {setting, queries, keys, groups: {queries: [...bars], keys: [...]}}

  function render(s) {
    const head = s.headData;
    const setting = clusterSetting(s);
    if (!setting) {
      view = null;
      select.replaceChildren();
      select.disabled = true;
      select.parentElement.hidden = true;
      caption.textContent = head ? "this head has no k-means centroids (no Sparsefinder artefact)" : "";
      bars.replaceChildren();
      legend.replaceChildren();
      return;
    }
    select.parentElement.hidden = false;
    select.disabled = s.method === "sf-kmeans";
    select.replaceChildren(
      ...[...head.centroids.keys()].map((b) => {
        const o = el("option", { text: String(b), attrs: { value: String(b) } });
        o.selected = b === setting.clusters;
        return o;
      }),
    );
    caption.textContent = head.pos.some((tag) => tag)
      ? `top-${setting.topK} assignment · POS shares of each cluster's tokens (special tokens left out)`
      : "no part-of-speech tags for this text (spaCy's English pipeline is not available)";
    const member = kmeansMembership(head, setting.clusters, setting.topK);
    const sides = {
      queries: posShares(member.queries, head.pos),
      keys: posShares(member.keys, head.pos),
    };
    view = { setting, member, groups: {} };
    const tagsSeen = new Set();
    const groups = ["queries", "keys"].map((side) => {
      const cols = sides[side].map(({ count, shares }, c) => {
        const stack = el("div", { class: "pos-stack" });
        for (const [tag, colour] of UPOS) {
          const share = shares.get(tag);
          if (!share) continue;
          tagsSeen.add(tag);
          const seg = el("div", {
            class: "pos-seg",
            title: `cluster ${c} · ${side}: ${tag} ${(share * 100).toFixed(0)}%`,
          });
          seg.style.height = `${share * 100}%`;
          seg.style.background = colour;
          stack.append(seg);
        }
        if (count > 0 && shares.size === 0) {
          // only special tokens ([CLS], [SEP]: no part of speech): a grey bar, not an empty one
          const seg = el("div", {
            class: "pos-seg pos-seg-special",
            title: `cluster ${c} · ${side}: special tokens only ([CLS]/[SEP], no part of speech)`,
          });
          seg.style.height = "100%";
          seg.style.background = "#9ca3af";
          stack.append(seg);
        }
        const bar = el(
          "button",
          { class: "pos-bar", attrs: { type: "button", "data-cluster": String(c) } },
          [
            stack,
            el("span", { class: "pos-label", text: String(c) }),
            el("span", { class: "pos-count", text: `n=${count}` }),
          ],
        );
        return bar;
      });
      view.groups[side] = cols;
      return el("div", { class: "pos-group" }, [
        el("div", { class: "pos-title", text: side === "queries" ? "Queries" : "Keys" }),
        el("div", { class: "pos-cols" }, cols),
      ]);
    });
    bars.replaceChildren(...groups);
    legend.replaceChildren(
      ...UPOS.filter(([tag]) => tagsSeen.has(tag)).map(([tag, colour]) => {
        const sw = el("span", { class: "pos-swatch" });
        sw.style.background = colour;
        return el("span", { class: "legend-item" }, [sw, el("span", { text: tag })]);
      }),
    );
    mark(s);
  }

  /** Selected cluster and the hovered token's clusters. */
  function mark(s) {
    if (!view) return;
    for (const side of ["queries", "keys"]) {
      view.groups[side].forEach((bar, c) => {
        bar.classList.toggle("selected", s.cluster === c);
        bar.classList.toggle("faded", s.cluster !== null && s.cluster !== c);
        const t = s.hoverToken;
        bar.classList.toggle("hover", t !== null && view.member[side][c][t] === 1);
      });
    }
  }

  /** Publish the selected cluster's tokens for the heatmap and token strip. */
  function publishMembers(s) {
    const ok = view && s.cluster !== null && s.cluster < view.setting.clusters;
    store.set({
      clusterMembers: ok
        ? { queries: view.member.queries[s.cluster], keys: view.member.keys[s.cluster] }
        : null,
    });
  }

  select.addEventListener("change", () => {
    store.set({ posClusters: Number(select.value), cluster: null });
  });
  bars.addEventListener("click", (ev) => {
    const bar = ev.target.closest(".pos-bar");
    if (!bar) return;
    const c = Number(bar.dataset.cluster);
    store.set({ cluster: store.get().cluster === c ? null : c });
  });

  // A new head or cluster setting rebuilds the bars right after the next frame, so that the
  // slider step or head change that caused it repaints the heatmap and the Pareto star first.
  let last = "";
  let pending = false;
  function renderSoon() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() =>
      setTimeout(() => {
        pending = false;
        render(store.get());
        publishMembers(store.get());
      }),
    );
  }
  store.subscribe((s, changed) => {
    const setting = clusterSetting(s);
    const key = setting ? `${setting.clusters}/${setting.topK}` : "";
    if (changed.has("headData") || key !== last) {
      last = key;
      renderSoon();
    } else if (changed.has("cluster")) {
      mark(s);
      publishMembers(s);
    } else if (changed.has("hoverToken")) mark(s);
  });
}
