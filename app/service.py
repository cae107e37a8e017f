"""The analysis service: texts analysed on the served models, cached, and what is derived from them.

The models are loaded once, in :meth:`AnalysisService.start` (the app's lifespan, or ``sparsescope
serve`` before the server starts), never at import; each lives in a :class:`ModelSlot` keyed by its
id, the first being the default. An analysis is cached under ``id = sha256(text, alpha, causal,
truncate, start, model, artefact)[:24]`` in a cache bounded in entries
and bytes (app/cache.py). What is heavy and not always needed (the Pareto sweep, per-head
payloads, metrics tables) is derived on request and kept with the entry.

Bad input raises a domain error with the field at fault (``sparse_core.errors``, app/errors.py);
nothing here knows an HTTP status. Tensors become JSON in app/payloads.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from sparse_core import __version__, budgets, pareto, pos
from sparse_core.bitsets import METRICS, fold_blocks
from sparse_core.errors import EmptyTextError, SparsescopeError, TextTooLongError
from sparse_core.methods import METHODS, PredictContext, available, evaluate
from sparse_core.sparsefinder import load_artefact

from .batching import KeyLocks, worker_for
from .cache import Entry, LruCache, tensor_nbytes
from .errors import NotFound, UnknownModel
from .memory import Trimmer, release_free_memory
from .payloads import (
    MAX_RAW_TOKENS,
    analysis_body,
    analysis_json,
    dumps,
    head_body,
    methods_json,
    raw_body,
    summary_rows,
    summary_texts,
)
from .settings import Settings
from .slot import ModelSlot, artefact_label
from .tagging import Tagger

log = logging.getLogger(__name__)

ID_HEX = 24  # 96 bits of sha256: ids are cache keys, collisions must not happen by chance
#: Method lists remembered per (n, artefact name).
MAX_METHOD_LISTS = 4096


@dataclass
class Stats:
    """Counters the tests (and /healthz readers) use: model runs, cache hits, warm-ups."""

    runs: int = 0
    hits: int = 0
    pareto_runs: int = 0
    warmups: int = 0
    summary_batches: int = 0  # batches of analyses whose summaries were computed together
    timings: dict[str, float] = field(default_factory=dict)  # last analyze: stage -> seconds


class AnalysisService:
    """Answers every API question about analysed texts, on the models of :attr:`slots`.

    One :class:`~sparsescope.slot.ModelSlot` per model of ``settings.model_names()`` (the first
    is the default), or the ``slots`` given. ``slot_options`` (``model``, ``artefact``,
    ``use_artefact``, ``loader``) are handed to the first slot (tests pass a tiny model).
    """

    def __init__(
        self, settings: Settings, *, slots: list[ModelSlot] | None = None, **slot_options: Any
    ) -> None:
        self.settings = settings
        if slots is None:
            names = settings.model_names()
            slots = [ModelSlot(settings, name=names[0], **slot_options)]
            slots += [ModelSlot(settings, name=nm) for nm in names[1:]]
        elif slot_options:
            raise TypeError("give either slots or the options of one slot, not both")
        self._slots = list(slots)
        self.slots: dict[str, ModelSlot] = {}
        # batching off (SPARSESCOPE_BATCH_TOKENS=1: every forward alone): tag one text a call
        self.tagger = Tagger(pipe=settings.batch_tokens > 1)
        self._start_lock = threading.Lock()
        self._started = False
        self.cache = LruCache(settings.cache_entries, settings.cache_bytes)
        self.stats = Stats()
        self._method_lists: dict[tuple[int, str | None], list[dict]] = {}
        self._inflight = KeyLocks()
        self.trimmer = Trimmer()

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def slot(self) -> ModelSlot:
        """The default model's slot (the first served)."""
        return self._slots[0]

    @property
    def ready(self) -> bool:
        return all(s.ready for s in self._slots)

    @property
    def model(self):
        return self.slot.model

    def start(self) -> None:
        """Load the models (and the ``--artefact`` one), then warm up with one short text.

        Once: ``sparsescope serve`` starts the service before the server (so that a load error
        is one line on stderr) and the app's lifespan starts it again, which does nothing.
        """
        with self._start_lock:
            if self._started:
                return
            if self.settings.threads is not None or not self.slot.ready:
                # process-wide, like the model; a model handed in (tests) leaves it alone
                torch.set_num_threads(self.settings.torch_threads())
            slots: dict[str, ModelSlot] = {}
            for s in self._slots:
                s.load()
                if s.id in slots:
                    raise SparsescopeError(
                        f"two served models have the id {s.id!r} (a directory's id is its name); "
                        "serve each model once, or rename one directory",
                        field="model",
                    )
                slots[s.id] = s
            self.slots = slots
            if self.settings.artefact_path is not None:
                self._explicit_artefact()
            if self.settings.warmup:
                t0 = time.perf_counter()
                self.warmup()
                log.info("warm-up done in %.1f s", time.perf_counter() - t0)
            self._started = True

    def _explicit_artefact(self) -> None:
        """``--artefact``: used for the served model it was fitted for, at its own alpha."""
        art = load_artefact(self.settings.artefact_path)
        slot = self.slots.get(art.model_id)
        if slot is None:
            raise SparsescopeError(
                f"artefact {self.settings.artefact_path} was fitted for model {art.model_id}, "
                f"which is not served (served: {', '.join(self.slots)})",
                field="artefact_path",
            )
        if slot._use_artefact:
            slot.use_explicit_artefact(art)

    def slot_for(self, model: str | None) -> ModelSlot:
        """The slot of model ``model`` (its id, or the name it was served by; None: the
        default); an unknown one is an error naming the served ids."""
        if model is None:
            return self.slot
        slots = self.slots or {s.id: s for s in self._slots if s.ready}
        found = slots.get(model)
        if found is None:
            found = next((s for s in self._slots if s.name is not None and s.name == model), None)
        if found is None:
            shown = model if len(model) <= 80 else model[:80] + "…"
            raise UnknownModel(
                f"model {shown!r} is not served here; served models: {', '.join(slots)} "
                "(start the server with --model NAME_OR_DIR for another)",
                field="model",
            )
        return found

    def models(self) -> dict:
        """``GET /api/models``: every served model, the default first."""
        return {"default": self.slot.id, "models": [s.info() for s in self._slots]}

    def warmup(self) -> None:
        """Run the whole pipeline once (tagger load, each served model's first forward) without
        caching it, so that no model's first analysis pays the start-up cost."""
        for k, slot in enumerate(self.slots.values() if self.slots else [self.slot]):
            out = self._run(slot, "Warm up the model.", 1.5, False, False)
            if k == 0:
                self.tagger.tags(out)
            summary_rows(out, slot.artefact_for(1.5)[0])
            self.stats.warmups += 1

    def health(self) -> dict:
        _, name = self.slot.artefact_for(1.5)
        return {
            "status": "ok",
            "model": self.slot.id,
            "models": [s.id for s in self._slots],
            "device": self.model.device,
            "artefact": name,
            "version": __version__,
        }

    def methods(self, n: int, alpha: float = 1.5, model: str | None = None) -> list[dict]:
        """The method registry as sliders for a text of ``n`` tokens analysed at ``alpha`` (the
        sf-* methods' choices are those of the artefact used there)."""
        slot = self.slot_for(model)
        limit = slot.model.max_positions
        if isinstance(n, bool) or not 1 <= n <= limit:
            raise SparsescopeError(
                f"n must be in [1, {limit}] (the model's positions), got {n}", field="n"
            )
        return self._method_list(n, slot.artefact_for(_check_alpha(alpha))[0])

    def _method_list(self, n: int, artefact: Any) -> list[dict]:
        """:func:`~sparsescope.payloads.methods_json`, remembered per (n, artefact name): what
        the sliders depend on, unlike the artefact's ``id()``, which Python reuses once an
        artefact is freed."""
        key = (n, artefact_label(artefact))
        listed = self._method_lists.get(key)
        if listed is None:
            listed = methods_json(n, artefact)
            if len(self._method_lists) < MAX_METHOD_LISTS:
                self._method_lists[key] = listed
        return listed

    # -- analyze -------------------------------------------------------------------------------

    def key(
        self,
        text: str,
        alpha: float,
        causal: bool,
        truncate: bool,
        model: str | None = None,
        start: int = 0,
    ) -> str:
        slot = self.slot_for(model)
        _, art_name = slot.artefact_for(alpha)
        start = int(start) if truncate else 0  # a text that fits has one window
        blob = json.dumps(
            [text, repr(float(alpha)), bool(causal), bool(truncate), slot.id, art_name]
            + ([start] if start else []),
            ensure_ascii=False,
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:ID_HEX]

    def analyze(
        self,
        text: str,
        alpha: float,
        causal: bool,
        truncate: bool,
        model: str | None = None,
        start: int = 0,
    ) -> dict:
        """The analyze body (a dict) of this request, from the cache when it was seen before."""
        return self.analyze_entry(text, alpha, causal, truncate, model=model, start=start).body

    def analyze_entry(
        self,
        text: str,
        alpha: float,
        causal: bool,
        truncate: bool,
        model: str | None = None,
        start: int = 0,
    ) -> Entry:
        """The cached :class:`Entry` of this request, analysing the text on a cache miss.

        ``model``: a served model's id (None: the default). ``start``: with ``truncate``, the
        first token of the window of a text longer than the model's positions.
        """
        alpha = _check_alpha(alpha)
        slot = self.slot_for(model)
        if not text.strip():
            raise EmptyTextError()
        _check_unicode(text)
        start = _check_start(start)
        if truncate and start:  # the window it names (clamped, at a word): one id per window
            with _api_wording():
                start = slot.model.encode(text, truncate=True, start=start).window_start
        key = self.key(text, alpha, causal, truncate, slot.id, start)
        entry = self.cache.get(key)
        if entry is not None:
            self.stats.hits += 1
            return entry
        # analyses of different texts run together (app/batching.py); a racing twin of this one
        # waits for it and finds it cached
        # the forward's temporaries and evicted analyses are handed back to the system when
        # the last analysis running ends (memory.Trimmer: once a burst, not once an analysis)
        with self.trimmer.work(), self._inflight.hold(key):
            entry = self.cache.get(key)
            if entry is not None:
                self.stats.hits += 1
                return entry
            entry = self._analyze(slot, key, text, alpha, causal, truncate, start)
            self.cache.put(entry)
        return entry

    def _run(self, slot: ModelSlot, text: str, alpha: float, causal: bool, truncate: bool, start=0):
        with slot.lock, _api_wording():  # the model worker's lock: one forward at a time
            return slot.model.run(text, alpha=alpha, causal=causal, truncate=truncate, start=start)

    def _analyze(
        self,
        slot: ModelSlot,
        key: str,
        text: str,
        alpha: float,
        causal: bool,
        truncate: bool,
        start: int = 0,
    ) -> Entry:
        model = slot.model
        t: dict[str, float] = {}
        t0 = time.perf_counter()
        with _api_wording():  # the words the model will see, tagged beside the forward
            enc = model.encode(text, truncate=truncate, start=start)
            # the model worker batches it with others (app/batching.py); Busy when it is full
            worker = worker_for(slot, self.settings)
            worker.after_batch = _tie_batch
            pending = worker.submit_text(text, alpha, causal, truncate, len(enc.ids), start=start)
            words = self.tagger.start(text, enc)
            out = pending.result()
        t["model"] = time.perf_counter() - t0
        self.stats.runs += 1
        art, art_name = slot.artefact_for(alpha)
        t0 = time.perf_counter()
        tags = self.tagger.tags(out, words)
        t["pos"] = time.perf_counter() - t0  # what is left of the tagging after the forward
        t0 = time.perf_counter()
        batch = out.extra.pop(BATCH_KEY, None)
        if batch is not None:  # run in one forward with others: summarised with them
            ctx, summary = batch.take(out, art, self.stats)
        else:
            with torch.inference_mode():
                ctx = PredictContext.from_run(out, art)
            summary = summary_texts([ctx])[0]
        t["summary"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        body = analysis_body(
            key,
            out,
            model_id=slot.id,
            device=model.device,
            alpha=alpha,
            causal=bool(out.causal),
            decoder=bool(model.config.is_decoder),
            artefact_name=art_name,
            pos=tags,
            summary=None,  # written as JSON text straight away (payloads.summary_json)
            methods=self._method_list(out.n, art),
        )
        body_json = analysis_json(body, summary)
        t["body"] = time.perf_counter() - t0
        self.stats.timings = t
        log.info(
            "analysed %d tokens on %s: %s",
            out.n,
            slot.id,
            ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in t.items()),
        )
        out.hidden = torch.empty(0)  # no route needs the hidden states: not cached
        # no dict kept: Entry.body parses body_json the first time a route reads it
        entry = Entry(key, out, art, art_name, ctx, None, body_json, tags, model_id=slot.id)
        entry.nbytes = tensor_nbytes([out, ctx], exclude=[art]) + 2 * len(body_json)
        return entry

    # -- one analysis ----------------------------------------------------------------------------

    def get(self, analysis_id: str) -> Entry:
        """The cached analysis ``analysis_id``; :class:`NotFound` when unknown or evicted."""
        entry = self.cache.get(analysis_id) if _looks_like_id(analysis_id) else None
        if entry is None:
            raise NotFound(
                f"no analysis with id {analysis_id[:40]!r}: it is unknown or was evicted from "
                "the cache; POST the text to /api/analyze again"
            )
        return entry

    def cached(self, analysis_id: str) -> bool:
        return _looks_like_id(analysis_id) and self.cache.get(analysis_id) is not None

    def _head_entry(self, analysis_id: str, layer: int, head: int) -> Entry:
        entry = self.get(analysis_id)
        out = entry.out
        if not 0 <= layer < out.layers:
            raise SparsescopeError(
                f"layer must be in [0, {out.layers - 1}] for this model, got {layer}", field="layer"
            )
        if not 0 <= head < out.heads:
            raise SparsescopeError(
                f"head must be in [0, {out.heads - 1}] for this model, got {head}", field="head"
            )
        return entry

    def head(self, analysis_id: str, layer: int, head: int) -> bytes:
        """The head payload as JSON bytes (serialised once, then served from the entry)."""
        entry = self._head_entry(analysis_id, layer, head)
        return self.cache.derive(
            entry, ("head", layer, head), lambda: dumps(head_body(entry, layer, head))
        )

    def raw(self, analysis_id: str, layer: int, head: int) -> bytes:
        """The lecture's raw vectors of one head (texts of at most ``MAX_RAW_TOKENS`` tokens)."""
        entry = self._head_entry(analysis_id, layer, head)
        if entry.out.n > MAX_RAW_TOKENS:
            raise SparsescopeError(
                f"raw vectors are served for texts of at most {MAX_RAW_TOKENS} tokens; this one "
                f"has {entry.out.n} (use a shorter text for the lecture view)",
                field="id",
            )
        d_model = self.slot_for(entry.model_id or None).model.config.hidden_size
        return dumps(raw_body(entry.out, layer, head, d_model=d_model))

    def pareto(
        self, analysis_id: str, layer: int | None, head: int | None, x: str = "sparsity",
        block: int | None = None,
    ) -> bytes:  # fmt: skip
        """Per-text Pareto data for one head, or (both None) the mean over heads, as JSON bytes;
        frontiers over (x, recall), x the token or the block sparsity (``pareto.check_axis``).

        The sweep of every method's grid (``sparse_core.pareto.sweep_text``) runs once per
        analysis, on the first request; each scope is then sliced from it and kept.
        """
        x, block = pareto.check_axis(x, block)
        if (layer is None) != (head is None):
            self.get(analysis_id)  # an unknown id is the first thing to say
            missing = "head" if head is None else "layer"
            raise SparsescopeError(
                f"give both layer and head for one head's Pareto data, or neither for the mean "
                f"over heads; {missing} is missing",
                field=missing,
            )
        if layer is None:
            entry = self.get(analysis_id)
        else:
            entry = self._head_entry(analysis_id, layer, head)

        def make() -> bytes:
            whole = self.cache.peek(entry, ("sweep",))
            if layer is None or whole is not None:  # the mean needs every head's sweep
                sweep = self.cache.derive(entry, ("sweep",), lambda: self._sweep(entry))
                body = sweep.points(layer, head, x, block)
            else:  # one head: swept alone (PredictContext.view), 1/(L·H) of the work
                sweep = self.cache.derive(
                    entry, ("sweep", layer, head), lambda: self._sweep(entry, layer, head)
                )
                body = sweep.points(0, 0, x, block)
            return dumps({**body, "layer": layer, "head": head})

        return self.cache.derive(entry, ("pareto", layer, head, x, block), make)

    def _sweep(self, entry: Entry, layer: int | None = None, head: int | None = None):
        """Every method's grid on this text: every head, or (``layer``, ``head``) alone."""
        t0 = time.perf_counter()
        with torch.inference_mode():
            ctx = entry.ctx if layer is None else entry.ctx.view(layer, head)
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

    def budgets(self, analysis_id: str, layer: int | None, head: int | None) -> bytes:
        """Oracle budgets (``sparse_core.budgets``, SPEC §8) as JSON bytes: one head's (every
        query's values and their quantiles) or, with neither, every head's quantiles and the
        pooled distribution. Computed once per analysis and scope."""
        if (layer is None) != (head is None):
            self.get(analysis_id)
            missing = "head" if head is None else "layer"
            raise SparsescopeError(
                f"give both layer and head for one head's budgets, or neither for every head; "
                f"{missing} is missing",
                field=missing,
            )
        if layer is None:
            entry = self.get(analysis_id)
        else:
            entry = self._head_entry(analysis_id, layer, head)

        def make() -> bytes:
            with torch.inference_mode():
                if layer is None:
                    return dumps({"scope": "all", **budgets.budgets_json(entry.ctx)})
                body = budgets.head_json(entry.ctx.view(layer, head), 0, 0)
                body.update(layer=layer, head=head)
                return dumps({"scope": "head", "levels": list(budgets.LEVELS),
                              "quantiles": list(budgets.QUANTILES), **body})  # fmt: skip

        return self.cache.derive(entry, ("budgets", layer, head), make)

    def clusters(
        self, analysis_id: str, layer: int, head: int, clusters: int | None, top_k: int
    ) -> bytes:
        """POS make-up of one head's Sparsefinder k-means clusters on this text (paper Figure 6,
        ``sparse_core.pos.cluster_breakdown``, the ``sparsescope clusters --json`` shape)."""
        entry = self._head_entry(analysis_id, layer, head)
        art = entry.artefact
        if art is None or not art.centroids:
            raise SparsescopeError(
                f"the cluster breakdown needs a Sparsefinder artefact with k-means centroids, and "
                f"none is fitted for this model at alpha {entry.body['alpha']:g}",
                field="clusters",
            )
        choices = sorted(art.centroids)
        if clusters is None:
            clusters = 8 if 8 in choices else choices[0]
        if clusters not in art.centroids:
            raise SparsescopeError(
                f"clusters must be one of {', '.join(map(str, choices))} (the artefact's k-means "
                f"fits), got {clusters}",
                field="clusters",
            )
        if not 1 <= top_k <= clusters:
            raise SparsescopeError(f"top_k must be in [1, {clusters}], got {top_k}", field="top_k")
        tags = entry.out.extra.get("pos_tags")

        def make() -> bytes:
            with torch.inference_mode():
                body = pos.cluster_breakdown(
                    entry.out, art, layer, head, clusters, pos_tags=tags, top_k=top_k
                )
            return dumps(body)

        return self.cache.derive(entry, ("clusters", layer, head, clusters, top_k), make)

    def metrics(
        self, analysis_id: str, layer: int, head: int, method: str, params: dict[str, str]
    ) -> dict:
        """Recall, sparsity, exact, precision and block sparsity (``{"16": …, "128": …}``) of
        one method setting on one head.

        ``params`` come from the query string (strings; missing ones take their defaults) and
        are checked by ``Method.validate``, whose error names the parameter at fault. The (L, H)
        metrics of a setting are computed once and kept with the analysis.
        """
        entry = self._head_entry(analysis_id, layer, head)
        if method not in METHODS:
            raise SparsescopeError(
                f"method must be one of {', '.join(METHODS)}, got {method!r}", field="method"
            )
        m = METHODS[method]
        if m.needs_artefact and entry.artefact is None:
            raise SparsescopeError(
                f"method {method} needs a Sparsefinder artefact, and none is fitted for this "
                f"model at alpha {entry.body['alpha']:g}; methods without one: "
                f"{', '.join(available(None))}",
                field="method",
            )
        clean = m.validate(entry.out.n, params, entry.artefact)
        key = ("metrics", m.name, json.dumps(clean, sort_keys=True))

        def make() -> dict[str, list]:
            with torch.inference_mode():
                got = evaluate(entry.ctx, m, clean)
            return {k: v.tolist() for k, v in got.items()}

        table = self.cache.derive(entry, key, make)
        return fold_blocks({k: table[k][layer][head] for k in METRICS})


# ----------------------------------------------------------------------------- batched summaries

#: Where the worker's batch ties an output to its siblings (``RunOutput.extra``; popped).
BATCH_KEY = "_summary_batch"


class SummaryBatch:
    """The outputs of one batched forward, summarised together on first demand.

    The first request of the batch to want its summary computes the summaries of every sibling
    of its length (and causality) at once (``payloads.summary_texts``: texts of one length stacked,
    each head's figures exactly its own text's) and builds their predict contexts; the others
    of that length wait for it and take theirs. One length group is summarised at a time: the
    summaries are many small numpy / torch calls, and several threads running them at once
    mostly contend for the GIL (the server's CPU per analysis in a burst of 48 fell from about
    30 to 23 ms with one at a time; docs/benchmarks.md). A sibling whose request has gone leaves
    its part to the garbage collector with this object.
    """

    def __init__(self, outs: list) -> None:
        self._waiting: dict[tuple, list] = {}
        for o in outs:
            self._waiting.setdefault(_summary_group(o), []).append(o)
        self._done: dict[int, tuple] = {}
        one = threading.Lock()  # one length group at a time (see the class docstring)
        self._locks = {k: one for k in self._waiting}

    def take(self, out, art, stats: Stats | None = None) -> tuple[PredictContext, str]:
        """``(ctx, summary rows as JSON text)`` of ``out`` (one of the batch's outputs)."""
        key = _summary_group(out)
        lock = self._locks.get(key)
        got = None
        if lock is not None:
            with lock:
                outs = self._waiting.pop(key, None)
                if outs is not None:
                    with torch.inference_mode():
                        ctxs = [PredictContext.from_run(o, art) for o in outs]
                    rows = summary_texts(ctxs)
                    if stats is not None and len(outs) > 1:
                        stats.summary_batches += 1
                    for o, c, r in zip(outs, ctxs, rows, strict=True):
                        self._done[id(o)] = (c, r)
                got = self._done.pop(id(out), None)
        if got is None:  # not one of ours after all: alone
            with torch.inference_mode():
                ctx = PredictContext.from_run(out, art)
            return ctx, summary_texts([ctx])[0]
        return got


def _summary_group(out) -> tuple:
    """Outputs summarised together: one length and causality (``PredictContext.stack``)."""
    return (out.n, bool(out.causal))


def _tie_batch(jobs: list, outs: list) -> None:
    """The model worker's ``after_batch``: tie a batch's outputs for :class:`SummaryBatch`."""
    batch = SummaryBatch(outs)
    for out in outs:
        if isinstance(getattr(out, "extra", None), dict):
            out.extra[BATCH_KEY] = batch


# ----------------------------------------------------------------------------- input checks


@contextmanager
def _api_wording() -> Iterator[None]:
    """A text over the model's positions, told in the API's words (its flag is truncate=true)."""
    try:
        yield
    except TextTooLongError as exc:
        raise SparsescopeError(
            f"text is {exc.length} tokens long but the model takes at most {exc.limit} "
            f"(special tokens included); shorten it, or send truncate=true to analyse a "
            f"window of {exc.limit} tokens (start: its first token, default 0)",
            field="text",
        ) from None


def _check_start(start: int) -> int:
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise SparsescopeError(
            f"start must be a token index >= 0 (the first token of the window), got {start!r}",
            field="start",
        )
    return start


def _check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not math.isfinite(a) or not 1.0 <= a <= 2.0:
        raise SparsescopeError(
            f"alpha must be in [1, 2] (1 softmax, 1.5 entmax, 2 sparsemax), got {alpha}",
            field="alpha",
        )
    return a


def _check_unicode(text: str) -> None:
    """JSON may carry a lone UTF-16 surrogate (``"\\ud800"``), which is not text: the hash, the
    tokenizer and the response would all fail on it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SparsescopeError(
            f"text is not valid Unicode: character {exc.start} is a lone surrogate "
            f"({text[exc.start]!r}); send UTF-8 text (escape pairs like \\ud83d\\ude00 are fine)",
            field="text",
        ) from None


def _looks_like_id(s: str) -> bool:
    return len(s) == ID_HEX and all(c in "0123456789abcdef" for c in s)
