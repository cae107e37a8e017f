"""The analysis service: the facade the web app, the widget and ``sparsescope serve`` call.

The models are loaded once, in :meth:`AnalysisService.start` (the app's lifespan, or ``sparsescope
serve`` before the server starts), never at import; each lives in a :class:`ModelSlot` keyed by its
id, the first being the default, and each slot's worker runs its forwards (app/engine/batching.py).
An analysis is asked for with an :class:`~sparsescope.engine.request.AnalysisRequest` and cached
under its key (``AnalysisRequest.key``: the text, alpha, causal, truncate, start, the model's id
and the artefact's name) in a cache bounded in entries and bytes (app/engine/cache.py). What is
heavy and not always needed (the Pareto sweep, per-head payloads, metrics tables) is derived on
request and kept with the entry (app/engine/derived.py).

Bad input raises a domain error with the field at fault (``sparse_core.errors``,
app/engine/errors.py); nothing here knows an HTTP status. Tensors become JSON in
app/engine/payloads.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import torch

from sparse_core import __version__, pareto
from sparse_core.errors import SparsescopeError

from .admission import ComputeGate, Costs
from .cache import Entry, KeyLocks, LruCache, tensor_nbytes
from .derived import Derived
from .errors import NotFound, NotInAnalysis
from .lod import check_tile
from .memory import Trimmer
from .models import ModelRegistry
from .payloads import (
    HEAD_PARTS,
    analysis_body,
    analysis_json,
    methods_json,
    own_alpha_rows,
    summary_rows,
)
from .request import DEFAULT_ALPHA, AnalysisRequest, api_wording, check_alpha, looks_like_id
from .results import CorpusResults
from .settings import Settings
from .slot import ModelSlot, artefact_label
from .summaries import summarise
from .summary_parts import check_methods
from .tagging import Tagger

log = logging.getLogger(__name__)


def one_blas_thread() -> None:
    """numpy's BLAS on one thread for the life of the process. Its products here are small (one
    head's (n, d) x (d, n) in the summaries and sweeps), the engine spreads its work over the
    cores itself (the model worker's split, the lone summary's side worker), and OpenBLAS's own
    threads only spin against those: on a busy 2-core machine a 512-token text's summary took
    2.5-3x as long, at twice the CPU, with two BLAS threads as with one (measured with
    bench/bench_open.py --server). The figures are the same bit for bit (a BLAS thread splits the
    output's rows and columns, never a dot product)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; BLAS then keeps its threads
        return
    threadpool_limits(limits=1, user_api="blas")


#: Method lists remembered per (n, artefact name).
MAX_METHOD_LISTS = 4096
#: What the warm-up analyses (uncached).
WARMUP_TEXT = "Warm up the model."


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

    One :class:`~sparsescope.engine.slot.ModelSlot` per model of ``settings.model_names()`` (the
    first is the default), or the ``slots`` given. ``slot_options`` (``model``, ``artefact``,
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
        #: the served models (app/engine/models.py)
        self.registry = ModelRegistry(settings, slots)
        # batching off (SPARSESCOPE_BATCH_TOKENS=1: every forward alone): tag one text a call
        self.tagger = Tagger(pipe=settings.batch_tokens > 1)
        self._start_lock = threading.Lock()
        self._started = False
        self.cache = LruCache(settings.cache_entries, settings.cache_bytes)
        self.stats = Stats()
        #: seconds per token of each kind of work, measured (Retry-After of every 503)
        self.costs = Costs()
        #: bounded, memory-accounted admission of derived work (app/engine/admission.py)
        self.gate = ComputeGate(
            settings.compute_slots,
            settings.compute_memory_bytes,
            settings.compute_queue_jobs,
            settings.compute_max_wait_s,
            self.costs,
        )
        self.derived = Derived(self.cache, self.stats, self.gate)
        self._method_lists: dict[tuple[int, str | None], list[dict]] = {}
        self._inflight = KeyLocks()
        self.trimmer = Trimmer()
        #: ``--results DIR``, read and checked at start (app/engine/results.py), else None
        self.results: CorpusResults | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def slot(self) -> ModelSlot:
        """The default model's slot (the first served)."""
        return self.registry.default

    @property
    def slots(self) -> dict[str, ModelSlot]:
        """Every served model's slot by id (empty before :meth:`start`)."""
        return self.registry.by_id

    @property
    def ready(self) -> bool:
        return self.registry.ready

    @property
    def model(self):
        return self.slot.model

    def start(self, step: Callable[[str], None] | None = None, *, warm: bool = True) -> None:
        """Load the models (and the ``--artefact`` one), then warm up with one short text.

        Once: ``sparsescope serve`` starts the service before the server (so that a load error
        is one line on stderr) and the app's lifespan starts it again, which does nothing.
        ``step(message)`` hears each step as it begins and ends (``serve`` prints them; the
        default logs them). ``warm=False`` leaves the warm-up to :meth:`warm_up` (``serve``
        runs it once the server answers, so that the first start does not wait for it).
        """
        say = step or (lambda message: log.info("%s", message))
        with self._start_lock:
            if self._started:
                return
            if self.settings.threads is not None or not self.slot.ready:
                # process-wide, like the model; a model handed in (tests) leaves it alone
                torch.set_num_threads(self.settings.torch_threads())
                one_blas_thread()
            if self.settings.results_dir is not None:  # a bad folder: before the slow load
                self.results = CorpusResults.load(self.settings.results_dir)
            t0 = time.perf_counter()
            say("loading the models")
            self.registry.load()
            say(f"models loaded in {time.perf_counter() - t0:.1f} s")
            for slot in self.registry.loaded():  # analyses' 503s quote the measured summaries too
                slot.worker.summary_seconds_per_token = partial(self.costs.per_token, "summary")
            if warm:
                self.warm_up(say)
            self._started = True

    def warm_up(self, step: Callable[[str], None] | None = None) -> bool:
        """The warm-up of :meth:`start` (when the settings' ``warmup`` is on): one analysis
        through each model's worker, so that no user's first analysis pays the start-up cost.
        Analyses submitted meanwhile queue behind it on the worker, as behind any other. Whether
        it ran."""
        if not self.settings.warmup:
            return False
        say = step or (lambda message: log.info("%s", message))
        t0 = time.perf_counter()
        say("warming up: one analysis (the kernels' first calls, the tagger)")
        self.warmup()
        say(f"warm-up done in {time.perf_counter() - t0:.1f} s")
        return True

    def drop_background_work(self) -> None:
        """At the app's shutdown: drop the low-priority model work still queued (share and
        gallery warm-ups) on every model's worker; user requests already queued still run."""
        self.registry.drop_background_work()

    def begin_shutdown(self) -> None:
        """The server received SIGTERM (app/commands/serve.py): the analyses still queued on any
        model's worker, and any submitted from now on, are answered 503 with ``Retry-After``; the
        forwards already running finish."""
        self.registry.close()

    def slot_for(self, model: str | None) -> ModelSlot:
        """The slot of a served model (``ModelRegistry.slot_for``: None is the default)."""
        return self.registry.slot_for(model)

    def models(self) -> dict:
        """``GET /api/models``: every served model, the default first."""
        return self.registry.info()

    def warmup(self) -> None:
        """Run the whole pipeline once (tagger load, each served model's first forward, through
        its worker) without caching it, so that no model's first analysis pays the start-up
        cost."""
        request = AnalysisRequest(WARMUP_TEXT)
        for k, slot in enumerate(self.registry.loaded()):
            out = slot.run(request)
            if k == 0:
                self.tagger.tags(out)
            summary_rows(out, slot.artefact_for(request.alpha)[0])
            self.stats.warmups += 1

    def health(self) -> dict:
        _, name = self.slot.artefact_for(DEFAULT_ALPHA)
        return {
            "status": "ok",
            "model": self.slot.id,
            "models": [s.id for s in self.registry.all],
            "device": self.model.device,
            "artefact": name,
            "version": __version__,
            "compute": self.gate.info(),
        }

    def methods(self, n: int, alpha: float = DEFAULT_ALPHA, model: str | None = None) -> list[dict]:
        """The method registry as sliders for a text of ``n`` tokens analysed at ``alpha`` (the
        sf-* methods' choices are those of the artefact used there)."""
        slot = self.slot_for(model)
        limit = slot.model.max_positions
        if isinstance(n, bool) or not 1 <= n <= limit:
            raise SparsescopeError(
                f"n must be in [1, {limit}] (the model's positions), got {n}", field="n"
            )
        return self._method_list(n, slot.artefact_for(check_alpha(alpha))[0])

    def _method_list(self, n: int, artefact: Any) -> list[dict]:
        """:func:`~sparsescope.engine.payloads.methods_json`, remembered per (n, artefact name):
        what the sliders depend on, unlike the artefact's ``id()``, which Python reuses once an
        artefact is freed."""
        key = (n, artefact_label(artefact))
        listed = self._method_lists.get(key)
        if listed is None:
            listed = methods_json(n, artefact)
            if len(self._method_lists) < MAX_METHOD_LISTS:
                self._method_lists[key] = listed
        return listed

    # -- analyze -------------------------------------------------------------------------------

    def key(self, request: AnalysisRequest) -> str:
        """The analysis id ``request`` gets on the model and artefact it resolves to."""
        slot = self.slot_for(request.model)
        _, art_name = slot.artefact_for(request.alpha)
        return request.key(slot.id, art_name)

    def analyze(self, request: AnalysisRequest) -> dict:
        """The analyze body (a dict) of ``request``, from the cache when it was seen before."""
        return self.analyze_entry(request).body

    def analyze_json(self, request: AnalysisRequest, summary: list[str] | None = None) -> bytes:
        """The analyze body of ``request`` as JSON bytes: its summary rows with every method
        (``summary`` None, the default) or with the methods ``summary`` names only (checked
        against the registry, a 400 naming ``summary``; one the analysis lacks is left out,
        as the whole summary leaves it out). Only the methods asked for are computed now."""
        names = None if summary is None else check_methods(summary, "summary")
        entry = self.analyze_entry(request, names)
        self._summaries(entry, names)  # a cached analysis asked for methods it lacks: gated
        return entry.body_with(names)

    def summary(self, analysis_id: str, methods: list[str] | None) -> bytes:
        """``GET /api/analyses/{id}/summary``: the summary rows of a cached analysis with the
        methods named (None: every method it has), computing those not computed yet; a 400
        for a name not in the registry, a 404 for a method the analysis lacks (sf-*)."""
        entry = self.get(analysis_id)
        names = None if methods is None else check_methods(methods, "method")
        if names is not None:
            entry.parts.methods_for(names)
        self._summaries(entry, names)
        return entry.parts.rows_json(names).encode()

    def _summaries(self, entry: Entry, names: list[str] | None) -> None:
        """Compute the summaries of ``names`` (None: every method's) that ``entry`` lacks, as
        derived work through the compute gate (app/engine/admission.py); nothing when all are
        there."""
        parts = entry.parts
        if parts is None or (names is None and entry.whole_json is not None):
            return
        want = parts.names if names is None else [nm for nm in names if nm in parts.names]
        if any(nm not in parts.tables for nm in want):
            self.gate.run("summary", entry.out.n, lambda: parts.ensure(names))

    def analysis_json(self, analysis_id: str) -> bytes:
        """``GET /api/analyses/{id}``: the analyze body with every method's summary (those not
        computed yet computed now, through the gate)."""
        entry = self.get(analysis_id)
        self._summaries(entry, None)
        return entry.body_json

    def analyze_entry(self, request: AnalysisRequest, names: list[str] | None = None) -> Entry:
        """The cached :class:`Entry` of ``request``, analysing the text on a cache miss (with
        the summaries of ``names`` only, None: every method's)."""
        request = request.checked()
        slot = self.slot_for(request.model)
        if request.start:  # the window it names (clamped, at a word): one id per window
            with api_wording():
                enc = slot.model.encode(request.text, truncate=True, start=request.start)
            request = replace(request, start=enc.window_start)
        key = self.key(request)
        entry = self.cache.get(key)
        if entry is not None:
            self.stats.hits += 1
            return entry
        # analyses of different texts run together (app/engine/batching.py); a racing twin of
        # this one waits for it and finds it cached
        # the forward's temporaries and evicted analyses are handed back to the system when
        # the last analysis running ends (memory.Trimmer: once a burst, not once an analysis)
        with self.trimmer.work(), self._inflight.hold(key):
            entry = self.cache.get(key)
            if entry is not None:
                self.stats.hits += 1
                return entry
            entry = self._analyze(slot, key, request, names)
            self.cache.put(entry)
        return entry

    def _analyze(
        self, slot: ModelSlot, key: str, request: AnalysisRequest, names: list[str] | None
    ) -> Entry:
        model = slot.model
        t: dict[str, float] = {}
        t0 = time.perf_counter()
        with api_wording():  # the words the model will see, tagged beside the forward
            enc = model.encode(request.text, truncate=request.truncate, start=request.start)
            # the model's worker batches it with others; Busy when its queue is full
            pending = slot.submit(request, len(enc.ids))
            words = self.tagger.start(request.text, enc)
            out = pending.result()
        t["model"] = time.perf_counter() - t0
        self.stats.runs += 1
        art, art_name = slot.artefact_for(request.alpha)
        t0 = time.perf_counter()
        tags = self.tagger.tags(out, words)
        t["pos"] = time.perf_counter() - t0  # what is left of the tagging after the forward
        t0 = time.perf_counter()
        # run in one forward with others: summarised with them (app/engine/summaries.py)
        ctx, parts, together = summarise(out, art, names)
        if together > 1:
            self.stats.summary_batches += 1
        t["summary"] = time.perf_counter() - t0
        self.costs.observe("summary", out.n, t["summary"])
        t0 = time.perf_counter()
        body = analysis_body(
            key,
            out,
            model_id=slot.id,
            device=model.device,
            alpha=request.alpha,
            causal=bool(out.causal),
            decoder=bool(model.config.is_decoder),
            artefact_name=art_name,
            pos=tags,
            summary=None,  # written as JSON text straight away (payloads.summary_json)
            methods=self._method_list(out.n, art),
            own_alpha=own_alpha_rows(model),
        )
        body_json = analysis_json(body, parts.rows_json(names))
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
        whole = body_json if names is None else None
        entry = Entry(key, out, art, art_name, ctx, None, whole, tags, model_id=slot.id)
        entry.parts, entry.core = parts, body
        entry.nbytes = tensor_nbytes([out, ctx], exclude=[art]) + 2 * len(body_json)
        return entry

    # -- one analysis, and what is derived from it (app/engine/derived.py) -----------------------

    def get(self, analysis_id: str) -> Entry:
        """The cached analysis ``analysis_id``; :class:`NotFound` when unknown or evicted."""
        entry = self.cache.get(analysis_id) if looks_like_id(analysis_id) else None
        if entry is None:
            raise NotFound(
                f"no analysis with id {analysis_id[:40]!r}: it is unknown or was evicted from "
                "the cache; POST the text to /api/analyze again"
            )
        return entry

    def cached(self, analysis_id: str) -> bool:
        return looks_like_id(analysis_id) and self.cache.get(analysis_id) is not None

    def _head_entry(self, analysis_id: str, layer: int, head: int) -> Entry:
        entry = self.get(analysis_id)
        out = entry.out
        if not 0 <= layer < out.layers:
            raise NotInAnalysis(
                f"layer must be in [0, {out.layers - 1}] for this model, got {layer}", field="layer"
            )
        if not 0 <= head < out.heads:
            raise NotInAnalysis(
                f"head must be in [0, {out.heads - 1}] for this model, got {head}", field="head"
            )
        return entry

    def _head_or_all(
        self, analysis_id: str, layer: int | None, head: int | None, one: str, every: str
    ) -> Entry:
        """The entry, for one head (both given and checked) or for all (neither); one of the two
        alone is a 400 naming the missing one (an unknown id is said first)."""
        if (layer is None) != (head is None):
            self.get(analysis_id)
            missing = "head" if head is None else "layer"
            raise SparsescopeError(
                f"give both layer and head for {one}, or neither for {every}; {missing} is missing",
                field=missing,
            )
        if layer is None:
            return self.get(analysis_id)
        return self._head_entry(analysis_id, layer, head)

    def head(
        self, analysis_id: str, layer: int, head: int, part: str = "all",
        methods: Iterable[str] | None = None,
    ) -> bytes:  # fmt: skip
        """One head's payload as JSON bytes (``Derived.head``): ``part`` all, graph or methods;
        ``methods`` (None: every method's data with all / methods, none with graph): only those
        methods' data (a 400 naming ``method`` for an unknown name)."""
        if part not in HEAD_PARTS:
            raise SparsescopeError(
                f"part must be one of {', '.join(HEAD_PARTS)}, got {part!r}", field="part"
            )
        names = None if methods is None else check_methods(methods, "method")
        entry = self._head_entry(analysis_id, layer, head)
        return self.derived.head(entry, layer, head, part, names)

    def tile(self, analysis_id: str, layer: int, head: int, level: int, ti: int, tj: int) -> bytes:
        """Tile (ti, tj) of ``level`` of one head's pyramid (app/engine/lod.py)."""
        entry = self._head_entry(analysis_id, layer, head)
        check_tile(entry.out.n, level, ti, tj)  # before the cache: a bad index costs nothing
        return self.derived.tile(entry, layer, head, level, ti, tj)

    def raw(self, analysis_id: str, layer: int, head: int) -> bytes:
        """The lecture's raw vectors of one head (``Derived.raw``)."""
        entry = self._head_entry(analysis_id, layer, head)
        d_model = self.slot_for(entry.model_id or None).model.config.hidden_size
        return self.derived.raw(entry, layer, head, d_model)

    def pareto(
        self, analysis_id: str, layer: int | None, head: int | None, x: str = "sparsity",
        block: int | None = None, output_error: bool = False,
    ) -> bytes:  # fmt: skip
        """Pareto data of one head, or (both None) the mean over heads (``Derived.pareto``);
        ``output_error``: each point's output error too (one head only)."""
        x, block = pareto.check_axis(x, block)
        entry = self._head_or_all(
            analysis_id, layer, head, "one head's Pareto data", "the mean over heads"
        )
        if output_error and layer is None:
            raise SparsescopeError(
                "output_error is measured per head: give layer and head (the mean over heads "
                "has recall and mass recall only)",
                field="output_error",
            )
        return self.derived.pareto(entry, layer, head, x, block, output_error)

    def budgets(self, analysis_id: str, layer: int | None, head: int | None) -> bytes:
        """Oracle budgets of one head, or (both None) of every head (``Derived.budgets``)."""
        entry = self._head_or_all(analysis_id, layer, head, "one head's budgets", "every head")
        return self.derived.budgets(entry, layer, head)

    def roles(self, analysis_id: str) -> bytes:
        """Every head's role on the analysed text (``Derived.roles``)."""
        return self.derived.roles(self.get(analysis_id))

    def clusters(
        self, analysis_id: str, layer: int, head: int, clusters: int | None, top_k: int
    ) -> bytes:
        """POS make-up of one head's k-means clusters (``Derived.clusters``)."""
        entry = self._head_entry(analysis_id, layer, head)
        return self.derived.clusters(entry, layer, head, clusters, top_k)

    def metrics(
        self, analysis_id: str, layer: int, head: int, method: str, params: dict[str, str]
    ) -> dict:
        """The metrics of one method setting on one head (``Derived.metrics``)."""
        entry = self._head_entry(analysis_id, layer, head)
        return self.derived.metrics(entry, layer, head, method, params)

    def flow(self, analysis_id: str, token: int, layer: int | None = None) -> bytes:
        """Which input tokens reach ``token`` at the output of ``layer`` (default: the last),
        and with what rollout mass (``Derived.flow``)."""
        entry = self.get(analysis_id)
        try:
            return self.derived.flow(entry, token, layer)
        except SparsescopeError as exc:  # sparse_core.flow's range check: a part it lacks
            if exc.field in ("token", "layer"):
                raise NotInAnalysis(str(exc), field=exc.field) from None
            raise

    # -- corpus results (``serve --results DIR``, app/engine/results.py) ------------------------

    def corpus_results(self) -> CorpusResults:
        if self.results is None:
            raise NotFound(
                "this server shows no corpus results: start it with `sparsescope serve "
                "--results DIR` (a folder written by `sparsescope pareto --out DIR`), or open a "
                "pareto.json in the page",
                field="results",
            )
        return self.results
