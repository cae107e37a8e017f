/**
 * The JSON API of docs/architecture.md ("Web contract (app/)"), for every page (the explorer,
 * the lecture, the embed view). Every error body is `{"detail": str, "field": str|null}`; it is
 * thrown as an `ApiError` so the page can show the message next to the control that caused it.
 * A request refused for now (429 rate limit, 503 busy: `retry_after` seconds) is retried on its
 * own after that wait, up to BUSY_RETRIES times, with "busy, retrying in N s" shown meanwhile.
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

/** Retries of a request the server refused for now (429 rate limit, 503 busy) before giving up. */
export const BUSY_RETRIES = 5;
/** The longest wait between such retries (seconds), whatever the server's Retry-After says. */
const MAX_WAIT_S = 30;

let busyListener = showBusy;

/**
 * Who is told while a refused request waits to be retried: `fn(seconds, detail)` every second of
 * the wait, then `fn(0, "")` when the wait is over. Default: a small "busy, retrying in N s"
 * notice at the bottom of the page.
 * @param {(seconds: number, detail: string) => void} fn
 */
export function onBusy(fn) {
  busyListener = fn;
}

function showBusy(seconds, detail) {
  if (typeof document === "undefined") return;
  let el = document.getElementById("busy-notice");
  if (seconds <= 0) {
    if (el) el.hidden = true;
    return;
  }
  if (!el) {
    el = document.createElement("div");
    el.id = "busy-notice";
    el.setAttribute("role", "status");
    el.style.cssText =
      "position:fixed;bottom:1rem;left:50%;transform:translateX(-50%);z-index:1000;" +
      "padding:.5rem 1rem;border-radius:.4rem;background:#333;color:#fff;font:14px sans-serif";
    document.body.appendChild(el);
  }
  el.hidden = false;
  el.title = detail;
  el.textContent = `The server is busy, retrying in ${seconds} s…`;
}

/** Seconds to wait before retrying a 429/503 response (its body's retry_after, else the header). */
function retryAfter(resp, body) {
  const fromBody = body && Number.isFinite(body.retry_after) ? body.retry_after : NaN;
  const fromHeader = Number.parseInt(resp.headers.get("Retry-After") ?? "", 10);
  const s = Number.isFinite(fromBody) ? fromBody : Number.isFinite(fromHeader) ? fromHeader : 2;
  return Math.min(MAX_WAIT_S, Math.max(1, Math.ceil(s)));
}

async function waitRetry(seconds, detail) {
  for (let left = seconds; left > 0; left -= 1) {
    busyListener(left, detail);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  busyListener(0, "");
}

async function request(url, init = {}) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await requestOnce(url, init);
    } catch (err) {
      const busy = err instanceof ApiError && (err.status === 429 || err.status === 503);
      if (!busy || err.retryAfter == null || attempt >= BUSY_RETRIES) throw err;
      await waitRetry(err.retryAfter, err.message);
    }
  }
}

async function requestOnce(url, init) {
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
    const err = new ApiError(resp.status, detail || `HTTP ${resp.status}`, body?.field ?? null);
    if (resp.status === 429 || resp.status === 503) err.retryAfter = retryAfter(resp, body);
    throw err;
  }
  return body;
}

const enc = encodeURIComponent;

/**
 * `POST /api/analyze`; `summary` (method names) asks for those methods' per-head summary only
 * (summary.js fetches the others later), left out: every method's.
 * @param {{text: string, alpha: number, causal: boolean, model?: string|null, truncate?: boolean,
 *   summary?: string[]}} req
 */
export function analyze(req) {
  return request("/api/analyze", {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ truncate: false, ...req, model: req.model ?? null }),
  });
}

/**
 * `GET /api/analyses/{id}/summary`: per head, the gold sparsity and the recall / sparsity of the
 * methods named (all the analysis has when `methods` is empty) at their defaults.
 * @param {string} id
 * @param {string[]} [methods]
 */
export function getSummary(id, methods = []) {
  const q = new URLSearchParams(methods.map((m) => ["method", m]));
  const qs = q.toString();
  return request(`/api/analyses/${enc(id)}/summary${qs ? `?${qs}` : ""}`);
}

/** `GET /api/analyses/{id}` (404 once the analysis left the server's cache). */
export function getAnalysis(id) {
  return request(`/api/analyses/${enc(id)}`);
}

/**
 * `GET /api/analyses/{id}/heads/{layer}/{head}`: edges, projections and precomputed draws; with
 * `part` "graph" only the edges (packed CSR), pos and seed, with "methods" only the rest;
 * `methods` (names): only those methods' data (with "graph": those methods' data besides it).
 */
export function getHead(id, layer, head, part = null, methods = null) {
  const q = new URLSearchParams();
  if (part !== null) q.append("part", part);
  for (const m of methods ?? []) q.append("method", m);
  const qs = q.toString() ? `?${q}` : "";
  return request(`/api/analyses/${enc(id)}/heads/${layer}/${head}${qs}`);
}

/**
 * `GET /api/analyses/{id}/raw/{layer}/{head}`: the head's raw queries, keys and scaled scores
 * (short texts only; the lecture's first slides).
 */
export function getRaw(id, layer, head) {
  return request(`/api/analyses/${enc(id)}/raw/${layer}/${head}`);
}

/**
 * `GET /api/analyses/{id}/pareto` for one head, or the mean over heads when `layer` is null;
 * `block` (a tile size) asks for the frontiers over block sparsity at that size (`x=block`);
 * `outputError` (one head) each point's output error too.
 */
export function getPareto(id, layer = null, head = null, block = null, outputError = false) {
  const q = new URLSearchParams();
  if (layer !== null) {
    q.set("layer", String(layer));
    q.set("head", String(head));
    if (outputError) q.set("output_error", "true");
  }
  if (block !== null) {
    q.set("x", "block");
    q.set("block", String(block));
  }
  const qs = q.toString();
  return request(`/api/analyses/${enc(id)}/pareto${qs ? `?${qs}` : ""}`);
}

/**
 * `GET /api/analyses/{id}/budgets`: the oracle budgets (definitions §8) of every head (quantiles, and
 * the distribution pooled over all heads' queries), or of one head (every query's values).
 */
export function getBudgets(id, layer = null, head = null) {
  const qs = layer === null ? "" : `?layer=${layer}&head=${head}`;
  return request(`/api/analyses/${enc(id)}/budgets${qs}`);
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
 * `GET /api/analyses/{id}/flow?token=t&layer=l`: which input tokens reach token t at the output
 * of layer l (null: the last), with their attention-rollout mass (sparse_core/flow.py).
 */
export function getFlow(id, token, layer = null) {
  const q = new URLSearchParams({ token: String(token) });
  if (layer !== null) q.set("layer", String(layer));
  return request(`/api/analyses/${enc(id)}/flow?${q}`);
}

/**
 * `GET /api/analyses/{id}/roles`: every head's role on the text, `roles[layer][head]`
 * (definitions §11, sparse_core/roles.py).
 */
export function getRoles(id) {
  return request(`/api/analyses/${enc(id)}/roles`);
}

/** `GET /api/results`: the server's corpus results (`serve --results DIR`; 404 without). */
export function getResults() {
  return request("/api/results");
}

/** `GET /api/results/heads/{layer}/{head}`: one head's corpus points and frontiers. */
export function getResultsHead(layer, head) {
  return request(`/api/results/heads/${layer}/${head}`);
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
