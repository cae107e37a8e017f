"""The entmax attention function that transformers' own model classes call, and its recorder.

definitions §1. transformers' attention modules compute the queries, keys and values (rotary
position embeddings included, where the model has them) and then call the function registered under
``config._attn_implementation`` in ``transformers.AttentionInterface``. We register
:func:`entmax_attention` under the name :data:`IMPLEMENTATION`, so the model code stays the
library's and one function serves every architecture. Per head h of a layer it computes

    S = scaling · Q_h K_{g(h)}ᵀ        (the module's own ``scaling``: 1/√d_head for BERT and Llama;
                                        GPT-2 passes its ``scale_attn_weights`` /
                                        ``scale_attn_by_inverse_layer_idx`` product)
    S = c · tanh(S / c)                 (only where the model caps its logits, Gemma-2: ``softcap``)
    S_ij = −∞ where the model's mask, the causal mask or the restriction mask forbids (i, j)
    P = α-entmax(S) row-wise, in float32 whatever the weights' dtype
    O_h = P V_{g(h)}

with g(h) = h // (H / H_kv) under grouped-query attention (Llama, Qwen2, Mistral).

The mask the model hands in is built by transformers' ``masking_utils`` through the mask function
we register under the same name (:func:`boolean_mask`): a boolean (B, 1, n, n) "may attend" mask,
or None when nothing is masked (a bidirectional encoder without padding). Decoders get their
causal (and, where the model has one, sliding-window) mask from there; an encoder run with
``causal=True`` gets ours on top.

What a run asks for (α, causality, restriction masks) and what it records (queries, expanded keys,
P) travel in a :class:`RunState` held in a context variable for the duration of one forward, so
concurrent runs in different threads do not see each other's state. Without a state (someone
calls the transformers model directly) the function is plain entmax at the default α = 1.5 and
records nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field

import torch
from torch import Tensor

from . import sparse_probs as _sp
from .entmax import entmax
from .sparse_probs import CHUNK_SCORES, SparseProbs

log = logging.getLogger(__name__)

IMPLEMENTATION = "sparsescope_entmax"
"""The name under which the function and its mask builder are registered in transformers."""
DEFAULT_ALPHA = 1.5

_STATE: contextvars.ContextVar[RunState | None] = contextvars.ContextVar(
    "sparsescope_run_state", default=None
)
_REGISTERED = False


@dataclass
class LayerInfo:
    """What the first forward learns about each attention layer (static for a model)."""

    heads: int
    kv_heads: int
    head_dim: int
    scaling: float
    softcap: float | None


@dataclass
class RunState:
    """One forward's settings and recordings.

    ``alphas``: per layer a float or a (1, H, 1, 1) tensor on the model's device.
    ``restrict``: None or an (L, B, H, n, n) bool tensor (True = may attend).
    ``layer_of``: the attention module -> its layer index (learned by the discovery forward).
    With ``record`` the buffers (L, B, H, n, d) / (L, B, H, n, n) are filled layer by layer.
    """

    alphas: list[float | Tensor] | None = None
    causal: bool = False
    restrict: Tensor | None = None
    layer_of: dict[int, int] = field(default_factory=dict)
    record: bool = False
    queries: Tensor | None = None  # (L, B, H, n, d) float32
    keys: Tensor | None = None  # (L, B, H, n, d) float32, one per query head
    #: (L, B, H, n, d) float32, one per query head (what P multiplies: a miss's cost,
    #: ``metrics.output_error``); None: not recorded
    values: Tensor | None = None
    probs: Tensor | None = None  # (L, B, H, n, n) float32
    discover: list[tuple[int, LayerInfo]] | None = None  # filled by the discovery forward
    #: several texts packed one after the other in one row (B = 1): each text's (start,
    #: length). Each text's attention is then computed on its own n_i x n_i block only, so its
    #: numbers are those of its single run bit for bit; with ``record``, ``segment_probs[i]``
    #: (L, H, n_i, n_i) receives text i's probabilities (``probs`` stays None).
    segments: list[tuple[int, int]] | None = None
    segment_probs: list[Tensor] | None = None
    #: with ``record``: the layer after whose recording the forward stops (:class:`StopForward`;
    #: the last layer when only the recordings are wanted, not the final hidden states)
    stop_after: int | None = None
    #: a training forward (:mod:`sparse_core.adapt`): attention with autograd through entmax
    #: (:func:`_training_path`), dropout on P as the module says, nothing recorded;
    #: ``alphas`` may then hold tensors that require grad (learned α per head)
    train: bool = False
    #: with ``train``: per layer, (|G|, |V|) per head summed over the batch, (H,) each, appended
    #: layer by layer (the gold sparsity of the training batch, for the training log)
    support: list[tuple[Tensor, Tensor]] | None = None
    #: with ``record``: P goes into this sparse store (:class:`~sparse_core.sparse_probs.
    #: SparseProbs`, CSR) chunk by chunk instead of ``probs``; the scores of one layer then
    #: never exist at once (:func:`_sparse_path`)
    store: SparseProbs | None = None
    #: a lone run on two cores (:class:`~sparse_core.runtime.Runtime`'s side worker): half of
    #: every layer's heads run there (:func:`_split_heads`); its linear layers' rows are split by
    #: the runtime's forward (the results are those of the run without it bit for bit)
    side: Executor | None = None
    _causal_mask: Tensor | None = None
    _scratch: dict = field(default_factory=dict)

    def scratch(self, shape: tuple[int, ...], device: torch.device) -> Tensor:
        """A float32 buffer of ``shape`` for the calling thread, the same for every layer of
        the run (the scores: :func:`_scores`)."""
        key = (threading.get_ident(), tuple(shape), torch.device(device))
        buf = self._scratch.get(key)
        if buf is None:
            buf = self._scratch[key] = torch.empty(shape, dtype=torch.float32, device=device)
        return buf

    def layer(self, module) -> int:
        li = self.layer_of.get(id(module))
        if li is None:
            raise RuntimeError(
                f"attention module {type(module).__name__} was not seen when the model was "
                "loaded; sparsescope supports self-attention only"
            )
        return li

    def causal_mask(self, n: int, m: int, device: torch.device) -> Tensor:
        """(n, m) bool, True where key j <= query i (queries are the last n of m positions)."""
        cm = self._causal_mask
        if cm is None or cm.shape != (n, m) or cm.device != device:
            cm = torch.ones(n, m, dtype=torch.bool, device=device).tril_(m - n)
            self._causal_mask = cm
        return cm


class StopForward(Exception):  # noqa: N818  (a signal, not an error)
    """Raised by :func:`entmax_attention` once ``RunState.stop_after``'s layer is recorded: the
    rest of the forward (that layer's P V, output projection and feed-forward, later layers) is
    not needed; the caller catches it."""


@contextlib.contextmanager
def running(state: RunState) -> Iterator[RunState]:
    """Make ``state`` the current run's state for the forward inside the block."""
    token = _STATE.set(state)
    try:
        yield state
    finally:
        _STATE.reset(token)


def expand_kv(x: Tensor, heads: int) -> Tensor:
    """(B, H_kv, m, d) -> (B, H, m, d): query head h reads key/value head h // (H / H_kv)."""
    b, h_kv, m, d = x.shape
    if h_kv == heads:
        return x
    if heads % h_kv:
        raise RuntimeError(f"{heads} query heads cannot share {h_kv} key/value heads evenly")
    g = heads // h_kv
    return x[:, :, None].expand(b, h_kv, g, m, d).reshape(b, heads, m, d)  # (B, H, m, d)


@dataclass(frozen=True)
class Call:
    """One call of :func:`entmax_attention`: what every path takes, and nothing else.

    ``query`` (B, H, n, d); ``key`` and ``value`` (B, H, m, d), expanded to one per query head;
    ``mask`` the model's own mask cut to the m keys (boolean "may attend", or additive;
    broadcastable to (B, 1, n, m)) or None; ``li`` the layer and ``alpha`` its α (a float or a
    (1, H, 1, 1) tensor); ``state`` the run's (None: a call outside any run)."""

    module: object
    state: RunState | None
    query: Tensor
    key: Tensor
    value: Tensor
    mask: Tensor | None
    scaling: float
    softcap: float | None
    dropout: float
    li: int
    alpha: float | Tensor
    kv_heads: int


#: An attention path: a :class:`Call` -> ((B, n, H, d) output, P or an empty tensor).
Path = Callable[[Call], tuple[Tensor, Tensor]]


def choose_path(state: RunState | None, b: int, h: int, n: int, m: int, device, alpha) -> Path:
    """The path one attention call takes, first match wins:

    ========================  ===================================================================
    no run, or discovery      :func:`_plain_path` (entmax at the default α; discovery notes the
                              layer's shape)
    ``state.train``           :func:`_training_path` (autograd through entmax, dropout on P)
    ``state.segments``        :func:`_packed_path` (texts packed in one row, each on its block)
    ``state.store``           :func:`_sparse_path` (recorded into CSR, in chunks)
    ``state.side``, one text  :func:`_split_heads` (half of the heads on the side worker; a
    of several heads, one α   scalar α only: a per-head α is grouped by its values)
    recording one text on     :func:`_dense_in_chunks` (chunks of whole heads while their
    the CPU, scores over      scores stay in cache)
    DENSE_CHUNK_SCORES, one α
    otherwise                 :func:`_dense_path` (the layer's scores at once)
    ========================  ===================================================================
    """
    if state is None or state.discover is not None:
        return _plain_path
    if state.train:
        return _training_path
    if state.segments is not None:
        return _packed_path
    if state.store is not None:
        return _sparse_path
    if state.side is not None and b == 1 and h > 1 and _heads_split(alpha):
        return _split_heads
    if (
        state.record
        and b == 1
        and device.type == "cpu"
        and h * n * m > DENSE_CHUNK_SCORES
        and _heads_split(alpha)
    ):
        return _dense_in_chunks
    return _dense_path


def entmax_attention(
    module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    softcap: float | None = None,
    **kwargs,
) -> tuple[Tensor, Tensor]:
    """transformers' attention-function signature; returns ((B, n, H, d) output, (B, H, n, m) P).

    query (B, H, n, d), key and value (B, H_kv, m, d); ``attention_mask`` boolean (B, 1, n, m)
    (True = may attend), an additive float mask of that shape (models that build their own), or
    None. ``dropout`` is used by training forwards only. The path is :func:`choose_path`'s.
    """
    if kwargs.get("s_aux") is not None:
        raise RuntimeError("attention sinks (s_aux) are not supported by sparsescope")
    state = _STATE.get()
    b, h, n, d = query.shape
    h_kv, m = key.shape[1], key.shape[2]
    live = state is not None and state.discover is None
    li = state.layer(module) if live else -1
    alpha = DEFAULT_ALPHA
    if live and state.alphas is not None:
        alpha = state.alphas[li]
    call = Call(
        module=module,
        state=state,
        query=query,
        key=expand_kv(key, h),  # (B, H, m, d)
        value=expand_kv(value, h),
        mask=None if attention_mask is None else attention_mask[..., :m],  # (B, 1, n, m)
        scaling=float(d**-0.5 if scaling is None else scaling),
        softcap=softcap,
        dropout=dropout,
        li=li,
        alpha=alpha,
        kv_heads=h_kv,
    )
    return choose_path(state, b, h, n, m, query.device, alpha)(call)


def _plain_path(c: Call) -> tuple[Tensor, Tensor]:
    """Entmax at the default α outside a run; in the discovery forward, the layer noted."""
    b, h, n, d = c.query.shape
    scores = _scores(c.query, c.key, c.scaling, c.softcap, c.mask, None)  # (B, H, n, m)
    probs = entmax(scores, DEFAULT_ALPHA)
    if c.state is not None:
        info = LayerInfo(h, c.kv_heads, d, c.scaling, c.softcap)
        c.state.discover.append((id(c.module), info))
    return _output(probs, c.value), probs


def _dense_path(c: Call) -> tuple[Tensor, Tensor]:
    """The layer's scores at once, α-entmax (into the recording, if any), P V."""
    state, query = c.state, c.query
    b, h, n, _ = query.shape
    m = c.key.shape[2]
    allowed = _allowed(state, c.li, n, m, query.device)
    buf = state.scratch((b, h, n, m), query.device)
    scores = _scores(query, c.key, c.scaling, c.softcap, c.mask, allowed, buf)  # (B, H, n, m)
    out = state.probs[c.li] if state.record else None  # (B, H, n, m), contiguous
    probs = entmax(scores, c.alpha, out=out)
    if state.record:
        _record(state, c.li, query, c.key, c.value)
    return _output(probs, c.value), probs


def _output(probs: Tensor, value: Tensor) -> Tensor:
    """P V per text, as (B, n, H, d)."""
    ctx = _per_text(lambda p, v: torch.matmul(p.to(v.dtype), v), probs, value)  # (B, H, n, d)
    return ctx.transpose(1, 2).contiguous()


def _heads_attention(
    state: RunState,
    li: int,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    model_mask: Tensor | None,
    scaling: float,
    softcap: float | None,
    alpha: float | Tensor,
    hs: slice,
) -> Tensor:
    """The dense path's scores, masks, α-entmax (into the recording, if any) and P V for heads
    ``hs`` of one text (B == 1): the whole layer's numbers for those heads, bit for bit (a
    batched matmul computes each head on its own; entmax is row by row exact). Returns the
    (1, heads, n, d) output."""
    n, m = query.shape[2], key.shape[2]
    ok = _allowed(state, li, n, m, query.device, heads=hs)
    buf = state.scratch((1, hs.stop - hs.start, n, m), query.device)
    s = _scores(query[:, hs], key[:, hs], scaling, softcap, model_mask, ok, buf)
    a = alpha[:, hs] if isinstance(alpha, Tensor) else alpha
    # P over the scores, in cache for P V; the recording (contiguous: B == 1) gets it by the
    # kernel's streaming stores, which neither read its lines nor evict P's (entmax's copy=)
    rec = state.probs[li][:, hs] if state.record else None
    p = entmax(s, a, out=s, copy=rec)
    return torch.matmul(p.to(value.dtype), value[:, hs])


def _record(state: RunState, li: int, query: Tensor, key: Tensor, value: Tensor) -> None:
    """A recorded layer's queries, keys and values; the forward stops here when asked to."""
    state.queries[li].copy_(query)  # (B, H, n, d): after rotary, before scaling
    state.keys[li].copy_(key)  # (B, H, m, d): expanded to one per query head
    if state.values is not None:
        state.values[li].copy_(value)  # (B, H, m, d): expanded to one per query head
    if state.stop_after == li:
        raise StopForward


#: The dense recorded path of one text on the CPU computes a layer in chunks of whole heads whose
#: scores take at most this many (4 MiB of float32): each chunk's scores, entmax and P V while
#: its scores and P are still in cache, instead of the layer's (H, n, n) scores written out, read
#: back, and P read back again (12.6 MB each at n = 512 on MiniLM). The same numbers bit for bit
#: (a batched matmul computes each head on its own; entmax is row by row); 2-4 % of a run at
#: n = 512 whose P buffer is fresh memory (a server's analyses, which its cache keeps), none
#: once the buffer's pages are warm (measured with bench/bench_entmax.py).
DENSE_CHUNK_SCORES = 1 << 20


def _dense_in_chunks(c: Call) -> tuple[Tensor, Tensor]:
    """:func:`_dense_path` recording one text (B == 1) on the CPU, in chunks of whole heads
    (:data:`DENSE_CHUNK_SCORES`): per chunk the same scores, masks, α-entmax into the recording
    and P V as the whole layer's. Returns what that path returns."""
    state, li, query, key, value = c.state, c.li, c.query, c.key, c.value
    h, n, m = query.shape[1], query.shape[2], key.shape[2]
    hc = max(1, DENSE_CHUNK_SCORES // (n * m))
    args = (state, li, query, key, value, c.mask, c.scaling, c.softcap, c.alpha)
    parts = [_heads_attention(*args, slice(h0, min(h, h0 + hc))) for h0 in range(0, h, hc)]
    ctx = torch.cat(parts, 1)  # (1, H, n, d)
    _record(state, li, query, key, value)
    return ctx.transpose(1, 2).contiguous(), state.probs[li]


def _training_path(c: Call) -> tuple[Tensor, Tensor]:
    """The attention of a training forward: the same scores, masks and α-entmax as a run, but
    batched (no per-text split), out of place so that autograd sees every step, with dropout
    on P where the module is training (``dropout`` is what the model passes: its config's
    attention dropout in train mode, 0 in eval mode). The backward of entmax is the closed
    form of definitions §7 (:mod:`sparse_core.entmax.grad`), w.r.t. α too when the layer's α is a
    tensor that requires grad. Returns ((B, n, H, d) output, (B, H, n, m) P before dropout).
    """
    state, li, query, key, value = c.state, c.li, c.query, c.key, c.value
    scaling, softcap, dropout, attention_mask = c.scaling, c.softcap, c.dropout, c.mask
    n, m = query.shape[2], key.shape[2]
    # In place where autograd allows it (a matmul's and a scaling's backward need neither
    # output): one (B, H, n, m) buffer instead of one per step.
    scores = torch.matmul(query.float(), key.float().transpose(-1, -2)).mul_(scaling)  # (B,H,n,m)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    allowed = None
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            allowed = attention_mask[..., :m]
        else:
            bias = attention_mask[..., :m]  # (B, 1, n or 1, m): small
            allowed = bias > torch.finfo(bias.dtype).min
            if bool(bias.ne(0).logical_and_(allowed).any()):  # a bias beyond masking (ALiBi)
                scores = scores.add_(bias.float())
    if allowed is not None and bool(allowed.all()):
        allowed = None  # nothing masked (a batch without padding): no (B, H, n, m) pass
    if state.causal:
        cm = state.causal_mask(n, m, scores.device)
        allowed = cm if allowed is None else allowed & cm
    if state.restrict is not None:
        r = state.restrict[li]
        allowed = r if allowed is None else allowed & r
    if allowed is not None:
        scores = scores.masked_fill_(~allowed, float("-inf"))
    probs = entmax(scores, c.alpha)  # (B, H, n, m) float32
    if state.support is not None:
        with torch.no_grad():
            valid = torch.isfinite(scores).sum(dim=(0, 2, 3))  # (H,)
            state.support.append(((probs > 0).sum(dim=(0, 2, 3)), valid))
    dropped = torch.nn.functional.dropout(probs, p=dropout, training=True) if dropout else probs
    ctx = torch.matmul(dropped.to(value.dtype), value)  # (B, H, n, d)
    return ctx.transpose(1, 2).contiguous(), probs


def _split_heads(c: Call) -> tuple[Tensor, Tensor]:
    """The dense path of one text with its heads in two halves, the second on ``state.side``:
    each half's scores, masks, entmax and P V are those of the whole layer's (a batched matmul
    computes each head on its own; entmax is row by row exact). Returns what
    :func:`entmax_attention` returns."""
    state, li, query, key, value = c.state, c.li, c.query, c.key, c.value
    h = query.shape[1]

    def part(h0: int, h1: int) -> Tensor:
        with torch.inference_mode():
            return _heads_attention(
                state,
                li,
                query,
                key,
                value,
                c.mask,
                c.scaling,
                c.softcap,
                c.alpha,
                slice(h0, h1),
            )  # (1, h1 - h0, n, d)

    half = h // 2
    other = state.side.submit(part, half, h)
    ctx = torch.cat([part(0, half), other.result()], 1)  # (1, H, n, d)
    if state.record:
        _record(state, li, query, key, value)
    probs = state.probs[li] if state.record else query.new_empty(0)
    return ctx.transpose(1, 2).contiguous(), probs


def _heads_split(alpha: float | Tensor) -> bool:
    """Whether a layer's heads may run in two halves with results equal bit for bit: a scalar
    α. Every path of :mod:`sparse_core.entmax` is row by row (the dense path's whole-row steps
    freeze each row after its own last step and finish the stragglers on their own, so no
    row's bits depend on the rows that share its chunk: tests/app/test_lone.py); a per-head α
    is grouped by its values, which two halves would group differently."""
    return isinstance(alpha, float)


def _chunk_shape(h: int, n: int, m: int, budget: int) -> tuple[int, int]:
    """(heads, query rows) per chunk: whole heads while a head's n x m scores fit ``budget``,
    else one head and as many rows as fit (at least 8)."""
    if n * m <= budget:
        return max(1, min(h, budget // (n * m))), n
    return 1, max(8, budget // m)  # BLAS takes another kernel below 4 rows


def _sparse_path(c: Call) -> tuple[Tensor, Tensor]:
    """Attention of one text recorded into ``state.store`` (CSR), in chunks of heads x query
    rows of at most :data:`CHUNK_SCORES` scores (``CUDA_CHUNK_SCORES`` on a GPU): per chunk the
    scores (the same formula as the dense path), the masks, α-entmax (row by row exact: a row's
    result does not depend on the rows beside it, :mod:`sparse_core.entmax`), P V and the
    chunk's support into the store.
    Returns the (1, n, H, d) output and, as attention weights, an empty tensor."""
    state, li, query, key, value, alpha = c.state, c.li, c.query, c.key, c.value, c.alpha
    scaling, softcap = c.scaling, c.softcap
    b, h, n, d = query.shape
    m = key.shape[2]
    if b != 1:
        raise RuntimeError("a run recorded into a sparse store takes one text (B == 1)")
    budget = _sp.gpu_chunk_scores(query.device) if query.device.type == "cuda" else CHUNK_SCORES
    hc, rc = _chunk_shape(h, n, m, budget)
    q, k_, v = query[0], key[0], value[0]  # (H, n, d), (H, m, d)
    ctx = torch.empty(h, n, v.shape[-1], dtype=v.dtype, device=v.device)  # (H, n, d_v)
    store = state.store
    store.start_layer()
    for h0 in range(0, h, hc):
        h1 = min(h, h0 + hc)
        a = alpha[:, h0:h1] if isinstance(alpha, Tensor) else alpha  # (1, hc, 1, 1)
        for r0 in range(0, n, rc):
            r1 = min(n, r0 + rc)
            rs = slice(r0, r1)
            mm = None if c.mask is None else c.mask[..., rs, :]
            allowed = _allowed(state, li, n, m, q.device, heads=slice(h0, h1), rows=rs)
            buf = state.scratch((1, h1 - h0, r1 - r0, m), q.device)
            s = _scores(q[None, h0:h1, rs], k_[None, h0:h1], scaling, softcap, mm, allowed, buf)
            p = entmax(s, a)  # (1, hc, r, m)
            ctx[h0:h1, r0:r1] = torch.matmul(p[0].to(v.dtype), v[h0:h1])
            if r0 == 0 and r1 == n:
                store.add_rows(h0 * n, p[0].reshape(-1, m))
            else:
                store.add_rows(h0 * n + r0, p[0, 0])
            del s, p
    store.end_layer()
    _record(state, li, query, key, value)
    return ctx.transpose(0, 1).unsqueeze(0).contiguous(), query.new_empty(0)


def _packed_path(c: Call) -> tuple[Tensor, Tensor]:
    """Attention of several texts packed in one row (``state.segments``: (start, length)).

    Each text i sees only its own n_i queries and keys: its scores, mask, entmax and P V are
    computed on its n_i x n_i block exactly as in a single run of that text (the matmuls one
    text at a time, entmax over the texts of one length at once: a row's result does not depend
    on how many rows are stacked, only on its length). Self-attention only (no cache).
    Returns the (1, N, H, d) output and, as attention weights, an empty tensor.
    """
    state, li, query, key, value, alpha = c.state, c.li, c.query, c.key, c.value, c.alpha
    scaling, softcap, attention_mask = c.scaling, c.softcap, c.mask  # (1, 1, N, N) or None
    b, h, n, d = query.shape
    if b != 1 or key.shape[2] != n:
        raise RuntimeError("packed texts need one row of self-attention (B == 1, m == n)")
    q, k_, v = query[0], key[0], value[0]  # (H, N, d)
    ctx = torch.empty_like(q)  # (H, N, d); every position belongs to one text
    by_len: dict[int, list[int]] = {}
    for i, (_, k) in enumerate(state.segments):
        by_len.setdefault(int(k), []).append(i)
    for k, texts in by_len.items():
        starts = [state.segments[i][0] for i in texts]
        if state.restrict is not None:
            raise RuntimeError("restriction masks are not supported for packed texts")
        qs = [q[None, :, s : s + k] for s in starts]  # (1, H, k, d) views, as in single runs
        ks = [k_[None, :, s : s + k] for s in starts]
        mm = None  # the model's own mask, each text's diagonal block
        if attention_mask is not None:
            mm = torch.stack([attention_mask[0, :, s : s + k, s : s + k] for s in starts])
        allowed = state.causal_mask(k, k, q.device) if state.causal else None  # (k, k)
        buf = state.scratch((len(starts), h, k, k), q.device)
        scores = _scores(qs, ks, scaling, softcap, mm, allowed, buf)  # (G, H, k, k)
        probs = entmax(scores, alpha)  # (G, H, k, k)
        for j, (i, s) in enumerate(zip(texts, starts, strict=True)):
            if state.record:
                state.segment_probs[i][li].copy_(probs[j])
            p = probs[j : j + 1].to(v.dtype)
            ctx[:, s : s + k] = torch.matmul(p, v[None, :, s : s + k])[0]
    if state.record:
        state.queries[li].copy_(query)  # (1, H, N, d)
        state.keys[li].copy_(key)
        if state.values is not None:
            state.values[li].copy_(value)
    return ctx.transpose(0, 1).unsqueeze(0).contiguous(), query.new_empty(0)


def _scores(
    query: Tensor | list[Tensor],
    key: Tensor | list[Tensor],
    scaling: float,
    softcap: float | None,
    model_mask: Tensor | None,
    allowed: Tensor | None,
    out: Tensor | None = None,
) -> Tensor:
    """The masked scores of definitions §1 (module docstring), float32 (B, H, n, m), into ``out``.

    ``S = scaling · Q Kᵀ`` in float32 even for bf16 / fp16 weights, one text (batch row) at a
    time so that a text's numbers do not depend on the batch it runs in (bit for bit: the
    kernels' blocking follows the batch size); ``c · tanh(S / c)`` where the model caps its
    logits; −∞ where ``model_mask`` (the model's own: boolean "may attend", or additive, whose
    minimum means masked; broadcastable, e.g. (B, 1, n, m)) or ``allowed`` (causal and
    restriction masks, boolean) forbids. ``query`` (B, H, n, d) and ``key`` (B, H, m, d), or
    lists of B (1, H, ·, d) views (packed texts). ``out``: a float32 buffer of the result's
    shape (one run reuses one for every layer: a fresh multi-megabyte tensor per layer costs
    its page faults; the result is the same bit for bit)."""
    qs = [query[i : i + 1] for i in range(len(query))] if isinstance(query, Tensor) else query
    ks = [key[i : i + 1] for i in range(len(key))] if isinstance(key, Tensor) else key
    _, h, n, _ = qs[0].shape
    if out is None:
        out = torch.empty(len(qs), h, n, ks[0].shape[2], dtype=torch.float32, device=qs[0].device)
    if out.device.type == "cuda" and all(
        q.shape[1] == k.shape[1] for q, k in zip(qs, ks, strict=True)
    ):
        # on a GPU the scale goes into the GEMM's epilogue (one pass over the scores less; a
        # float32 accumulator times the scale, rounded once, as the separate product does)
        for i, (q, k) in enumerate(zip(qs, ks, strict=True)):
            out[i].baddbmm_(q[0].float(), k[0].float().mT, beta=0.0, alpha=scaling)
        s = out
    else:
        for i, (q, k) in enumerate(zip(qs, ks, strict=True)):
            torch.matmul(q.float(), k.float().mT, out=out[i : i + 1])
        s = out.mul_(scaling)
    if softcap is not None:
        s.div_(softcap).tanh_().mul_(softcap)
    if model_mask is not None:
        if model_mask.dtype == torch.bool:
            s.masked_fill_(~model_mask, -math.inf)
        else:
            s.add_(model_mask.float())
            s.masked_fill_(model_mask <= torch.finfo(model_mask.dtype).min, -math.inf)
    if allowed is not None:
        s.masked_fill_(~allowed, -math.inf)
    return s


def _allowed(
    state: RunState,
    li: int,
    n: int,
    m: int,
    device: torch.device,
    heads: slice = slice(None),
    rows: slice = slice(None),
) -> Tensor | None:
    """Where a run's own masks allow (i, j) (bool; None: everywhere): the causal mask (n, m)
    and the restriction mask of layer ``li`` (B, H, n, m), cut to ``heads`` and query ``rows``."""
    allowed = state.causal_mask(n, m, device)[rows] if state.causal else None
    if state.restrict is not None:
        r = state.restrict[li][:, heads, rows]
        allowed = r if allowed is None else r & allowed
    return allowed


def _per_text(op, x: Tensor, y: Tensor) -> Tensor:
    """``op(x, y)`` of batched tensors, computed per text (batch row) when B > 1."""
    if x.shape[0] == 1:
        return op(x, y)
    return torch.cat([op(x[i : i + 1], y[i : i + 1]) for i in range(x.shape[0])])


def boolean_mask(*args, **kwargs) -> Tensor | None:
    """transformers' mask builder for our implementation: boolean "may attend" masks.

    Causal masks are always materialised (``allow_is_causal_skip=False``: we have no kernel
    flag to fall back on); a bidirectional mask without padding may be None.
    """
    from transformers.masking_utils import sdpa_mask

    kwargs["allow_is_causal_skip"] = False
    return sdpa_mask(*args, **kwargs)


def register() -> None:
    """Register :func:`entmax_attention` and :func:`boolean_mask` with transformers (once)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(IMPLEMENTATION, entmax_attention)
    AttentionMaskInterface.register(IMPLEMENTATION, boolean_mask)
    _REGISTERED = True
    log.debug("registered %r with transformers' attention and mask interfaces", IMPLEMENTATION)
