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

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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
    model_path: str | None = Field(None, description="a local BERT checkpoint; None = default")
    artefact_path: str | None = Field(None, description="a Sparsefinder artefact; None = shipped")
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
