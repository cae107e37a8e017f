/**
 * The JSON API of docs/architecture.md ("Web contract (app/)"), for every page (the explorer,
 * the lecture, the embed view). Every error body is `{"detail": str, "field": str|null}`; it is
 * thrown as an `ApiError` so the page can show the message next to the control that caused it.
 */

export class ApiError extends Error {
  /**
   * @param {number} status HTTP status (0 when the server could not be reached)
   * @param {string} detail the server's message
   * @param {string|null} field the request field at fault, if any
   */
  constructor(status, detail, field = null) {
    super(detail);
    this.name = "ApiError";
    this.status = status;
    this.field = field;
  }
}

async function request(url, init = {}) {
  let resp;
  try {
    resp = await fetch(url, { headers: { Accept: "application/json" }, ...init });
  } catch {
    throw new ApiError(0, "the server cannot be reached; is `sparsescope serve` running?");
  }
  let body = null;
  try {
    body = await resp.json();
  } catch {
    body = null;
  }
  if (!resp.ok) {
    const detail = body && typeof body.detail === "string" ? body.detail : resp.statusText;
    throw new ApiError(resp.status, detail || `HTTP ${resp.status}`, body?.field ?? null);
  }
  return body;
}

const enc = encodeURIComponent;

/**
 * `POST /api/analyze`.
 * @param {{text: string, alpha: number, causal: boolean, model?: string|null, truncate?: boolean}} req
 */
export function analyze(req) {
  return request("/api/analyze", {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ truncate: false, ...req, model: req.model ?? null }),
  });
}

/** `GET /api/analyses/{id}` (404 once the analysis left the server's cache). */
export function getAnalysis(id) {
  return request(`/api/analyses/${enc(id)}`);
}

/** `GET /api/analyses/{id}/heads/{layer}/{head}`: edges, projections and precomputed draws. */
export function getHead(id, layer, head) {
  return request(`/api/analyses/${enc(id)}/heads/${layer}/${head}`);
}

/**
 * `GET /api/analyses/{id}/raw/{layer}/{head}`: the head's raw queries, keys and scaled scores
 * (short texts only; the lecture's first slides).
 */
export function getRaw(id, layer, head) {
  return request(`/api/analyses/${enc(id)}/raw/${layer}/${head}`);
}

/** `GET /api/analyses/{id}/pareto` for one head, or the mean over heads when `layer` is null. */
export function getPareto(id, layer = null, head = null) {
  const q = layer === null ? "" : `?layer=${layer}&head=${head}`;
  return request(`/api/analyses/${enc(id)}/pareto${q}`);
}

/**
 * `GET /api/analyses/{id}/metrics/{layer}/{head}?method=M&<param>=<v>`: the server's metrics for
 * one setting (used by the embed view, embed.js).
 */
export function getMetrics(id, layer, head, method, params) {
  const q = new URLSearchParams({ method });
  for (const [k, v] of Object.entries(params)) q.set(k, String(v));
  return request(`/api/analyses/${enc(id)}/metrics/${layer}/${head}?${q}`);
}

/**
 * `POST /api/share`: save a view (a ShareState); its short link reopens it.
 * @param {object} state
 * @returns {Promise<{id: string, url: string, embed: string}>} server-relative URLs
 */
export function share(state) {
  return request("/api/share", {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ state }),
  });
}
