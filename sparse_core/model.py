"""The entmax transformer: any supported Hugging Face model with α-entmax in every head.

definitions §1. The model is transformers' own model class (``AutoModel``: BertModel, GPT2Model,
LlamaModel …) loaded with ``attn_implementation`` set to our entmax function
(:mod:`sparse_core.attention`), so every layer's attention is ``P = α-entmax(S)`` with the
model's own scores ``S`` (its scaling rule; queries and keys after rotary embeddings), computed
in float32, and later layers see what entmax attention produced. α = 1 is softmax and reproduces
transformers' eager forward of the same checkpoint; 1.5 is the default (a model trained with
entmax, SparseModernBERT, defaults to its own α: :mod:`sparse_core.modernbert`), 2 sparsemax;
α may be given per head or per (layer, head). Decoders are always causal; encoders are bidirectional
unless ``causal=True``. The ground-truth graph of a head is ``G = {(i, j) : P_ij > 0}``.

Where models come from and which work: :mod:`sparse_core.sources` (and docs/models.md);
tokens as a person reads them: :mod:`sparse_core.tokens`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor

import torch
from torch import Tensor

from . import attention as A
from . import modernbert
from .errors import (
    EmptyTextError,
    ModelLoadError,
    SparsescopeError,
    TextTooLongError,
    UnknownTokensError,
)
from .outputs import AlphaLike, ModelConfig, RunOutput, normalize_alpha
from .runtime import KeptBuffers, Runtime
from .sources import (
    ARCHITECTURES,
    DEFAULT_MODEL_ID,
    SUPPORTED_MODEL_TYPES,
    Architecture,
    check_fits,
    default_model_path,
    resolve,
)
from .sparse_probs import SparseProbs, dense_fits
from .tokens import Encoding, TokenReader, content_span, load_tokenizer, window_encoding

log = logging.getLogger(__name__)

__all__ = [
    "ARCHITECTURES",
    "DEFAULT_MODEL_ID",
    "SUPPORTED_MODEL_TYPES",
    "Encoding",
    "ModelConfig",
    "RunOutput",
    "SparseModel",
    "default_model_path",
    "load_model",
    "normalize_alpha",
]

DEFAULT_MAX_TOKENS = 512
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class SparseModel:
    """A transformers model run as an entmax transformer, plus its tokenizer.

    Use :func:`load_model` (or :func:`sparse_core.testing.tiny_model`) to make one. ``net`` is
    the transformers model (``AutoModel``), ``tokenizer`` a ``tokenizers.Tokenizer``.
    """

    def __init__(
        self,
        net,
        tokenizer,
        model_id: str,
        device: torch.device,
        arch: Architecture,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        default_alpha: AlphaLike | None = None,
    ) -> None:
        self.net = net.eval()
        self.tokenizer = tokenizer
        self.tokens = TokenReader(tokenizer)
        self.model_id = model_id
        self.arch = arch
        self._device = device
        #: runs whose dense P would take more bytes are recorded sparse (CSR, chunked entmax;
        #: :mod:`sparse_core.sparse_probs`); None: ``sparse_probs.DENSE_MAX_BYTES``
        self.dense_max_bytes: int | None = None
        #: a sparse (CSR) P recorded on a GPU stays there (``SparseProbs.host_reads``): views
        #: copy what they read; False copies the whole store to the host after the run
        self.probs_on_device = True
        self._layer_of, layers = self._discover()
        #: how a run uses the machine when it names no runtime: this model's kept P buffers
        #: (huge pages, reused once idle), on the calling thread (:mod:`sparse_core.runtime`)
        self.runtime = Runtime(buffers=KeptBuffers())
        self.config = _model_config(net.config, arch, layers, max_tokens)
        #: the model's own positions (the most ``max_tokens`` can raise the limit to)
        #: (None when the config does not say)
        self.model_positions: int | None = (
            _position_limit(net.config, arch, 1 << 30)
            if getattr(net.config, "max_position_embeddings", None)
            else None
        )
        first = layers[0]
        self._scaling = torch.tensor([li.scaling for li in layers], dtype=torch.float32)
        self._softcap = first.softcap
        #: the α of a run that names none: the model's own (what the checkpoint was trained
        #: with: :func:`own_alpha`; a float, or an (L, H) float32 table), else
        #: :data:`~sparse_core.attention.DEFAULT_ALPHA`. The one place a model's α lives.
        self.default_alpha = normalize_alpha(
            A.DEFAULT_ALPHA if default_alpha is None else default_alpha,
            self.config.num_layers,
            self.config.num_heads,
        )
        #: whether :attr:`default_alpha` is the model's own (trained with entmax) rather than
        #: the usual 1.5 of a softmax-trained model with entmax swapped in
        self.alpha_trained = default_alpha is not None

    # ------------------------------------------------------------------ properties
    def alpha_table(self) -> Tensor:
        """:attr:`default_alpha` as an (L, H) float32 table (one value per layer and head)."""
        a = self.default_alpha
        if isinstance(a, Tensor):
            return a.float().clone()
        return torch.full((self.config.num_layers, self.config.num_heads), float(a))

    @property
    def device(self) -> str:
        return self._device.type

    @property
    def max_positions(self) -> int:
        return self.config.max_positions

    # ------------------------------------------------------------------ tokens
    def encode(self, text: str, *, truncate: bool = False, start: int = 0) -> Encoding:
        """Tokenise ``text`` with the model's special tokens; check it is non-empty and fits.

        A text over the model's positions is an error unless ``truncate``: then the window of
        the text's tokens from ``start`` (counted without specials; 0 = the first ones) is kept.
        """
        if not isinstance(text, str) or not text.strip():
            raise EmptyTextError()
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise SparsescopeError(
                f"start must be a token index >= 0, got {start!r}", field="start"
            )
        raw = self.tokenizer.encode(text)
        enc = self.tokens.read(raw, text)
        if all(enc.special):  # nothing but the tokenizer's markers and unknown tokens
            unk = getattr(self.tokenizer.model, "unk_token", None)
            unk_id = self.tokenizer.token_to_id(unk) if isinstance(unk, str) else None
            if unk_id is not None and unk_id in raw.ids:
                raise UnknownTokensError(unk)
            raise EmptyTextError()  # only characters the tokenizer drops (zero-width, control)
        limit = self.max_positions
        if len(enc.ids) > limit:
            if not truncate:
                raise TextTooLongError(len(enc.ids), limit, self.model_positions)
            if limit < 1:
                raise SparsescopeError(f"a token limit of {limit} leaves no room for the text")
            return window_encoding(enc, limit, start)
        head, tail = content_span(enc)
        enc.total_tokens = len(enc.ids) - head - tail
        return enc

    # ------------------------------------------------------------------ runs
    @torch.inference_mode()
    def run(
        self,
        text: str,
        alpha: AlphaLike | None = None,
        causal: bool = False,
        truncate: bool = False,
        *,
        start: int = 0,
        hidden: bool = True,
        side: Executor | None = None,
        runtime: Runtime | None = None,
    ) -> RunOutput:
        """Analyse one text: tokens, per-head queries/keys, entmax probabilities and graph.

        ``alpha``: one value, one per head or an (L, H) table; None: the model's own,
        :attr:`default_alpha` (what the checkpoint was trained with, else 1.5). Decoders are
        always causal (``causal`` is then ignored and the output says True). A text over the
        model's positions with ``truncate``: the window from token ``start``.
        ``hidden=False``: the forward stops once the last layer's attention is recorded (its
        feed-forward part is skipped) and ``hidden`` is an empty tensor; the rest of the
        output is the same bit for bit (the Pareto sweeps need no hidden states).
        ``runtime``: how the run uses the machine (:class:`~sparse_core.runtime.Runtime`;
        None: :attr:`runtime`); the output is the same bit for bit whichever it is.
        ``side``: a shorthand for that runtime with this side worker, a one-worker executor
        that takes half of every linear layer's rows and half of every layer's heads (a lone
        text on two cores, torch on one thread in each). Not used for long texts recorded
        sparse (their chunks run in turn).
        """
        a = self._alpha(alpha)
        enc = self.encode(text, truncate=truncate, start=start)
        causal = bool(causal) or self.config.is_decoder
        ids = torch.tensor([enc.ids], device=self._device)  # (1, n)
        rt = self.runtime if runtime is None else runtime
        if side is not None:
            rt = rt.beside(side)
        res = self._forward(ids, None, a, causal, None, record=True, hidden=hidden, runtime=rt)
        return self._output(text, enc, res, 0, a, causal)

    @torch.inference_mode()
    def run_batch(
        self,
        texts: Sequence[str],
        alpha: AlphaLike | None = None,
        causal: bool = False,
        truncate: bool = True,
    ) -> list[RunOutput]:
        """Analyse several texts in one forward pass; each result is exactly (bit for bit) a
        single run of its text when torch runs on one thread (``alpha`` as in :meth:`run`).

        The texts are packed one after the other in one row, each with its own positions
        (no padding): the linear layers work row by row (a row's result does not depend on how
        many rows are computed with it), and each text's attention is computed on its own
        tokens only (:func:`sparse_core.attention.entmax_attention` with ``RunState.segments``).
        Texts so short that BLAS takes another kernel for them alone (see
        :func:`rows_kernel_floor`) are run alone. With several torch threads the kernels split
        rows differently: results then equal single runs up to float rounding (about 1e-6).
        """
        a = self._alpha(alpha)
        encs = [self.encode(t, truncate=truncate) for t in texts]
        if not encs:
            return []
        causal = bool(causal) or self.config.is_decoder
        floor = rows_kernel_floor(self.config.hidden_size, self.net.dtype)
        L, H = self.config.num_layers, self.config.num_heads
        together = [  # long texts run alone: recorded sparse, never a dense packed P
            b
            for b, e in enumerate(encs)
            if len(e.ids) >= floor and dense_fits(L, H, len(e.ids), self.dense_max_bytes)
        ]
        if len(together) < 2:
            together = []
        outs: list[RunOutput | None] = [None] * len(encs)
        for b, (t, e) in enumerate(zip(texts, encs, strict=True)):
            if b not in together:
                ids = torch.tensor([e.ids], device=self._device)  # (1, n)
                res = self._forward(ids, None, a, causal, None, record=True)
                outs[b] = self._output(t, e, res, 0, a, causal)
        if together:
            packed = self._packed([encs[b] for b in together], a, causal)
            for b, own in zip(together, packed, strict=True):
                outs[b] = self._output_of(texts[b], encs[b], own, a, causal)
        return outs  # type: ignore[return-value]

    def _packed(self, encs: list[Encoding], alpha: float | Tensor, causal: bool) -> list[dict]:
        """One forward of the texts packed in one row; per text its recordings (L, H, n, ·)
        and hidden states (n, D)."""
        c, dev = self.config, self._device
        lengths = [len(e.ids) for e in encs]
        starts = [sum(lengths[:i]) for i in range(len(lengths))]
        total = sum(lengths)
        first = int(c.pad_token_id) + 1 if self.arch.position_offset else 0
        ids = torch.tensor([[t for e in encs for t in e.ids]], device=dev)  # (1, N)
        positions = torch.cat([torch.arange(first, first + k) for k in lengths])[None].to(dev)
        state = A.RunState(
            alphas=self._layer_alphas(alpha),
            causal=causal and not c.is_decoder,
            layer_of=self._layer_of,
            record=True,
            segments=list(zip(starts, lengths, strict=True)),
        )
        f32 = torch.float32
        shape = (c.num_layers, 1, c.num_heads, total, c.head_dim)
        state.queries = torch.empty(shape, dtype=f32, device=dev)
        state.keys = torch.empty(shape, dtype=f32, device=dev)
        state.values = torch.empty(shape, dtype=f32, device=dev)
        state.segment_probs = [
            torch.empty(c.num_layers, c.num_heads, k, k, dtype=f32, device=dev) for k in lengths
        ]
        kwargs: dict = {"use_cache": False} if c.is_decoder else {}
        if self._takes_token_types:
            kwargs["token_type_ids"] = torch.zeros_like(ids)
        with A.running(state):
            hidden = self.net(input_ids=ids, position_ids=positions, **kwargs).last_hidden_state
        return [
            {
                "queries": state.queries[:, 0, :, s : s + k],
                "keys": state.keys[:, 0, :, s : s + k],
                "values": state.values[:, 0, :, s : s + k],
                "probs": p,
                "hidden": hidden[0, s : s + k],
            }
            for s, k, p in zip(starts, lengths, state.segment_probs, strict=True)
        ]

    @property
    def _takes_token_types(self) -> bool:
        """Whether the model adds token-type embeddings (BERT's segment A, zeros, by default;
        its default buffer is only as long as its positions, so packed rows pass zeros).
        GPT-2 takes token_type_ids too but adds them only when given: not passed."""
        import inspect

        return (
            not self.arch.decoder
            and "token_type_ids" in inspect.signature(self.net.forward).parameters
        )

    @torch.inference_mode()
    def forward_masked(self, out: RunOutput, masks: Tensor) -> Tensor:
        """Re-run ``out``'s text with each head's attention restricted to ``masks`` (L, H, n, n).

        Returns the final hidden states (n, d_model). With masks ⊇ out.graph the result equals
        ``out.hidden`` (sparse-consistency, definitions §1) up to float rounding.
        """
        L, H, n = self.config.num_layers, self.config.num_heads, out.n
        if not isinstance(masks, Tensor) or tuple(masks.shape) != (L, H, n, n):
            shape = tuple(masks.shape) if isinstance(masks, Tensor) else type(masks).__name__
            raise SparsescopeError(f"masks must have shape ({L}, {H}, {n}, {n}), got {shape}")
        ids = torch.tensor([out.input_ids], device=self._device)
        restrict = masks.to(self._device, torch.bool)[:, None]  # (L, 1, H, n, n)
        res = self._forward(ids, None, out.alpha, out.causal, restrict, record=False)
        return res["hidden"][0].float().cpu()

    def _forward(
        self,
        ids: Tensor,
        keep: Tensor | None,
        alpha: float | Tensor,
        causal: bool,
        restrict: Tensor | None,
        *,
        record: bool,
        hidden: bool = True,
        runtime: Runtime | None = None,
    ) -> dict[str, Tensor]:
        """One forward of ids (B, n); ``keep`` (B, n) marks real tokens (None: all real).
        ``hidden=False`` (with ``record``): stop after the last layer's recording; the result's
        hidden states are then an empty (B, 0, D) tensor. ``runtime``: None is
        :attr:`runtime`."""
        c = self.config
        rt = self.runtime if runtime is None else runtime
        b, n = ids.shape
        state = A.RunState(
            alphas=self._layer_alphas(alpha),
            causal=causal and not c.is_decoder,  # a decoder's own mask is causal already
            restrict=restrict,
            layer_of=self._layer_of,
            record=record,
            side=rt.side,
        )
        if record:
            f32, dev = torch.float32, self._device
            shape = (c.num_layers, b, c.num_heads, n)
            state.queries = torch.empty(*shape, c.head_dim, dtype=f32, device=dev)
            state.keys = torch.empty(*shape, c.head_dim, dtype=f32, device=dev)
            state.values = torch.empty(*shape, c.head_dim, dtype=f32, device=dev)
            if b == 1 and not dense_fits(c.num_layers, c.num_heads, n, self.dense_max_bytes):
                state.store = SparseProbs(c.num_layers, c.num_heads, n)
            else:
                state.probs = rt.probs_buffer((*shape, n), dev)
            if not hidden:
                state.stop_after = c.num_layers - 1
        kwargs = {"use_cache": False} if c.is_decoder else {}
        with A.running(state), rt.forward():
            try:
                last = self.net(input_ids=ids, attention_mask=keep, **kwargs).last_hidden_state
            except A.StopForward:
                last = torch.empty(b, 0, c.hidden_size, device=self._device)
        res = {"hidden": last}  # (B, n, D)
        if record:
            res.update(
                queries=state.queries, keys=state.keys, values=state.values, probs=state.probs
            )
            res["store"] = state.store
        return res

    def _alpha(self, alpha: AlphaLike | None) -> float | Tensor:
        """α checked; None is the model's own (:attr:`default_alpha`)."""
        if alpha is None:
            return self.default_alpha
        return normalize_alpha(alpha, self.config.num_layers, self.config.num_heads)

    def _layer_alphas(self, alpha: float | Tensor) -> list[float | Tensor]:
        """Per layer: a float, or a (1, H, 1, 1) tensor on the device when heads differ."""
        L = self.config.num_layers
        if not isinstance(alpha, Tensor):
            return [float(alpha)] * L
        out: list[float | Tensor] = []
        for row in alpha.float().cpu():
            if bool((row == row[0]).all()):
                out.append(float(row[0]))
            else:
                out.append(row.view(1, -1, 1, 1).to(self._device))
        return out

    def _output(
        self, text: str, enc: Encoding, res: dict, b: int, a: float | Tensor, causal: bool
    ) -> RunOutput:
        m = len(enc.ids)
        own = {
            "queries": res["queries"][:, b, :, :m],
            "keys": res["keys"][:, b, :, :m],
            "values": res["values"][:, b, :, :m],
            "hidden": res["hidden"][b, :m],
        }
        if res.get("store") is not None:
            own["store"] = res["store"]
        else:
            own["probs"] = res["probs"][:, b, :, :m, :m]
        return self._output_of(text, enc, own, a, causal)

    def _output_of(
        self, text: str, enc: Encoding, own: dict, a: float | Tensor, causal: bool
    ) -> RunOutput:
        """The RunOutput of one text from its recordings (L, H, n, ·) and hidden states."""
        rest = (own["queries"], own["keys"], own["values"], own["hidden"].float())
        if own.get("store") is not None:  # sparse: P stays on a GPU, or its CSR goes to the host
            queries, keys, values, hidden = _to_host(*rest)
            attn = own["store"]
            if attn.device.type == "cpu" or not self.probs_on_device:
                attn = attn.to("cpu")
            else:
                attn.host_reads = True
        else:
            probs, queries, keys, values, hidden = _to_host(own["probs"], *rest)
            attn = SparseProbs.from_dense(probs)
        return RunOutput(
            text=text,
            tokens=enc.tokens,
            offsets=enc.offsets,
            special=enc.special,
            input_ids=enc.ids,
            queries=queries,
            keys=keys,
            values=values,
            attn=attn,
            hidden=hidden,
            alpha=a,
            causal=causal,
            truncated=enc.truncated,
            total_tokens=enc.total_tokens,
            window_start=enc.window_start,
            display=enc.display,
            continuation=enc.continuation,
            model_id=self.model_id,
            scaling=self._scaling.clone(),
            softcap=self._softcap,
        )

    # ------------------------------------------------------------------ discovery
    @torch.inference_mode()
    def _discover(self) -> tuple[dict[int, int], list[A.LayerInfo]]:
        """Run 4 tokens once to learn each attention module's layer index, heads and scaling."""
        A.register()
        state = A.RunState(discover=[])
        ids = torch.zeros(1, 4, dtype=torch.long, device=self._device)
        kwargs = {"use_cache": False} if self.arch.decoder else {}
        with A.running(state):
            self.net(input_ids=ids, **kwargs)
        found = state.discover
        if not found:
            raise ModelLoadError(
                f"{self.model_id}: the model's attention does not go through transformers' "
                "AttentionInterface, so sparsescope cannot replace its softmax"
            )
        if len({mid for mid, _ in found}) < len(found):
            raise ModelLoadError(
                f"{self.model_id}: one attention module serves several layers (shared weights, "
                "as in ALBERT); sparsescope tells layers apart by their module"
            )
        shapes = {(i.heads, i.kv_heads, i.head_dim) for _, i in found}
        if len(shapes) > 1:
            raise ModelLoadError(
                f"{self.model_id}: layers have different head shapes {sorted(shapes)}; "
                "sparsescope needs the same heads and head size in every layer"
            )
        return {mid: li for li, (mid, _) in enumerate(found)}, [i for _, i in found]


_KERNEL_FLOORS: dict[tuple, int] = {}


def rows_kernel_floor(width: int, dtype: torch.dtype = torch.float32) -> int:
    """The fewest rows from which a linear layer's row results do not depend on the row count.

    BLAS picks its kernel by the matrix shape: on MKL with one thread, 1 to 3 rows go through
    another kernel than 4 or more, whose results differ in the last bits. A text of fewer
    tokens than this floor is therefore run alone (its single run is the reference). Probed
    once per (torch threads, width, dtype) with random matrices of the model's width: the
    largest k <= 32 whose k-row product differs from the first k rows of a 96-row one, plus 1.
    """
    key = (torch.get_num_threads(), int(width), dtype)
    floor = _KERNEL_FLOORS.get(key)
    if floor is None:
        g = torch.Generator().manual_seed(0)
        w = torch.randn(width, width, generator=g).to(dtype)
        x = torch.randn(96, width, generator=g).to(dtype)
        full = torch.nn.functional.linear(x, w)
        floor = 1
        for k in range(1, 33):
            if not torch.equal(torch.nn.functional.linear(x[:k], w), full[:k]):
                floor = k + 1
        _KERNEL_FLOORS[key] = floor
        log.debug("linear rows are independent of the row count from %d rows (%s)", floor, key)
    return floor


def _position_limit(hf, arch: Architecture, max_tokens: int) -> int:
    """The token limit: the model's own positions, capped by ``max_tokens``."""
    own = int(getattr(hf, "max_position_embeddings", 0) or 0) or max_tokens
    if arch.position_offset:  # positions start after the padding index (RoBERTa)
        own -= int(getattr(hf, "pad_token_id", None) or 0) + 1
    return max(1, min(own, max_tokens))


def own_alpha(src, hf_cfg, layers: int, heads: int) -> AlphaLike | None:
    """The α a checkpoint was trained with, for :attr:`SparseModel.default_alpha` (None: it
    records none, the usual 1.5). First found: ``entmax_alpha`` in its config.json (a number,
    or a per layer and head table, written by ``sparsescope adapt``; definitions §7), else a
    SparseModernBERT's trained α (:func:`sparse_core.modernbert.default_alpha`). A malformed
    ``entmax_alpha`` is a :class:`ModelLoadError`."""
    raw = getattr(hf_cfg, "entmax_alpha", None)
    if raw is None:
        return modernbert.default_alpha(src.config, src.model_id, hf_cfg, heads)
    try:
        return normalize_alpha(raw, layers, heads)
    except SparsescopeError as exc:
        raise ModelLoadError(f"the model's config.json has a bad entmax_alpha: {exc}") from None


def _model_config(hf, arch: Architecture, layers: list[A.LayerInfo], max_tokens: int):
    pad = getattr(hf, "pad_token_id", None)
    first = layers[0]
    return ModelConfig(
        model_type=arch.model_type,
        num_layers=len(layers),
        num_heads=first.heads,
        num_kv_heads=first.kv_heads,
        head_dim=first.head_dim,
        hidden_size=int(hf.hidden_size),
        max_positions=_position_limit(hf, arch, max_tokens),
        is_decoder=arch.decoder or bool(getattr(hf, "is_decoder", False)),
        vocab_size=int(hf.vocab_size),
        pad_token_id=int(pad) if isinstance(pad, int) else 0,
        hf=hf,
    )


#: Copies back from a GPU go through page-locked memory up to this many bytes per run.
PINNED_MAX_BYTES = 512 << 20


def _to_host(*tensors: Tensor) -> list[Tensor]:
    """Contiguous CPU copies of one run's ``tensors`` (all on one device); CPU tensors are
    returned as they are when contiguous.

    From a GPU the copies are queued asynchronously into page-locked buffers (PyTorch's caching
    host allocator reuses them run after run) and waited for once: a pageable copy moves a few
    GB/s and blocks per tensor (measured on an H100, docs/benchmarks.md "GPU"). Above
    :data:`PINNED_MAX_BYTES` in all (a long text), plain copies: the host allocator rounds a
    block up to a power of two and keeps it.
    """
    dev = tensors[0].device
    size = sum(t.numel() * t.element_size() for t in tensors)
    if dev.type != "cuda" or size > PINNED_MAX_BYTES:
        return [t.contiguous().cpu() for t in tensors]
    out = []
    for t in tensors:
        dst = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        dst.copy_(t, non_blocking=True)
        out.append(dst)
    torch.cuda.current_stream(dev).synchronize()
    return out


def _resolve_device(device: str | torch.device) -> torch.device:
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(device, str) or (device != "cpu" and not re.match(r"^cuda(:\d+)?$", device)):
        raise SparsescopeError(
            f"device must be 'auto', 'cpu' or 'cuda', got {device!r}", field="device"
        )
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SparsescopeError(
            "device 'cuda' was asked for but no CUDA GPU is available", field="device"
        )
    return torch.device(device)


def _resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype) and dtype in _DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPES:
        return _DTYPES[dtype]
    raise SparsescopeError(
        f"dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}", field="dtype"
    )


def load_model(
    path_or_name: str | os.PathLike | None = None,
    device: str = "auto",
    *,
    dtype: str | torch.dtype | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    memory_limit: int | None = None,
) -> SparseModel:
    """Load a model as an entmax transformer. Nothing is downloaded.

    ``path_or_name``: None (the shipped default, ``DEFAULT_MODEL_ID``:
    all-MiniLM-L6-v2 adapted with 1.5-entmax), ``"sentence-transformers/all-MiniLM-L6-v2"``
    (the softmax-trained original), a shipped adapted id (``sparsescope/...``), a local model
    directory in the Hugging Face layout, or a model name in the local Hugging Face cache. A
    model trained with entmax runs at its own α by default (:attr:`SparseModel.default_alpha`,
    :func:`own_alpha`). Architectures: :data:`SUPPORTED_MODEL_TYPES` (docs/models.md).
    ``device``: "auto" (CUDA when available), "cpu" or "cuda". ``dtype``: the weights' dtype,
    "float32" (default), "bfloat16" or "float16" (attention is computed in float32 always).
    ``max_tokens``: the token limit, capped by the model's own positions.
    ``memory_limit``: bytes this model may use (default: what the device has free); a model
    whose weights and one run of ``max_tokens`` tokens do not fit is refused before loading.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 2:
        raise SparsescopeError(f"max_tokens must be an integer >= 2, got {max_tokens!r}")
    src = resolve(path_or_name)
    dev = _resolve_device(device)
    torch_dtype = _resolve_dtype(dtype)

    from transformers import AutoConfig, AutoModel

    A.register()
    try:
        hf_cfg = AutoConfig.from_pretrained(str(src.path), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"{src.path}/config.json could not be read: {exc}") from None
    L = int(hf_cfg.num_hidden_layers)
    H = int(hf_cfg.num_attention_heads)
    d = int(getattr(hf_cfg, "head_dim", 0) or hf_cfg.hidden_size // H)
    check_fits(
        src,
        dtype_bytes=torch.finfo(torch_dtype).bits // 8,
        dtype_name=str(torch_dtype).removeprefix("torch."),
        device=str(dev),
        layers=L,
        heads=H,
        head_dim=d,
        tokens=_position_limit(hf_cfg, src.arch, max_tokens),
        memory_limit=memory_limit,
    )
    tok = load_tokenizer(src.path)
    if tok.get_vocab_size(with_added_tokens=True) > int(hf_cfg.vocab_size):
        raise ModelLoadError(
            f"{src.path}: the tokenizer has {tok.get_vocab_size(with_added_tokens=True)} tokens "
            f"but the model only {hf_cfg.vocab_size} embeddings; they do not belong together"
        )
    own = own_alpha(src, hf_cfg, L, H)  # a bad one is refused before any weight is read
    net = _from_pretrained(AutoModel, src, hf_cfg, torch_dtype).to(dev)
    model = SparseModel(
        net, tok, src.model_id, dev, src.arch, max_tokens=max_tokens, default_alpha=own
    )
    c = model.config
    log.info(
        "loaded %s (%s, %d layers x %d heads, %d kv heads) on %s in %s",
        src.model_id, src.arch.label, c.num_layers, c.num_heads, c.num_kv_heads, dev, torch_dtype,
    )  # fmt: skip
    return model


@contextlib.contextmanager
def quiet_progress() -> Iterator[None]:
    """No transformers progress bars inside the block (library code never prints)."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def quiet_load_report() -> Iterator[None]:
    """No transformers load report inside the block (weights a head-less model does not use,
    e.g. an adapted model's LM head, are expected; what is missing is checked here)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _from_pretrained(auto, src, hf_cfg, torch_dtype):
    """transformers' from_pretrained with our attention, local files only."""
    try:
        with quiet_progress(), quiet_load_report():
            net, info = auto.from_pretrained(
                str(src.path),
                config=hf_cfg,
                attn_implementation=A.IMPLEMENTATION,
                dtype=torch_dtype,
                local_files_only=True,
                output_loading_info=True,
            )
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelLoadError(f"{src.path}: the weights could not be loaded: {exc}") from None
    missing = [k for k in info.get("missing_keys", []) if not k.startswith("pooler.")]
    if missing:
        raise ModelLoadError(
            f"{src.path}: the checkpoint lacks {len(missing)} weights the model needs, "
            f"e.g. {sorted(missing)[0]}"
        )
    return net
