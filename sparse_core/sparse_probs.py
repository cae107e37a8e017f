"""The entmax probabilities P of every head of one run, held sparse (definitions §1).

P is exactly zero off the graph G = {(i, j) : P_ij > 0}, and at α ≥ 1.5 99 % of a long text's
pairs are zero, so nothing needs a dense (L, H, n, n) tensor: at n = 4,096 it would take 4.8 GB
(MiniLM's 6 × 12 heads), at 16,384 77 GB. :class:`SparseProbs` holds P in one of two forms:

- **dense**, (L, H, n, n) float32, when that takes at most ``dense_max_bytes`` (default
  :data:`DENSE_MAX_BYTES`: MiniLM up to n ≈ 680, so the page's usual texts keep the form every
  consumer read before, at no conversion cost);
- **CSR per layer** otherwise: the layer's H·n rows (row r = h·n + i) as ``crow`` (H·n + 1,)
  int64 row pointers, ``col`` (E,) int32 keys ascending within a row and ``val`` (E,) float32
  probabilities, E = |G| of the layer. 8 bytes per edge: at 99.5 % sparsity about 1/100 of the
  dense form. A head near α = 1 is dense and costs twice its dense size in CSR (not a case the
  long-text floors cover; docs/architecture.md, "P and G access").

Every consumer reads P and G through this class's per-head accessors (``head``, ``head_graph``,
``layer``, ``rows``, ``edges``, ``nnz``; :class:`~sparse_core.methods.PredictContext` wraps them)
or, for small n only, :meth:`dense` (``RunOutput.probs``), which densifies a CSR store once
and refuses above :data:`DENSIFY_MAX_BYTES` with a clear error. The model run fills a CSR store
chunk by chunk (:meth:`add_rows`) as the chunked entmax produces rows
(:mod:`sparse_core.attention`), so no layer's dense P exists at once.
Tensors live on one device (the run's); :meth:`to` moves the store (the sparse parts only).
A CUDA run keeps its CSR store on the GPU (:attr:`SparseProbs.host_reads`): the accessors then
hand back host tensors, copying only the span they read (a head's rows, a head, a layer), so a
view of one head at n = 16,384 moves about 1/72 of the run's P to the host, not all of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from .cancel import checkpoint
from .errors import SparsescopeError

#: Scores per chunk of (heads x query rows) of a run recorded into a sparse store (64 MB;
#: ``attention._sparse_path``)
CHUNK_SCORES = 1 << 24
#: The same on a GPU, at most (1 GiB of float32 scores a chunk, and no more than 1/64 of the
#: device's memory: :func:`gpu_chunk_scores`). Each chunk waits once for the host (the size of
#: its support), so fewer, larger chunks keep the device busy: at n = 16,384 a layer is 12
#: chunks instead of 192, and the H100 run took 0.44-0.55 s instead of 0.63-0.64 s with 2^26
#: (docs/benchmarks.md, "GPU").
CUDA_CHUNK_SCORES = 1 << 28
#: Runs whose dense P takes at most this many bytes keep it dense (MiniLM: n <= ~680).
DENSE_MAX_BYTES = 128 << 20
#: :meth:`SparseProbs.dense` of a CSR store refuses above this many bytes (MiniLM: n > ~2,900).
DENSIFY_MAX_BYTES = 2 << 30


def gpu_chunk_scores(device: torch.device) -> int:
    """Scores per chunk of a run recorded sparse on a GPU: :data:`CUDA_CHUNK_SCORES`, lowered so
    that a chunk's float32 scores take at most 1/64 of the device's memory (its P and their
    temporaries take about as much again, twice)."""
    total = torch.cuda.get_device_properties(device).total_memory
    return min(CUDA_CHUNK_SCORES, 1 << ((total // 256).bit_length() - 1))


def dense_fits(layers: int, heads: int, n: int, limit: int | None = None) -> bool:
    """Whether a run of n tokens keeps P dense (``layers · heads · n² · 4 <= limit``)."""
    limit = DENSE_MAX_BYTES if limit is None else limit
    return layers * heads * n * n * 4 <= limit


class SparseProbs:
    """P of every (layer, head) of one run: dense (L, H, n, n) or CSR per layer (see module)."""

    def __init__(self, layers: int, heads: int, n: int, *, dense: Tensor | None = None) -> None:
        self.L, self.H, self.n = int(layers), int(heads), int(n)
        self._dense = dense  # (L, H, n, n) float32 or None
        self._graph: Tensor | None = None
        self.crow: list[Tensor] = []  # per layer (H·n + 1,) int64
        self.col: list[Tensor] = []  # per layer (E_l,) int32
        self.val: list[Tensor] = []  # per layer (E_l,) float32
        self._parts: list[list[tuple[int, Tensor, Tensor, Tensor]]] = []  # while filling
        #: P stays on its device (a CUDA run's); every accessor returns host tensors, copying
        #: only what it reads (a head's CSR once, then from the host cache ``_host``)
        self.host_reads = False
        self._host: dict[tuple[int, int], tuple[Tensor, Tensor, Tensor]] = {}

    # ------------------------------------------------------------------ building
    @classmethod
    def from_dense(cls, probs: Tensor) -> SparseProbs:
        """A dense store around ``probs`` (L, H, n, n) (no copy)."""
        L, H, n, _ = probs.shape
        return cls(L, H, n, dense=probs)

    @classmethod
    def csr_from_dense(cls, probs: Tensor) -> SparseProbs:
        """A CSR store of ``probs`` (L, H, n, n) (tests; small n)."""
        L, H, n, _ = probs.shape
        out = cls(L, H, n)
        for li in range(L):
            out.start_layer()
            out.add_rows(0, probs[li].reshape(H * n, n))
            out.end_layer()
        return out

    @property
    def is_dense(self) -> bool:
        return self._dense is not None

    def start_layer(self) -> None:
        self._parts.append([])

    def add_rows(self, first: int, p: Tensor) -> None:
        """Rows ``first …`` (flat r = h·n + i) of the current layer, from a dense chunk (R, n).
        Chunks of a layer must come in row order and cover its H·n rows once."""
        flat = p.reshape(-1).nonzero().squeeze(1)  # (E,) flat indices, row-major
        counts = torch.bincount(flat // self.n, minlength=p.shape[0])  # (R,)
        col = (flat % self.n).to(torch.int32)
        self._parts[-1].append((first, counts, col, p.reshape(-1)[flat]))

    def end_layer(self) -> None:
        parts = self._parts.pop()
        if not parts:
            raise RuntimeError("a layer of the sparse store got no rows")
        dev = parts[0][1].device
        counts = torch.cat([c for _, c, _, _ in parts])
        if counts.numel() != self.H * self.n:
            raise RuntimeError(f"a layer got {counts.numel()} rows, expected {self.H * self.n}")
        crow = torch.zeros(self.H * self.n + 1, dtype=torch.int64, device=dev)
        torch.cumsum(counts, 0, out=crow[1:])
        self.crow.append(crow)
        self.col.append(torch.cat([c for _, _, c, _ in parts]))
        self.val.append(torch.cat([v for _, _, _, v in parts]))

    # ------------------------------------------------------------------ reading
    @property
    def device(self) -> torch.device:
        return self._dense.device if self._dense is not None else self.crow[0].device

    def nbytes(self) -> int:
        """Bytes held (the dense tensor, or the CSR arrays)."""
        if self._dense is not None:
            return self._dense.numel() * 4
        return sum(t.numel() * t.element_size() for t in (*self.crow, *self.col, *self.val))

    def _head_span(self, layer: int, head: int) -> tuple[Tensor, int, int]:
        crow = self.crow[layer][head * self.n : (head + 1) * self.n + 1]  # (n + 1,)
        return crow, int(crow[0]), int(crow[-1])

    def head(self, layer: int, head: int) -> Tensor:
        """(n, n) float32 P of one head (a view of the dense store; else a new tensor)."""
        checkpoint()  # between heads: a cancelled computation stops here (sparse_core.cancel)
        if self._dense is not None:
            return self._dense[layer, head]
        if self.host_reads:
            self._host_head(layer, head)  # the whole head is read: copy it once, keep it
        return self.rows(layer, head, slice(0, self.n))

    def head_graph(self, layer: int, head: int) -> Tensor:
        """(n, n) bool G = P > 0 of one head."""
        return self.head(layer, head) > 0

    def layer(self, layer: int) -> Tensor:
        """(H, n, n) float32 P of every head of ``layer``."""
        if self._dense is not None:
            return self._dense[layer]
        return torch.stack([self.head(layer, h) for h in range(self.H)])

    def _row_range(self, rows: slice) -> tuple[int, int]:
        lo, hi, step = rows.indices(self.n)
        if step != 1:
            raise ValueError("rows must be a slice with step 1")
        return lo, max(hi, lo)

    def _span(self, layer: int, head: int, lo: int, hi: int) -> tuple[Tensor, Tensor, Tensor]:
        """Rows ``lo … hi − 1`` of one head as CSR: row pointers (hi − lo + 1,; their
        differences are the rows' edge counts, their first is not 0), keys and p. A
        :attr:`host_reads` store reads them on the host, from its kept head if it has one, else
        by copying these rows' span alone; any other store reads them where it is."""
        got = self._host.get((layer, head)) if self.host_reads else None
        if got is not None:
            crow, col, val = got[0][lo : hi + 1], got[1], got[2]
        else:
            base = head * self.n
            crow, col, val = (
                self.crow[layer][base + lo : base + hi + 1],
                self.col[layer],
                self.val[layer],
            )
            if self.host_reads:
                crow = crow.cpu()
        a, b = int(crow[0]), int(crow[-1])
        col, val = col[a:b], val[a:b]
        if self.host_reads:
            col, val = col.cpu(), val.cpu()
        return crow, col, val

    def rows(self, layer: int, head: int, rows: slice) -> Tensor:
        """(len(rows), n) float32: rows ``rows`` (a step-1 slice) of one head's P."""
        checkpoint()  # between row blocks (sparse_core.cancel)
        lo, hi = self._row_range(rows)
        if self._dense is not None:
            return self._dense[layer, head, lo:hi]
        crow, col, val = self._span(layer, head, lo, hi)
        r = torch.repeat_interleave(torch.arange(hi - lo, device=crow.device), crow.diff())
        out = torch.zeros(hi - lo, self.n, dtype=torch.float32, device=crow.device)
        out[r, col.long()] = val
        return out

    def row_edges(self, layer: int, head: int, rows: slice) -> tuple[Tensor, Tensor, Tensor]:
        """The edges of rows ``rows`` (a step-1 slice) of one head, on the host: row (from the
        slice's start) and key int64 and p float32 (E,), row-major. Reads the rows' CSR span
        alone (no dense (rows, n) block: what a tile of a long head needs)."""
        checkpoint()  # between row blocks (sparse_core.cancel)
        lo, hi = self._row_range(rows)
        if self._dense is not None:
            block = self._dense[layer, head, lo:hi].cpu()
            i, j = block.nonzero(as_tuple=True)
            return i, j, block[i, j]
        crow, col, val = self._span(layer, head, lo, hi)
        i = torch.repeat_interleave(torch.arange(hi - lo), crow.diff().cpu())
        return i, col.cpu().long(), val.cpu()

    def _host_head(self, layer: int, head: int) -> tuple[Tensor, Tensor, Tensor]:
        """One head's CSR on the host (row pointers from 0), copied once (:attr:`host_reads`)."""
        if (layer, head) not in self._host:
            crow, col, val = self._span(layer, head, 0, self.n)
            self._host[(layer, head)] = (crow - crow[0], col, val)
        return self._host[(layer, head)]

    def nnz(self) -> Tensor:
        """(L, H) int64 |G| of every head."""
        if self._dense is not None:
            return (self._dense > 0).sum((-1, -2))
        per = [c[self.n :: self.n] - c[: -1 : self.n] for c in self.crow]  # (H,) each
        out = torch.stack(per)
        return out.cpu() if self.host_reads else out

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every head's edges: (a, i, j) int64 and p float32 numpy arrays (E,), sorted by
        (a, i, j) with a = layer · H + head."""
        n = self.n
        if self._dense is not None:
            d = self._dense.cpu()
            flat = np.flatnonzero(d.numpy() > 0)  # ~8x faster than a 3-d nonzero
            p = d.numpy().reshape(-1)[flat]
            a, rest = np.divmod(flat, n * n)
            i, j = np.divmod(rest, n)
            return a, i, j, p
        a_s, i_s, j_s, p_s = [], [], [], []
        for li in range(self.L):
            crow = self.crow[li].cpu().numpy()
            rows = np.repeat(np.arange(self.H * n, dtype=np.int64), np.diff(crow))
            h, i = np.divmod(rows, n)
            a_s.append(h + li * self.H)
            i_s.append(i)
            j_s.append(self.col[li].cpu().numpy().astype(np.int64))
            p_s.append(self.val[li].cpu().numpy())
        return tuple(np.concatenate(x) for x in (a_s, i_s, j_s, p_s))  # type: ignore[return-value]

    def values_at(self, a: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """P at the pairs (a, i, j) (flat head a = layer · H + head), float32 (0 off G)."""
        a, i, j = (np.asarray(x, dtype=np.int64) for x in (a, i, j))
        n = self.n
        if self._dense is not None:
            return self._dense.cpu().numpy().reshape(-1)[(a * n + i) * n + j]
        out = np.zeros(a.shape, dtype=np.float32)
        for li in range(self.L):
            sel = np.flatnonzero(a // self.H == li)
            if not len(sel):
                continue
            crow = self.crow[li].cpu().numpy()
            col = self.col[li].cpu().numpy()
            r = (a[sel] % self.H) * n + i[sel]
            lo, hi = crow[r], crow[r + 1]
            # keys ascend within a row: binary search in each row's span
            key = r * n + j[sel]
            rows_of = np.repeat(np.arange(self.H * n, dtype=np.int64), np.diff(crow))
            flat = rows_of * n + col  # ascending
            pos = np.searchsorted(flat, key)
            hit = (pos < hi) & (pos >= lo)
            hit[hit] = flat[pos[hit]] == key[hit]
            out[sel[hit]] = self.val[li].cpu().numpy()[pos[hit]]
        return out

    def dense(self) -> Tensor:
        """(L, H, n, n) float32: the dense store itself, or a CSR store densified once (refused
        above :data:`DENSIFY_MAX_BYTES`: read such runs per head)."""
        if self._dense is None:
            size = self.L * self.H * self.n * self.n * 4
            if size > DENSIFY_MAX_BYTES:
                raise SparsescopeError(
                    f"a dense P of {self.L}x{self.H}x{self.n}x{self.n} would take "
                    f"{size / 2**30:.1f} GiB (more than {DENSIFY_MAX_BYTES / 2**30:.0f} GiB); "
                    "read it per head (RunOutput.attn.head(layer, head), PredictContext."
                    "head_probs)"
                )
            self._dense = torch.stack([self.layer(li) for li in range(self.L)])
        return self._dense

    def dense_graph(self) -> Tensor:
        """(L, H, n, n) bool G = P > 0 (computed once; the same limit as :meth:`dense`)."""
        if self._graph is None:
            self._graph = self.dense() > 0
        return self._graph

    # ------------------------------------------------------------------ reshaping
    def select(self, layer: int, head: int) -> SparseProbs:
        """Head (layer, head) alone as a (1, 1, n, n) store (views where possible)."""
        if self._dense is not None:
            out = SparseProbs(1, 1, self.n, dense=self._dense[layer : layer + 1, head : head + 1])
            if self._graph is not None:
                out._graph = self._graph[layer : layer + 1, head : head + 1]
            return out
        crow, a, b = self._head_span(layer, head)
        out = SparseProbs(1, 1, self.n)
        out.crow, out.col, out.val = [crow - a], [self.col[layer][a:b]], [self.val[layer][a:b]]
        out.host_reads = self.host_reads
        if (layer, head) in self._host:
            out._host[(0, 0)] = self._host[(layer, head)]
        return out

    def select_layers(self, first: int, stop: int) -> SparseProbs:
        """Layers ``first`` to ``stop - 1`` with every head, as a store of their own (views)."""
        if self._dense is not None:
            out = SparseProbs(stop - first, self.H, self.n, dense=self._dense[first:stop])
            if self._graph is not None:
                out._graph = self._graph[first:stop]
            return out
        out = SparseProbs(stop - first, self.H, self.n)
        out.crow, out.col = self.crow[first:stop], self.col[first:stop]
        out.val = self.val[first:stop]
        out.host_reads = self.host_reads
        out._host = {(li - first, h): v for (li, h), v in self._host.items() if first <= li < stop}
        return out

    @staticmethod
    def cat(stores: Sequence[SparseProbs]) -> SparseProbs:
        """Several runs' stores (same H and n) as one whose layers are each run's in turn."""
        first = stores[0]
        L = sum(s.L for s in stores)
        if all(s._dense is not None for s in stores):
            return SparseProbs.from_dense(torch.cat([s._dense for s in stores]))
        out = SparseProbs(L, first.H, first.n)
        for s in stores:
            if s._dense is not None:
                s = SparseProbs.csr_from_dense(s._dense)
            out.crow += s.crow
            out.col += s.col
            out.val += s.val
        out.host_reads = all(s.host_reads for s in stores)
        return out

    def to(self, device: torch.device | str) -> SparseProbs:
        """The store on ``device`` (the same object when it is there)."""
        device = torch.device(device)
        if self.device == device:
            return self
        if self._dense is not None:
            return SparseProbs.from_dense(self._dense.to(device))
        out = SparseProbs(self.L, self.H, self.n)
        out.crow = [t.to(device) for t in self.crow]
        out.col = [t.to(device) for t in self.col]
        out.val = [t.to(device) for t in self.val]
        return out

    def __getstate__(self) -> dict:
        """Pickled (a worker's result, a cache) with its tensors on the host."""
        state = self.__dict__.copy()
        if self._dense is None and self.crow and self.device.type != "cpu":
            for k in ("crow", "col", "val"):
                state[k] = [t.cpu() for t in state[k]]
            state["host_reads"], state["_host"] = False, {}
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("host_reads", False)  # pickled before host reads existed
        state.setdefault("_host", {})
        self.__dict__.update(state)
