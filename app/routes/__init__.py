"""HTTP routes, one module per area. :func:`app.main.create_app` includes ``ROUTERS`` and runs
``STARTUP`` / ``SHUTDOWN`` hooks (each ``hook(app)``) in the app's lifespan."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from app.routes import analyses, meta, pages


def _optional(name: str) -> ModuleType | None:
    """A route module that another part of the project may not have added yet."""
    try:
        return importlib.import_module(f"app.routes.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"app.routes.{name}":
            return None
        raise


share = _optional("share")

ROUTERS = [meta.router, analyses.router]
STARTUP: list[Callable[[Any], Any]] = []
SHUTDOWN: list[Callable[[Any], Any]] = []
if share is not None:
    ROUTERS.append(share.router)
    STARTUP.append(share.open_share_store)  # an unreadable share database is reported at start
    SHUTDOWN.append(share.close_share_store)
ROUTERS.append(pages.router)
