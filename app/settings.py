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
        "model_path, else the shipped all-MiniLM-L6-v2",
    )
    model_path: str | None = Field(None, description="one model to serve; None = default")
    max_tokens: int = Field(512, ge=8, le=1 << 16, description="token limit (capped by the model)")
    artefact_path: str | None = Field(None, description="a Sparsefinder artefact; None = shipped")
    artefact_dir: Path | None = Field(
        None,
        description="where Sparsefinder artefacts of any model are found (matched by model id "
        "and alpha); None = <data_dir>/artefacts",
    )
    data_dir: Path = Field(default_factory=_default_data_dir, description="user data folder")
    cache_entries: int = Field(32, ge=1, description="analyses kept in the LRU cache")
    cache_bytes: int = Field(1 << 30, ge=1 << 20, description="memory bound of that cache")
    max_body_bytes: int = Field(1 << 20, ge=1024, description="larger request bodies get 413")
    warmup: bool = Field(True, description="run one short text at start-up so requests are warm")
    threads: int | None = Field(
        None,
        ge=1,
        description="torch CPU threads; None: half the cores (at least 1), since the POS tagger "
        "runs beside the forward and a busy machine's spinning threads slow every forward",
    )

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
