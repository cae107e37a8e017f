"""The analysis service: one loaded model, a bounded LRU cache of analyses, tensors -> plain data.

The model is loaded once, in the app's lifespan (:meth:`AnalysisService.start`), never at import.
Model calls are serialised by a lock (one CPU/GPU, one forward at a time). An analysis is cached
under ``id = sha256(text, alpha, causal, truncate, model, artefact)[:24]``; the cache is bounded in
entries and in bytes (the tensors of a 512-token text weigh about 100 MB). What is heavy and not
always needed (the Pareto sweep, per-head payloads) is computed on request and kept with the entry.

Every conversion of tensors to JSON-able data happens here, under ``torch.inference_mode()``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import importlib
import json
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from sparse_core.errors import ArtefactError, EmptyTextError, SparsescopeError, TextTooLongError

from .errors import ApiError
from .settings import Settings

log = logging.getLogger(__name__)

ID_HEX = 24  # 96 bits of sha256: ids are cache keys, collisions must not happen by chance
#: Derived results kept per analysis (heads, Pareto scopes, metrics settings): beyond it, or once
#: the analysis alone outweighs the cache's byte bound, a result is computed but not kept, so no
#: stream of distinct requests on one id can grow it without bound.
MAX_DERIVED = 512
#: Distinct alphas whose artefact lookup is remembered (every alpha in [1, 2] may be asked).
MAX_ALPHAS = 64


def _optional(module: str):
    """``sparse_core.<module>`` if it exists yet, else None (the API degrades, it does not fail)."""
    try:
        return importlib.import_module(f"sparse_core.{module}")
    except ModuleNotFoundError as exc:
        if exc.name == f"sparse_core.{module}":
            return None
        raise


def sig6(x: float) -> float:
    """``x`` rounded to 6 significant digits (the edge weights sent to the page)."""
    return float(f"{x:.6g}")


def tensor_nbytes(obj: Any, exclude: list | tuple = ()) -> int:
    """Bytes held by the tensors in ``obj`` (a tensor, or a dataclass / dict / list of them),
    not counting those reachable only through ``exclude`` (shared objects, e.g. the artefact)."""
    seen: set[int] = {id(o) for o in exclude if o is not None}

    def walk(o: Any) -> int:
        if id(o) in seen:
            return 0
        seen.add(id(o))
        if isinstance(o, torch.Tensor):
            return o.element_size() * o.nelement()
        if isinstance(o, np.ndarray):
            return int(o.nbytes)
        if isinstance(o, dict):
            return sum(walk(v) for v in o.values())
        if isinstance(o, list | tuple):
            return sum(walk(v) for v in o)
        if isinstance(o, bytes | str):
            return len(o)
        if hasattr(o, "__dict__"):
            return sum(walk(v) for v in vars(o).values())
        return 0

    return walk(obj)


# ----------------------------------------------------------------------------- cache


@dataclass
class Entry:
    """One cached analysis: the model's output, its predict context and what was derived."""

    id: str
    out: Any  # sparse_core.model.RunOutput
    artefact: Any  # sparse_core.sparsefinder.Artefact | None
    artefact_name: str | None
    ctx: Any  # sparse_core.methods.PredictContext | None
    body: dict  # the analyze response
    body_json: bytes  # ... serialised once
    pos: list[str | None]
    nbytes: int = 0
    derived: dict = field(default_factory=dict)  # ("pareto",) / ("head", l, h) ... -> data
    lock: threading.Lock = field(default_factory=threading.Lock)
    key_locks: dict = field(default_factory=dict)  # derived key -> its lock


class LruCache:
    """Least-recently-used entries, at most ``max_entries`` and about ``max_bytes`` in all.

    An entry bigger than ``max_bytes`` on its own is still kept (alone) so that its follow-up
    requests work; it is evicted by the next insertion.
    """

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def get(self, key: str) -> Entry | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is not None:
                self._items.move_to_end(key)
            return entry

    def put(self, entry: Entry) -> None:
        with self._lock:
            old = self._items.pop(entry.id, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._items[entry.id] = entry
            self._bytes += entry.nbytes
            self._evict(keep=entry.id)

    def grow(self, entry: Entry, nbytes: int) -> None:
        """Account ``nbytes`` more for ``entry`` (derived data added to it)."""
        with self._lock:
            entry.nbytes += nbytes
            if self._items.get(entry.id) is entry:
                self._bytes += nbytes
                self._evict(keep=entry.id)

    def _evict(self, keep: str) -> None:
        while len(self._items) > 1 and (
            len(self._items) > self.max_entries or self._bytes > self.max_bytes
        ):
            key = next(iter(self._items))
            if key == keep:  # the newest is never its own victim
                self._items.move_to_end(key)
                key = next(iter(self._items))
            victim = self._items.pop(key)
            self._bytes -= victim.nbytes
            self.evictions += 1
            log.debug("evicted analysis %s (%d bytes)", key, victim.nbytes)


@dataclass
class Stats:
    """Counters the tests (and /healthz readers) use: model runs and cache hits."""

    runs: int = 0
    hits: int = 0
    pareto_runs: int = 0
    timings: dict[str, float] = field(default_factory=dict)  # last analyze: stage -> seconds


# ----------------------------------------------------------------------------- service


class AnalysisService:
    """Loads the model once and answers every API question about analysed texts."""

    def __init__(
        self,
        settings: Settings,
        *,
        model: Any = None,
        artefact: Any = None,
        use_artefact: bool = True,
        loader: Callable[[Settings], Any] | None = None,
    ) -> None:
        """``model``/``artefact`` preloaded (tests: ``tiny_model``); otherwise :meth:`start`
        loads ``settings.model_path`` (None: the default model) on ``settings.device``.
        ``use_artefact=False`` runs without Sparsefinder (sf-* methods unavailable)."""
        self.settings = settings
        self._model = model
        self._loader = loader
        self._use_artefact = use_artefact
        self._artefacts: dict[float, tuple[Any, str | None]] = {}
        self._explicit_artefact = artefact
        self._model_lock = threading.Lock()
        # spaCy runs in this one thread (one tagging at a time, beside the model's forward)
        self._tag_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sparsescope-pos")
        self._start_lock = threading.Lock()
        self.cache = LruCache(settings.cache_entries, settings.cache_bytes)
        self.stats = Stats()
        self._methods_by_n: dict[tuple, list[dict]] = {}

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._model is not None

    @property
    def model(self):
        if self._model is None:
            raise RuntimeError("AnalysisService.start() has not run (the app's lifespan does it)")
        return self._model

    def start(self) -> None:
        """Load the model (and the artefact and tagger), then warm up with one short text."""
        with self._start_lock:
            if self.settings.threads is not None or self._model is None:
                # process-wide, like the model; a model handed in (tests) leaves it alone
                torch.set_num_threads(self.settings.torch_threads())
            if self._model is None:
                t0 = time.perf_counter()
                if self._loader is not None:
                    self._model = self._loader(self.settings)
                else:
                    from sparse_core import load_model

                    self._model = load_model(self.settings.model_path, self.settings.device)
                log.info("model %s ready in %.1f s", self._model.model_id, time.perf_counter() - t0)
            if self._use_artefact and self.settings.artefact_path is not None:
                self._load_explicit_artefact()
            if self.settings.warmup:
                t0 = time.perf_counter()
                self.warmup()
                log.info("warm-up done in %.1f s", time.perf_counter() - t0)

    def _load_explicit_artefact(self) -> None:
        """``--artefact PATH``: a mistake there is the user's, reported at start-up."""
        if self._explicit_artefact is not None:
            return
        from sparse_core.sparsefinder import load_artefact

        art = load_artefact(self.settings.artefact_path, model_id=self.model.model_id)
        cfg = self.model.config
        art.check_model(cfg.num_layers, cfg.num_heads, cfg.head_dim)
        self._explicit_artefact = art

    def warmup(self) -> None:
        """Run the whole pipeline once (tagger load, first forward) without caching it."""
        out = self._run_model("Warm up the model.", 1.5, False, False)
        self._tags(out)
        art, _ = self.artefact_for(1.5)
        self._summary(out, self._context(out, art), art)

    # -- artefacts -----------------------------------------------------------------------------

    def artefact_for(self, alpha: float) -> tuple[Any, str | None]:
        """(artefact, name) fitted for this model at ``alpha``, or (None, None).

        Sparsefinder's projections are learned on one model's graphs at one alpha, so at other
        alphas the sf-* methods are left out (the page shows them as unavailable).
        """
        if not self._use_artefact:
            return None, None
        key = round(float(alpha), 9)
        if key in self._artefacts:
            return self._artefacts[key]
        art = self._explicit_artefact
        if art is not None:
            ok = abs(float(art.alpha) - float(alpha)) <= 1e-9
            res = (art, _artefact_label(art)) if ok else (None, None)
        else:
            try:
                from sparse_core.sparsefinder import load_artefact

                art = load_artefact(None, model_id=self.model.model_id, alpha=alpha)
                cfg = self.model.config
                art.check_model(cfg.num_layers, cfg.num_heads, cfg.head_dim)
                res = (art, _artefact_label(art))
            except (ArtefactError, ModuleNotFoundError, OSError) as exc:
                log.info("no Sparsefinder artefact for alpha %g: %s", alpha, exc)
                res = (None, None)
        if len(self._artefacts) < MAX_ALPHAS:
            self._artefacts[key] = res
        return res

    # -- health, methods -----------------------------------------------------------------------

    def health(self) -> dict:
        from sparse_core import __version__

        _, name = self.artefact_for(1.5)
        return {
            "status": "ok",
            "model": self.model.model_id,
            "device": self.model.device,
            "artefact": name,
            "version": __version__,
        }

    def methods(self, n: int, artefact: Any = None) -> list[dict]:
        """The method registry as JSON, parameter defaults resolved for length ``n`` (and, for
        sf-kmeans, the cluster counts of ``artefact`` when one is given)."""
        if isinstance(n, bool) or not 1 <= n <= self.model.max_positions:
            raise ApiError(
                400,
                f"n must be in [1, {self.model.max_positions}] (the model's positions), got {n}",
                "n",
            )
        key = (n, id(artefact))
        if key in self._methods_by_n:
            return self._methods_by_n[key]
        mod = _optional("methods")
        listed: list[dict] = []
        if mod is not None:
            for name, method in mod.METHODS.items():
                listed.append(
                    {
                        "name": name,
                        "label": method.label,
                        "needs_artefact": bool(method.needs_artefact),
                        "params": [_param_json(p) for p in method.params(n, artefact)],
                    }
                )
        if len(self._methods_by_n) < 4096:
            self._methods_by_n[key] = listed
        return listed

    # -- analyze -------------------------------------------------------------------------------

    def key(self, text: str, alpha: float, causal: bool, truncate: bool) -> str:
        _, art_name = self.artefact_for(alpha)
        blob = json.dumps(
            [text, repr(float(alpha)), bool(causal), bool(truncate), self.model.model_id, art_name],
            ensure_ascii=False,
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:ID_HEX]

    def analyze(self, text: str, alpha: float, causal: bool, truncate: bool) -> dict:
        """The analyze body (a dict) of this request, from the cache when it was seen before."""
        return self.analyze_entry(text, alpha, causal, truncate).body

    def analyze_entry(self, text: str, alpha: float, causal: bool, truncate: bool) -> Entry:
        """The cached :class:`Entry` of this request, analysing the text on a cache miss."""
        alpha = _check_alpha(alpha)
        if not text.strip():
            raise ApiError(400, str(EmptyTextError()), "text")
        _check_unicode(text)
        key = self.key(text, alpha, causal, truncate)
        entry = self.cache.get(key)
        if entry is not None:
            self.stats.hits += 1
            return entry
        with self._model_lock:  # one analysis at a time; a racing twin finds it cached
            entry = self.cache.get(key)
            if entry is not None:
                self.stats.hits += 1
                return entry
            entry = self._analyze(key, text, alpha, causal, truncate)
            self.cache.put(entry)
        release_free_memory()  # the forward's temporaries, evicted analyses (not under the lock)
        return entry

    def _run_model(self, text: str, alpha: float, causal: bool, truncate: bool):
        with _user_errors():
            return self.model.run(text, alpha=alpha, causal=causal, truncate=truncate)

    def _start_tagging(self, text: str, truncate: bool) -> Future | None:
        """Tag the words of the part of ``text`` the model will see, on the other core while
        the forward runs (spaCy and torch both release the GIL in their inner loops)."""
        pos = _optional("pos")
        if pos is None:
            return None
        with _user_errors():
            enc = self.model.encode(text, truncate=truncate)
        return self._tag_pool.submit(pos.word_tags, text[: _covered(enc.offsets, enc.special)])

    def _analyze(self, key: str, text: str, alpha: float, causal: bool, truncate: bool) -> Entry:
        t = {}
        t0 = time.perf_counter()
        words = self._start_tagging(text, truncate)
        out = self._run_model(text, alpha, causal, truncate)
        t["model"] = time.perf_counter() - t0
        self.stats.runs += 1
        art, art_name = self.artefact_for(alpha)
        t0 = time.perf_counter()
        pos = self._tags(out, words)
        t["pos"] = time.perf_counter() - t0  # what is left of the tagging after the forward
        t0 = time.perf_counter()
        ctx = self._context(out, art)
        summary = self._summary(out, ctx, art)
        t["summary"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        body = {
            "id": key,
            "n": out.n,
            "layers": out.layers,
            "heads": out.heads,
            "model": self.model.model_id,
            "device": self.model.device,
            "alpha": alpha,
            "causal": bool(causal),
            "truncated": bool(out.truncated),
            "artefact": art_name,
            "tokens": [
                {"text": tok, "start": s, "end": e, "pos": p, "special": sp}
                for tok, (s, e), p, sp in zip(
                    out.tokens, out.offsets, pos, out.special, strict=True
                )
            ],
            "summary": summary,
            "methods": self.methods(out.n, art),
        }
        body_json = dumps(body)
        t["body"] = time.perf_counter() - t0
        self.stats.timings = t
        log.info(
            "analysed %d tokens: %s",
            out.n,
            ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in t.items()),
        )
        # hidden states are not needed by any route; drop them from the cache
        out.hidden = torch.empty(0)
        entry = Entry(key, out, art, art_name, ctx, body, body_json, pos)
        entry.nbytes = tensor_nbytes([out, ctx], exclude=[art]) + 2 * len(body_json)
        return entry

    def _tags(self, out, words: Future | None = None) -> list[str | None]:
        """Universal POS tag of every token (``sparse_core.pos``); None for special tokens, which
        the page leaves out of POS shares, and for every token while no tagger is installed.
        ``words``: the spaCy words being tagged by :meth:`_start_tagging`, else tagged here."""
        pos = _optional("pos")
        if pos is None:
            return [None] * out.n
        try:
            if words is None:
                end = _covered(out.offsets, out.special)
                words = self._tag_pool.submit(pos.word_tags, out.text[:end])
            tags = pos.tag_tokens(out.text, out.offsets, out.special, words=words.result())
        except SparsescopeError as exc:  # no spaCy pipeline installed: the page shows no tags
            log.warning("no POS tags: %s", exc)
            return [None] * out.n
        out.extra["pos_tags"] = tags  # as tagged ("[CLS]", "[SEP]" too), for cluster breakdowns
        return [None if sp else tag for tag, sp in zip(tags, out.special, strict=True)]

    def _context(self, out, art):
        mod = _optional("methods")
        if mod is None:
            return None
        with torch.inference_mode():
            return mod.PredictContext.from_run(out, art)

    @torch.inference_mode()
    def _summary(self, out, ctx, art) -> list[dict]:
        """Per head: gold sparsity and every available method's recall / sparsity at its
        defaults (``sparse_core.pareto.summary``)."""
        from sparse_core.metrics import sparsity
        from sparse_core.pareto import summary

        gold = sparsity(out.graph, causal=out.causal).tolist()  # (L, H)
        per_method = summary(out, art)
        tables = {
            name: (m["recall"].tolist(), m["sparsity"].tolist()) for name, m in per_method.items()
        }
        rows = []
        for li in range(out.layers):
            for hi in range(out.heads):
                rows.append(
                    {
                        "layer": li,
                        "head": hi,
                        "gold_sparsity": round(gold[li][hi], 6),
                        "methods": {
                            name: {
                                "recall": round(rec[li][hi], 6),
                                "sparsity": round(spa[li][hi], 6),
                            }
                            for name, (rec, spa) in tables.items()
                        },
                    }
                )
        return rows

    # -- per analysis --------------------------------------------------------------------------

    def get(self, analysis_id: str) -> Entry:
        entry = self.cache.get(analysis_id) if _looks_like_id(analysis_id) else None
        if entry is None:
            raise ApiError(
                404,
                f"no analysis with id {analysis_id[:40]!r}: it is unknown or was evicted from "
                "the cache; POST the text to /api/analyze again",
                "id",
            )
        return entry

    def _check_head(self, entry: Entry, layer: int, head: int) -> None:
        out = entry.out
        if not 0 <= layer < out.layers:
            raise ApiError(
                400, f"layer must be in [0, {out.layers - 1}] for this model, got {layer}", "layer"
            )
        if not 0 <= head < out.heads:
            raise ApiError(
                400, f"head must be in [0, {out.heads - 1}] for this model, got {head}", "head"
            )

    def _derive(self, entry: Entry, key: tuple, make: Callable[[], Any]) -> Any:
        """``entry.derived[key]``, computed once (under the entry's lock) and accounted for."""
        if key in entry.derived:
            return entry.derived[key]
        with entry.lock:  # one lock per key: a long sweep does not hold up a head payload
            key_lock = entry.key_locks.get(key)
            full = len(entry.key_locks) >= MAX_DERIVED or entry.nbytes > self.cache.max_bytes
            if key_lock is None and not full:
                key_lock = entry.key_locks[key] = threading.Lock()
        if key_lock is None:
            return make()  # bounded (MAX_DERIVED): computed for this request, not kept
        with key_lock:
            if key not in entry.derived:
                memo = getattr(entry.ctx, "cache", None)
                before = tensor_nbytes(memo) if memo else 0
                value = make()
                entry.derived[key] = value
                after = tensor_nbytes(memo) if memo else 0
                self.cache.grow(entry, _approx_bytes(value) + after - before)
        return entry.derived[key]

    def head(self, analysis_id: str, layer: int, head: int) -> bytes:
        """The head payload as JSON bytes (serialised once, then served from the entry)."""
        entry = self.get(analysis_id)
        self._check_head(entry, layer, head)
        return self._derive(
            entry, ("head", layer, head), lambda: dumps(self._head(entry, layer, head))
        )

    @torch.inference_mode()
    def _head(self, entry: Entry, layer: int, head: int) -> dict:
        out = entry.out
        p = out.probs[layer, head]  # (n, n)
        ij = p.nonzero()  # (E, 2)
        vals = p[ij[:, 0], ij[:, 1]].tolist()
        edges = [[i, j, sig6(v)] for (i, j), v in zip(ij.tolist(), vals, strict=True)]
        body: dict[str, Any] = {
            "layer": layer,
            "head": head,
            "n": out.n,
            "gold_sparsity": entry.body["summary"][layer * out.heads + head]["gold_sparsity"],
            "edges": edges,
            "proj": None,
            "centroids": {},
            "reformer": {},
            "routing": {},
            "seed": self._seed(layer, head),
            "pos": entry.pos,
        }
        if entry.ctx is not None:
            # every method's data for every slider value (the registry's head_payload hooks)
            from sparse_core.methods import head_data

            body.update(head_data(entry.ctx, layer, head))
        return body

    def _seed(self, layer: int, head: int) -> int:
        mod = _optional("methods")
        if mod is not None:
            return int(mod.head_seed(layer, head))
        return layer * 1000 + head

    def pareto(self, analysis_id: str, layer: int | None, head: int | None) -> bytes:
        """Per-text Pareto data for one head, or (both None) the mean over heads, as JSON bytes.

        The sweep of every method's grid (``sparse_core.pareto.sweep_text``) runs once per
        analysis, on the first request; each scope is then sliced from it and kept.
        """
        entry = self.get(analysis_id)
        if (layer is None) != (head is None):
            missing = "head" if head is None else "layer"
            raise ApiError(
                400,
                f"give both layer and head for one head's Pareto data, or neither for the mean "
                f"over heads; {missing} is missing",
                missing,
            )
        if layer is not None:
            self._check_head(entry, layer, head)
        mod = _optional("pareto")
        if mod is None:
            raise ApiError(404, "the Pareto sweep is not available yet", None)
        sweep = self._derive(entry, ("sweep",), lambda: self._sweep(mod, entry))
        return self._derive(
            entry,
            ("pareto", layer, head),
            lambda: dumps({**sweep.points(layer, head), "layer": layer, "head": head}),
        )

    def _sweep(self, mod, entry: Entry):
        t0 = time.perf_counter()
        with torch.inference_mode():
            sweep = mod.sweep_text(entry.ctx, per_head=True)
        release_free_memory()  # the sweep's bitsets
        self.stats.pareto_runs += 1
        log.info(
            "Pareto sweep of %d tokens in %.0f ms", entry.out.n, 1000 * (time.perf_counter() - t0)
        )
        return sweep

    def clusters(
        self, analysis_id: str, layer: int, head: int, clusters: int | None, top_k: int
    ) -> bytes:
        """POS make-up of one head's Sparsefinder k-means clusters on this text (paper Figure 6,
        ``sparse_core.pos.cluster_breakdown``, the ``sparsescope clusters --json`` shape)."""
        entry = self.get(analysis_id)
        self._check_head(entry, layer, head)
        pos = _optional("pos")
        if pos is None:
            raise ApiError(404, "the cluster breakdown is not available yet", None)
        art = entry.artefact
        if art is None or not art.centroids:
            raise ApiError(
                400,
                f"the cluster breakdown needs a Sparsefinder artefact with k-means centroids, and "
                f"none is fitted for this model at alpha {entry.body['alpha']:g}",
                "clusters",
            )
        choices = sorted(art.centroids)
        if clusters is None:
            clusters = 8 if 8 in choices else choices[0]
        if clusters not in art.centroids:
            raise ApiError(
                400,
                f"clusters must be one of {', '.join(map(str, choices))} (the artefact's k-means "
                f"fits), got {clusters}",
                "clusters",
            )
        if not 1 <= top_k <= clusters:
            raise ApiError(400, f"top_k must be in [1, {clusters}], got {top_k}", "top_k")
        tags = entry.out.extra.get("pos_tags")

        def make() -> bytes:
            with torch.inference_mode():
                body = pos.cluster_breakdown(
                    entry.out, art, layer, head, clusters, pos_tags=tags, top_k=top_k
                )
            return dumps(body)

        return self._derive(entry, ("clusters", layer, head, clusters, top_k), make)

    def metrics(
        self, analysis_id: str, layer: int, head: int, method: str, params: dict[str, str]
    ) -> dict:
        """Recall, sparsity, exact and precision of one method setting on one head.

        ``params`` come from the query string (strings; missing ones take their defaults) and
        are checked by ``Method.validate``; a bad one is a 400 naming it. The (L, H) metrics of
        a setting are computed once and kept with the analysis.
        """
        entry = self.get(analysis_id)
        self._check_head(entry, layer, head)
        mod = _optional("methods")
        if mod is None:
            raise ApiError(404, "per-method metrics are not available yet", None)
        m = self._method(mod, method, entry)
        clean = self._validate(m, entry, params)
        key = ("metrics", m.name, json.dumps(clean, sort_keys=True))

        def make() -> dict[str, list]:
            with torch.inference_mode():
                got = mod.evaluate(entry.ctx, m, clean)
            return {k: v.tolist() for k, v in got.items()}

        table = self._derive(entry, key, make)
        return {k: table[k][layer][head] for k in ("recall", "sparsity", "exact", "precision")}

    def _method(self, mod, name: str, entry: Entry):
        if name not in mod.METHODS:
            raise ApiError(
                400, f"method must be one of {', '.join(mod.METHODS)}, got {name!r}", "method"
            )
        m = mod.METHODS[name]
        if m.needs_artefact and entry.artefact is None:
            raise ApiError(
                400,
                f"method {name} needs a Sparsefinder artefact, and none is fitted for this model "
                f"at alpha {entry.body['alpha']:g}; methods without one: "
                f"{', '.join(mod.available(None))}",
                "method",
            )
        return m

    def _validate(self, m, entry: Entry, params: dict) -> dict:
        """``Method.validate`` with its message as a 400 naming the parameter at fault."""
        try:
            return m.validate(entry.out.n, params, entry.artefact)
        except SparsescopeError as exc:
            msg = str(exc)
            names = [p.name for p in m.params(entry.out.n, entry.artefact)]
            field = next((nm for nm in names if msg.startswith(f"{nm} ")), None)
            unknown = re.search(r"has no parameter '([^']*)'", msg)
            if unknown:
                field = unknown.group(1)
            raise ApiError(400, msg, field) from None


# ----------------------------------------------------------------------------- helpers


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def release_free_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim(0)``).

    Called after a model run or a Pareto sweep has freed its large temporaries. glibc keeps
    freed memory in its arenas (and, once a large block was freed, serves tensors from the heap
    rather than from fresh mappings), so the resident memory climbed far past what the bounded
    cache holds. With bench/bench_load.py on the real model, 8 clients: 664 MiB after the 100th
    request, 907 MiB after the 1,000th without it; 571 and 703 MiB with it (and 2 arenas, see
    app/commands/serve.py), oscillating between 565 and 806 MiB over 2,000 requests without a
    trend (docs/benchmarks.md, "Load test"). A trim takes a few ms (median 6.6 ms there).
    A no-op where libc has no malloc_trim.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@contextmanager
def _user_errors() -> Iterator[None]:
    """The text errors of tokenising / running the model as 400s on the field ``text``."""
    try:
        yield
    except TextTooLongError as exc:
        raise ApiError(
            400,
            f"text is {exc.length} tokens long but the model takes at most {exc.limit} "
            f"(special tokens included); shorten it, or send truncate=true to analyse the "
            f"first {exc.limit} tokens",
            "text",
        ) from None
    except EmptyTextError as exc:
        raise ApiError(400, str(exc), "text") from None


def _covered(offsets, special) -> int:
    """End of the text the tokens cover (a truncated text's tail is not tagged)."""
    return max((e for (_, e), sp in zip(offsets, special, strict=True) if not sp), default=0)


def _check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not math.isfinite(a) or not 1.0 <= a <= 2.0:
        raise ApiError(
            400,
            f"alpha must be in [1, 2] (1 softmax, 1.5 entmax, 2 sparsemax), got {alpha}",
            "alpha",
        )
    return a


def _check_unicode(text: str) -> None:
    """JSON may carry a lone UTF-16 surrogate (``"\\ud800"``), which is not text: the hash, the
    tokenizer and the response would all fail on it, so it is a 400 naming ``text``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ApiError(
            400,
            f"text is not valid Unicode: character {exc.start} is a lone surrogate "
            f"({text[exc.start]!r}); send UTF-8 text (escape pairs like \\ud83d\\ude00 are fine)",
            "text",
        ) from None


def _looks_like_id(s: str) -> bool:
    return len(s) == ID_HEX and all(c in "0123456789abcdef" for c in s)


def _artefact_label(art) -> str:
    name = art.meta.get("name") if isinstance(art.meta, dict) else None
    if name:
        return str(name)
    from sparse_core.sparsefinder import artefact_name

    return artefact_name(art.model_id, art.alpha)


def _param_json(p) -> dict:
    get = p.get if isinstance(p, dict) else lambda k, d=None: getattr(p, k, d)
    return {
        "name": get("name"),
        "label": get("label", get("name")),
        "kind": get("kind"),
        "min": get("min"),
        "max": get("max"),
        "step": get("step"),
        "choices": list(get("choices")) if get("choices") is not None else None,
        "default": get("default"),
        "help": get("help", "") or "",
    }


def dumps(data: Any) -> bytes:
    """Compact JSON bytes (what the heavy routes send as is, without re-validation)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _approx_bytes(value: Any) -> int:
    """Rough size of derived data: exact for bytes and arrays, about 16 bytes per number in
    lists and dicts."""
    if isinstance(value, bytes | str):
        return len(value)
    if isinstance(value, torch.Tensor | np.ndarray) or hasattr(value, "__dataclass_fields__"):
        return tensor_nbytes(value)
    if isinstance(value, dict):
        return sum(_approx_bytes(v) + 32 for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_approx_bytes(v) + 8 for v in value)
    return 16


__all__ = ["AnalysisService", "Entry", "LruCache", "SparsescopeError", "Stats"]
