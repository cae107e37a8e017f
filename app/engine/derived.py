"""What is derived from one cached analysis on request, computed once and kept with its entry.

One head's payload (edges and what the page needs to recompute every mask), the lecture's raw
vectors, the Pareto sweep of every method's grid (per head, or every head for the mean), the POS
make-up of the k-means clusters, the metrics of one method setting, and the information flow into
one token (reachability and attention rollout, sparse_core/flow.py). Each is computed the first time
it is asked for and kept in the entry (``LruCache.derive``: one lock per result, its bytes counted
against the cache's bound). Each computation (not a cached answer) runs through the service's
bounded, memory-accounted :class:`~sparsescope.engine.admission.ComputeGate`: queued or refused with
503 and Retry-After under load, and cancelled between heads when its client leaves. The service
(app/engine/service.py) finds the entry and checks the layer and head; the bodies are JSON bytes
(app/engine/payloads.py)."""

from __future__ import annotations

import json
import logging
import math
import time
from typing import TYPE_CHECKING, Any

import torch

from sparse_core import budgets, pareto, pos, roles
from sparse_core.bitsets import METRICS, fold_blocks
from sparse_core.errors import SparsescopeError
from sparse_core.flow import token_flow, token_flow_sparse
from sparse_core.methods import METHODS, available, evaluate, evaluate_head
from sparse_core.metrics import output_error

from .admission import ComputeGate
from .cache import Entry, LruCache
from .errors import NotInAnalysis
from .lod import check_tile, head_probs, lod_info, tile_body, tile_from_edges, tile_span
from .memory import release_free_memory
from .payloads import (
    MAX_RAW_TOKENS,
    dumps,
    head_body,
    head_graph_body,
    head_methods_body,
    raw_body,
)
from .request import alpha_words
from .two_cores import (
    SPLIT_MIN_TOKENS,
    side_worker,
    splits,
    sweep_head_on_two_cores,
    sweep_on_two_cores,
)

if TYPE_CHECKING:
    from .service import Stats

log = logging.getLogger(__name__)


class Derived:
    """The results derived from the entries of ``cache``; ``stats`` counts the sweeps."""

    def __init__(self, cache: LruCache, stats: Stats, gate: ComputeGate | None = None) -> None:
        self.cache = cache
        self.stats = stats
        self.gate = gate or ComputeGate()

    def _gated(self, kind: str, entry: Entry, make: Any) -> Any:
        """``make`` run through the gate as ``kind`` work on ``entry``'s tokens (app/engine/
        admission.py); only the innermost computation of a result is gated (never two nested)."""
        return lambda: self.gate.run(kind, entry.out.n, make)

    def head(
        self, entry: Entry, layer: int, head: int, part: str = "all",
        methods: list[str] | None = None,
    ) -> bytes:  # fmt: skip
        """The head payload as JSON bytes (serialised once, then served from the entry): all of
        it, or its ``graph`` (packed CSR) or its ``methods`` part (payloads.HEAD_PARTS); with
        ``methods`` (registry names, registry order), only those methods' data."""

        def make() -> bytes:
            if part == "methods":
                return dumps(head_methods_body(entry, layer, head, methods))
            body = head_graph_body if part == "graph" else head_body
            # with its tile pyramid (app/engine/lod.py)
            return dumps({**body(entry, layer, head, methods), "lod": lod_info(entry.out.n)})

        key = ("head", layer, head, part) if methods is None else \
            ("head", layer, head, part, tuple(methods))  # fmt: skip
        return self.cache.derive(entry, key, self._gated("head", entry, make))

    def tile(self, entry: Entry, layer: int, head: int, level: int, ti: int, tj: int) -> bytes:
        """Tile (ti, tj) of ``level`` of one head's max-pooled pyramid (app/engine/lod.py) as
        JSON bytes, computed from that head alone (a long text's: from the edges of the tile's
        rows, never a dense head) and kept with the entry."""

        def make() -> bytes:
            attn = entry.out.attn
            if attn.is_dense:
                return dumps(tile_body(head_probs(entry.ctx, layer, head), level, ti, tj))
            n = entry.out.n
            check_tile(n, level, ti, tj)
            r0, r1, _, _ = tile_span(n, level, ti, tj)  # a long head: its rows' edges only
            i, j, p = attn.row_edges(layer, head, slice(r0, r1))
            return dumps(tile_from_edges(i, j, p, n, level, ti, tj))

        return self.cache.derive(entry, ("tile", layer, head, level, ti, tj), make)

    def raw(self, entry: Entry, layer: int, head: int, d_model: int) -> bytes:
        """The lecture's raw vectors of one head (texts of at most ``MAX_RAW_TOKENS`` tokens)."""
        if entry.out.n > MAX_RAW_TOKENS:  # a long analysis has no raw view: 404
            raise NotInAnalysis(
                f"raw vectors are served for texts of at most {MAX_RAW_TOKENS} tokens; this one "
                f"has {entry.out.n} (use a shorter text for the lecture view)",
                field="id",
            )
        return dumps(raw_body(entry.out, layer, head, d_model=d_model))

    def pareto(
        self, entry: Entry, layer: int | None, head: int | None, x: str, block: int | None,
        errors: bool = False,
    ) -> bytes:  # fmt: skip
        """Per-text Pareto data for one head, or (both None) the mean over heads, as JSON bytes;
        frontiers over (x, recall), x the token or the block sparsity (checked by the caller,
        ``pareto.check_axis``).

        The sweep of every method's grid (``sparse_core.pareto.sweep_text``) runs once per
        analysis, on the first request; each scope is then sliced from it and kept.
        """

        def make() -> bytes:
            whole = self.cache.peek(entry, ("sweep",))
            if layer is None or whole is not None:  # the mean needs every head's sweep
                sweep = self.cache.derive(
                    entry, ("sweep",), self._gated("pareto", entry, lambda: self._sweep(entry))
                )
                body = sweep.points(layer, head, x, block)
            else:  # one head: swept alone (PredictContext.view), 1/(L·H) of the work
                sweep = self.cache.derive(
                    entry,
                    ("sweep", layer, head),
                    self._gated("pareto", entry, lambda: self._sweep(entry, layer, head)),
                )
                body = sweep.points(0, 0, x, block)
            if errors and layer is not None:  # what each point's misses cost this head
                for pt, err in zip(body["points"], self._point_errors(entry, layer, head, body),
                                   strict=True):  # fmt: skip
                    pt["output_error"] = err
            return dumps({**body, "layer": layer, "head": head})

        return self.cache.derive(entry, ("pareto", layer, head, x, block, errors), make)

    def _point_errors(self, entry: Entry, layer: int, head: int, body: dict) -> list:
        """The output error (``metrics.output_error``) of every sweep point on one head, in
        the order of ``body["points"]`` (kept per head: the x-axis does not change them)."""

        def make() -> dict:
            ctx = entry.ctx.view(layer, head)
            got = []
            with torch.inference_mode():
                for pt in body["points"]:
                    mask = METHODS[pt["method"]].predict(ctx, **pt["params"])
                    err = output_error(entry.out, layer, head, mask)
                    got.append(round(err, 6) if math.isfinite(err) else None)
            return {"v": got}

        if entry.out.values is None:
            return [None] * len(body["points"])
        return self.cache.derive(
            entry, ("pareto_errors", layer, head), self._gated("pareto", entry, make)
        )["v"]

    def _sweep(self, entry: Entry, layer: int | None = None, head: int | None = None) -> Any:
        """Every method's grid on this text: every head, or (``layer``, ``head``) alone."""
        t0 = time.perf_counter()
        side = side_worker()
        with torch.inference_mode():
            ctx = entry.ctx
            if side is not None and entry.out.n >= SPLIT_MIN_TOKENS:  # on both cores
                if layer is not None:
                    sweep = sweep_head_on_two_cores(ctx, layer, head, side)
                elif splits(ctx):
                    sweep = sweep_on_two_cores(ctx, side)
                else:
                    sweep = pareto.sweep_text(ctx, per_head=True)
            else:
                ctx = ctx if layer is None else ctx.view(layer, head)
                sweep = pareto.sweep_text(ctx, per_head=True)
        release_free_memory()  # the sweep's bitsets
        self.stats.pareto_runs += 1
        log.info(
            "Pareto sweep of %d tokens (%s) in %.0f ms",
            entry.out.n,
            "every head" if layer is None else f"head {layer}.{head}",
            1000 * (time.perf_counter() - t0),
        )
        return sweep

    def budgets(self, entry: Entry, layer: int | None, head: int | None) -> bytes:
        """Oracle budgets (``sparse_core.budgets``, definitions §8): one head's (every query's
        values and their quantiles) or, with neither, every head's quantiles and the pooled
        distribution."""

        def make() -> bytes:
            with torch.inference_mode():
                if layer is None:
                    return dumps({"scope": "all", **budgets.budgets_json(entry.ctx)})
                body = budgets.head_json(entry.ctx.view(layer, head), 0, 0)
                body.update(layer=layer, head=head)
                return dumps({"scope": "head", "levels": list(budgets.LEVELS),
                              "quantiles": list(budgets.QUANTILES), **body})  # fmt: skip

        return self.cache.derive(
            entry, ("budgets", layer, head), self._gated("budgets", entry, make)
        )

    def roles(self, entry: Entry) -> bytes:
        """Every head's role on this text (``sparse_core.roles.run_roles``, definitions §11):
        the top key of each row read from the sparse store, the syntax from spaCy's parse of
        the text kept by the tagging (none when no spaCy pipeline is installed)."""

        def make() -> bytes:
            return dumps({"roles": roles.run_roles(entry.out)})

        return self.cache.derive(entry, ("roles",), self._gated("roles", entry, make))

    def clusters(
        self, entry: Entry, layer: int, head: int, clusters: int | None, top_k: int
    ) -> bytes:
        """POS make-up of one head's Sparsefinder k-means clusters on this text (paper Figure 6,
        ``sparse_core.pos.cluster_breakdown``, the ``sparsescope clusters --json`` shape)."""
        art = entry.artefact
        # the fits are the analysis' artefact's: a count it lacks is a 404 (NotInAnalysis)
        if art is None or not art.centroids:
            raise NotInAnalysis(
                f"the cluster breakdown needs a Sparsefinder artefact with k-means centroids, and "
                f"none is fitted for this model at alpha {alpha_words(entry.body['alpha'])}",
                field="clusters",
            )
        choices = sorted(art.centroids)
        if clusters is None:
            clusters = 8 if 8 in choices else choices[0]
        if clusters not in art.centroids:
            raise NotInAnalysis(
                f"clusters must be one of {', '.join(map(str, choices))} (the artefact's k-means "
                f"fits), got {clusters}",
                field="clusters",
            )
        if not 1 <= top_k <= clusters:
            cls = SparsescopeError if top_k < 1 else NotInAnalysis  # the schema says >= 1
            raise cls(f"top_k must be in [1, {clusters}], got {top_k}", field="top_k")
        tags = entry.out.extra.get("pos_tags")

        def make() -> bytes:
            with torch.inference_mode():
                body = pos.cluster_breakdown(
                    entry.out, art, layer, head, clusters, pos_tags=tags, top_k=top_k
                )
            return dumps(body)

        key = ("clusters", layer, head, clusters, top_k)
        return self.cache.derive(entry, key, self._gated("clusters", entry, make))

    def metrics(
        self, entry: Entry, layer: int, head: int, method: str, params: dict[str, str]
    ) -> dict:
        """Recall, sparsity, exact, precision, mass recall, block sparsity (``{"16": …, "128":
        …}``) and output error of one method setting on one head.

        ``params`` come from the query string (strings; missing ones take their defaults) and
        are checked by ``Method.validate``, whose error names the parameter at fault. The (L, H)
        metrics of a setting are computed once and kept with the analysis.
        """
        if method not in METHODS:
            raise SparsescopeError(
                f"method must be one of {', '.join(METHODS)}, got {method!r}", field="method"
            )
        m = METHODS[method]
        if not m.usable(entry.artefact):  # the analysis lacks what it needs: 404
            raise NotInAnalysis(
                f"method {method} needs {m.needs()}, and none is fitted for this model at "
                f"alpha {alpha_words(entry.body['alpha'])}; this analysis' methods: "
                f"{', '.join(available(entry.artefact))}",
                field="method",
            )
        clean = m.validate(entry.out.n, params, entry.artefact)
        key = ("metrics", m.name, json.dumps(clean, sort_keys=True))
        if not entry.out.attn.is_dense:  # a long text: this head alone, from its sparse P

            def one() -> dict[str, float]:
                with torch.inference_mode():
                    return evaluate_head(entry.ctx, layer, head, m, clean)

            got = self.cache.derive(entry, (*key, layer, head), self._gated("metrics", entry, one))
            got = fold_blocks({k: got[k] for k in METRICS})
            got["output_error"] = self.output_error(entry, m, clean, layer, head)
            return got

        def make() -> dict[str, list]:
            with torch.inference_mode():
                got = evaluate(entry.ctx, m, clean)
            return {k: v.tolist() for k, v in got.items()}

        table = self.cache.derive(entry, key, self._gated("metrics", entry, make))
        got = fold_blocks({k: table[k][layer][head] for k in METRICS})
        got["output_error"] = self.output_error(entry, m, clean, layer, head)
        return got

    def output_error(self, entry: Entry, m, clean: dict, layer: int, head: int) -> float | None:
        """What the setting's misses cost this head (``metrics.output_error``: entmax over the
        kept pairs only against the head's P, through its values), kept per head; None when
        the run recorded no values."""
        if entry.out.values is None:
            return None

        def make() -> dict:
            with torch.inference_mode():
                mask = m.predict(entry.ctx.view(layer, head), **clean)
                err = output_error(entry.out, layer, head, mask)
            return {"v": err if math.isfinite(err) else None}

        key = ("output_error", m.name, json.dumps(clean, sort_keys=True), layer, head)
        return self.cache.derive(entry, key, self._gated("metrics", entry, make))["v"]

    def flow(self, entry: Entry, token: int, layer: int | None) -> bytes:
        """The inputs reaching ``token`` at the output of ``layer`` (default: the last) and their
        rollout mass (``sparse_core.flow.token_flow``: one backward pass over the layers, one
        head at a time), as JSON bytes, kept with the entry per (token, layer)."""
        out = entry.out

        def make() -> bytes:
            with torch.inference_mode():
                if out.attn.is_dense:
                    f = token_flow(out.probs, token, layer)
                else:  # a long text: one head's edges at a time
                    f = token_flow_sparse(out.attn, token, layer)
            return dumps(
                {
                    "token": f.token,
                    "layer": f.layer,
                    "n": out.n,
                    "layers": out.layers,
                    "reached": f.counts[0],
                    "reachable": f.reachable.tolist(),
                    # 6 significant digits: a reachable token's mass never rounds to 0
                    "mass": [float(f"{m:.6g}") for m in f.mass.tolist()],
                    "counts": f.counts,
                    "levels": [r.nonzero().flatten().tolist() for r in f.levels],
                }
            )

        key_layer = out.layers - 1 if layer is None else layer
        if 0 <= key_layer < out.layers and 0 <= token < out.n:
            return self.cache.derive(
                entry, ("flow", token, key_layer), self._gated("flow", entry, make)
            )
        return make()  # raises the field's error (token_flow checks both)
