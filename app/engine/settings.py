"""Settings of the web app, read from ``SPARSESCOPE_*`` environment variables.

``get_settings()`` is the one place the app reads the environment; tests build a
:class:`Settings` directly (or override ``get_settings`` as a FastAPI dependency).
``sparsescope serve`` flags override the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sparse_core.errors import SparsescopeError

ENV_PREFIX = "SPARSESCOPE_"
#: Interfaces that only this machine reaches, and the names it reaches them by.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]", "testserver")
#: Tokens per text (the served models' limit, capped by their positions) and per packed corpus
#: input of the commands (app/commands/common.py), when not set.
DEFAULT_MAX_TOKENS = 512


def _default_data_dir() -> Path:
    try:
        from platformdirs import user_data_dir
    except ImportError:  # pragma: no cover - platformdirs is a dependency
        return Path.home() / ".local" / "share" / "sparsescope"
    return Path(user_data_dir("sparsescope", appauthor=False))


class Settings(BaseModel):
    """Everything the server needs to start. Field ``x`` is read from ``SPARSESCOPE_X``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = Field("127.0.0.1", description="interface to bind; 127.0.0.1 = this machine only")
    port: int = Field(8000, ge=1, le=65535, description="TCP port")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="where the model runs")
    models: tuple[str, ...] = Field(
        (),
        description="models to serve, the first the default: local Hugging Face directories or "
        "names in the local Hugging Face cache (SPARSESCOPE_MODELS: comma-separated); empty: "
        "model_path, else the shipped default model (sparsescope serve then adds the original "
        "all-MiniLM-L6-v2 beside it)",
    )
    model_path: str | None = Field(None, description="one model to serve; None = default")
    max_tokens: int = Field(
        DEFAULT_MAX_TOKENS, ge=8, le=1 << 16, description="token limit (capped by the model)"
    )
    artefact_path: str | None = Field(None, description="a Sparsefinder artefact; None = shipped")
    artefact_dir: Path | None = Field(
        None,
        description="where Sparsefinder artefacts of any model are found (matched by model id "
        "and alpha); None = <data_dir>/artefacts",
    )
    data_dir: Path = Field(default_factory=_default_data_dir, description="user data folder")
    results_dir: Path | None = Field(
        None,
        description="a `sparsescope pareto --out` folder shown read-only in the page's corpus "
        "results panel (pareto.json, pareto-heads.npz); None = none",
    )
    cache_entries: int = Field(32, ge=1, description="analyses kept in the LRU cache")
    cache_bytes: int = Field(1 << 30, ge=1 << 20, description="memory bound of that cache")
    max_body_bytes: int = Field(1 << 20, ge=1024, description="larger request bodies get 413")
    warmup: bool = Field(True, description="run one short text at start-up so requests are warm")
    # -- a lecture hall at once (docs/api.md "Limits"; app/engine/limits.py, batching.py) ----
    batch_window_ms: float = Field(
        5.0, ge=0, le=1000, description="an idle model worker gathers analyses this long"
    )
    batch_window_max_ms: float = Field(
        40.0,
        ge=0,
        le=1000,
        description="while analyses keep arriving (each within the window of the last), an idle "
        "worker goes on gathering up to this long",
    )
    batch_tokens: int = Field(4096, ge=1, description="at most this many tokens in one forward")
    batch_split: int = Field(
        2,
        ge=1,
        le=64,
        description="a large batched forward runs as this many parts side by side; 1: never",
    )
    queue_tokens: int = Field(
        16384, ge=1, description="tokens of analyses that may wait for the model; then 503"
    )
    queue_jobs: int = Field(512, ge=1, description="analyses that may wait for the model; then 503")
    compute_slots: int = Field(
        2,
        ge=1,
        le=64,
        description="computations derived from analyses (metrics, flow, budgets, Pareto, head "
        "payloads) running at once; the others wait (app/engine/admission.py)",
    )
    compute_memory_bytes: int = Field(
        1 << 30,
        ge=1 << 20,
        description="estimated working memory of the derived computations running at once; one "
        "alone always runs",
    )
    compute_queue_jobs: int = Field(
        32, ge=0, description="derived computations that may wait their turn; then 503"
    )
    compute_max_wait_s: float = Field(
        120.0,
        ge=0,
        description="a derived computation whose estimated wait is longer is refused (503 with "
        "Retry-After) rather than queued",
    )
    rate_per_s: float = Field(
        10.0, ge=0, description="analyses a second per client address, after the burst; 0: off"
    )
    rate_burst: int = Field(240, ge=1, description="analyses one client address may send at once")
    share_rate_per_s: float = Field(
        1.0, ge=0, description="new shares a second per client address, after the burst; 0: off"
    )
    share_rate_burst: int = Field(100, ge=1, description="new shares one address may make at once")
    share_max_count: int = Field(100_000, ge=1, description="shares kept at most; then 507")
    share_max_bytes: int = Field(
        256 << 20, ge=1 << 16, description="bytes of shared states kept at most; then 507"
    )
    share_warmups: int = Field(
        4, ge=0, description="share warm-ups queued at most (low priority); more are skipped"
    )
    allowed_hosts: str | None = Field(
        None,
        description="comma-separated Host names the server answers (400 otherwise); '*' any; "
        "None: loopback names when bound to loopback, else any",
    )
    trusted_proxies: str | None = Field(
        None,
        description="comma-separated addresses (or networks) of reverse proxies whose "
        "X-Forwarded-For names the client; None: no proxy is trusted and every rate limit is "
        "per connecting address (Forwarded and X-Real-IP are never read)",
    )
    timeout_keep_alive: int = Field(5, ge=1, description="seconds an idle connection is kept")
    header_timeout: float = Field(
        10.0, gt=0, description="seconds a client has to send a request's head, then its body"
    )
    max_connections: int = Field(
        1000, ge=1, description="open connections at most (uvicorn limit_concurrency); then 503"
    )
    threads: int | None = Field(
        None,
        ge=1,
        description="torch CPU threads; None: half the cores (at least 1), since the POS tagger "
        "runs beside the forward and a busy machine's spinning threads slow every forward",
    )

    def host_allowlist(self) -> list[str] | None:
        """Host names the server answers (None: any)."""
        if self.allowed_hosts is not None:
            names = [h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip()]
            return None if not names or "*" in names else names
        if self.host in LOOPBACK_HOSTS:
            return list(LOOPBACK_NAMES)
        return None

    @field_validator("models", mode="before")
    @classmethod
    def _split_models(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return value

    @field_validator("models")
    @classmethod
    def _distinct_models(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        seen = [v for i, v in enumerate(value) if v in value[:i]]
        if seen:
            raise ValueError(f"each model once; {seen[0]!r} is given twice")
        return value

    def model_names(self) -> list[str | None]:
        """The models to serve, the default first (None: the shipped default model)."""
        if self.models:
            return list(self.models)
        return [self.model_path]

    def artefacts_dir(self) -> Path:
        """Where artefacts fitted for any model are looked up (and ``fit`` may write them)."""
        return self.artefact_dir if self.artefact_dir is not None else self.data_dir / "artefacts"

    def torch_threads(self) -> int:
        """The torch thread count to use: ``threads``, else half the cores (at least 1)."""
        return self.threads or max(1, (os.cpu_count() or 2) // 2)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Settings from ``SPARSESCOPE_*`` variables, then ``overrides`` (those not None).

        A bad value raises :class:`SparsescopeError` naming the variable and what is allowed.
        """
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name in cls.model_fields:
            raw = env.get(ENV_PREFIX + name.upper())
            if raw is not None and raw.strip() != "":
                values[name] = raw.strip()
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**values)
        except ValidationError as exc:
            err = exc.errors()[0]
            name = str(err["loc"][0]) if err["loc"] else "?"
            source = (
                f"--{name.replace('_', '-')}"
                if name in overrides
                else f"{ENV_PREFIX}{name.upper()}"
            )
            raise SparsescopeError(f"{source}: {err['msg']}, got {err.get('input')!r}") from None


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings (cached; tests use ``Settings(...)`` or a dependency override)."""
    return Settings.from_env()


def served_by_default() -> tuple[str, ...]:
    """What ``sparsescope serve`` serves when no model is configured: the shipped default
    model first, then its counterpart (the adapted entmax model and the softmax-trained
    original, whichever is not the default), when that one is installed."""
    from sparse_core.shipped import shipped_models
    from sparse_core.sources import DEFAULT_MODEL_ID, ORIGINAL_MODEL_ID

    adapted = [m for m in shipped_models() if m.endswith("entmax1.5")]
    pair = [DEFAULT_MODEL_ID] + [m for m in (*adapted, ORIGINAL_MODEL_ID) if m != DEFAULT_MODEL_ID]
    return tuple(pair[:2])
