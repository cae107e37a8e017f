/**
 * The lecture's calls to the web API (docs/architecture.md, "Web contract"), with a small cache so
 * that stepping back and forth never refetches.
 * @module lecture/api
 */

/** Error carrying the API's `detail` message. */
export class ApiError extends Error {
  /** @param {string} message @param {number} status */
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

const cache = new Map();

/** Forget every cached response (after the server evicted an analysis). */
export function resetCache() {
  cache.clear();
}

/**
 * Fetch JSON, turning the contract's `{"detail"}` errors into ApiError.
 * @param {string} url
 * @param {RequestInit} [init]
 * @returns {Promise<any>}
 */
async function json(url, init) {
  const res = await fetch(url, init);
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  if (!res.ok) {
    const detail = body && typeof body.detail === "string" ? body.detail : res.statusText;
    throw new ApiError(`${res.status}: ${detail}`, res.status);
  }
  return body;
}

/** Memoise a promise by key; failed calls are forgotten so they can be retried. */
function once(key, make) {
  if (!cache.has(key)) {
    const p = make();
    cache.set(key, p);
    p.catch(() => cache.delete(key));
  }
  return cache.get(key);
}

/**
 * POST /api/analyze.
 * @param {{text: string, alpha: number, causal: boolean}} req
 * @returns {Promise<any>} the analysis (id, n, layers, heads, tokens, summary, methods, ...)
 */
export function analyze({ text, alpha, causal }) {
  return once(`analyze\u0000${alpha}\u0000${causal}\u0000${text}`, () =>
    json("/api/analyze", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text, alpha, causal, truncate: true }),
    }),
  );
}

/**
 * GET /api/analyses/{id}/heads/{layer}/{head}: edges, projections, centroids, ...
 * @param {string} id @param {number} layer @param {number} head
 */
export function headData(id, layer, head) {
  return once(`head/${id}/${layer}/${head}`, () =>
    json(`/api/analyses/${encodeURIComponent(id)}/heads/${layer}/${head}`),
  );
}

/**
 * GET /api/analyses/{id}/raw/{layer}/{head}: the head's raw queries, keys and scores (n ≤ 64).
 * @param {string} id @param {number} layer @param {number} head
 */
export function rawData(id, layer, head) {
  return once(`raw/${id}/${layer}/${head}`, () =>
    json(`/api/analyses/${encodeURIComponent(id)}/raw/${layer}/${head}`),
  );
}

/**
 * POST /api/share: save this slide; its short link /s/{id} reopens the lecture at this step.
 * @param {object} state a ShareState (text, alpha, causal, truncate, layer, head, lecture_step)
 * @returns {Promise<{id: string, url: string}>}
 */
export function share(state) {
  return json("/api/share", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ state }),
  });
}

/**
 * GET /api/analyses/{id}/pareto?layer&head: sparsity–recall points and frontiers of one head.
 * @param {string} id @param {number} layer @param {number} head
 */
export function pareto(id, layer, head) {
  return once(`pareto/${id}/${layer}/${head}`, () =>
    json(`/api/analyses/${encodeURIComponent(id)}/pareto?layer=${layer}&head=${head}`),
  );
}
