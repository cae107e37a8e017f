"""The analysis cache: least-recently-used entries, bounded in count and in bytes.

An :class:`Entry` is one analysed text: the model's output (the tensors of a 512-token text weigh
about 100 MB), its predict context, the analyze body, and what later requests derived from it (a
head payload, a Pareto sweep, a metrics table). Derived results are computed once, each under its
own lock, and their bytes are added to the entry's, so the bound covers them too; past
:data:`MAX_DERIVED` results, or once the entry alone outweighs the whole bound, a result is
computed for its request but not kept, so no stream of distinct requests on one id can grow it.
:class:`KeyLocks` lets one request per key run a miss while its twins wait for the cached result.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

log = logging.getLogger(__name__)

#: Derived results kept per analysis (heads, Pareto scopes, metrics settings).
MAX_DERIVED = 512


@dataclass
class Entry:
    """One cached analysis: the model's output, its predict context and what was derived."""

    id: str
    out: Any  # sparse_core.model.RunOutput
    artefact: Any  # sparse_core.sparsefinder.Artefact | None
    artefact_name: str | None
    ctx: Any  # sparse_core.methods.PredictContext
    body_dict: dict | None  # the analyze response (None: read from body_json when asked)
    whole_json: bytes | None  # ... serialised once (None: some methods' summaries not computed)
    pos: list[str | None]
    nbytes: int = 0
    model_id: str = ""  # the served model it was analysed on
    derived: dict = field(default_factory=dict)  # ("pareto",) / ("head", l, h) ... -> data
    lock: threading.Lock = field(default_factory=threading.Lock)
    key_locks: dict = field(default_factory=dict)  # derived key -> its lock
    #: the summary method by method (app/engine/summary_parts.py) and the body without it
    #: (``payloads.analysis_json``'s ``body``): bodies with some methods' summaries only
    parts: Any = None
    core: dict | None = None

    @property
    def body_json(self) -> bytes:
        """The analyze response with every method's summary, as JSON bytes; an analysis asked
        for some methods only computes the others the first time this is read."""
        if self.whole_json is None:
            self.whole_json = self.body_with(None)
        return self.whole_json

    def body_with(self, names: list[str] | None) -> bytes:
        """The analyze response whose summary rows hold the methods of ``names`` only (None:
        every one, :attr:`body_json`), computing those not computed yet."""
        if names is None and self.whole_json is not None:
            return self.whole_json
        return self.parts.body_json(self.core, names)

    def gold_sparsity(self, layer: int, head: int) -> float:
        """One head's gold sparsity as the summary rows send it."""
        if self.parts is not None:
            return self.parts.gold_sparsity(layer, head)
        return self.body["summary"][layer * self.out.heads + head]["gold_sparsity"]

    @property
    def body(self) -> dict:
        """The analyze response as a dict. The service writes the JSON straight away
        (``payloads.analysis_json``) and keeps no dict: most analyses are only ever sent; the
        first route that reads one parses it (the same values: floats round-trip through
        their repr)."""
        if self.body_dict is None:
            self.body_dict = json.loads(self.body_json)
        return self.body_dict


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

    def peek(self, entry: Entry, key: tuple) -> Any:
        """``entry.derived[key]`` if it was derived already, else None (nothing computed)."""
        return entry.derived.get(key)

    def derive(self, entry: Entry, key: tuple, make: Callable[[], Any]) -> Any:
        """``entry.derived[key]``, computed once (under a lock of its own) and accounted for.

        One lock per key: a long sweep does not hold up a head payload of the same analysis.
        The bytes ``make`` adds to the predict context's memo (``entry.ctx.cache``: Reformer
        buckets, k-means orders ...) are counted with the result.
        """
        if key in entry.derived:
            return entry.derived[key]
        with entry.lock:
            key_lock = entry.key_locks.get(key)
            full = len(entry.key_locks) >= MAX_DERIVED or entry.nbytes > self.max_bytes
            if key_lock is None and not full:
                key_lock = entry.key_locks[key] = threading.Lock()
        if key_lock is None:
            return make()  # bounded: computed for this request, not kept
        with key_lock:
            if key not in entry.derived:
                memo = entry.ctx.cache if entry.ctx is not None else None
                before = tensor_nbytes(memo) if memo else 0
                value = make()
                entry.derived[key] = value
                after = tensor_nbytes(memo) if memo else 0
                self.grow(entry, approx_bytes(value) + after - before)
        return entry.derived[key]

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


class KeyLocks:
    """One lock per key while someone holds it (the analyses in flight, by cache key)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, list] = {}  # key -> [lock, holders]

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._lock:
            slot = self._held.setdefault(key, [threading.Lock(), 0])
            slot[1] += 1
        try:
            with slot[0]:
                yield
        finally:
            with self._lock:
                slot[1] -= 1
                if slot[1] == 0:
                    del self._held[key]


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


def approx_bytes(value: Any) -> int:
    """Rough size of derived data: exact for bytes and arrays, about 16 bytes per number in
    lists and dicts."""
    if isinstance(value, bytes | str):
        return len(value)
    if isinstance(value, torch.Tensor | np.ndarray) or hasattr(value, "__dataclass_fields__"):
        return tensor_nbytes(value)
    if isinstance(value, dict):
        return sum(approx_bytes(v) + 32 for v in value.values())
    if isinstance(value, list | tuple):
        return sum(approx_bytes(v) + 8 for v in value)
    return 16
