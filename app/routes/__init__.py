"""HTTP routes, one module per area, each exposing ``router`` (an APIRouter).

:func:`sparsescope.main.create_app` includes ``ROUTERS`` (the API first, the page routes last)
and runs the ``STARTUP`` / ``SHUTDOWN`` hooks (each ``hook(app)``) in the app's lifespan. A route
module added to this package is found by itself; it may define ``on_startup(app)`` /
``on_shutdown(app)``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

FIRST = ("meta", "analyses")
LAST = ("pages",)


def _discover() -> list[str]:
    found = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    middle = [m for m in found if m not in FIRST and m not in LAST]
    return [*FIRST, *middle, *LAST]


ROUTERS: list[Any] = []
STARTUP: list[Callable[[Any], Any]] = []
SHUTDOWN: list[Callable[[Any], Any]] = []

for _name in _discover():
    _mod = importlib.import_module(f"{__name__}.{_name}")
    if not hasattr(_mod, "router"):
        continue
    ROUTERS.append(_mod.router)
    # share links: an unreadable share database is reported at start-up, closed at shutdown
    _start = getattr(_mod, "on_startup", None) or getattr(_mod, "open_share_store", None)
    _stop = getattr(_mod, "on_shutdown", None) or getattr(_mod, "close_share_store", None)
    if _start is not None:
        STARTUP.append(_start)
    if _stop is not None:
        SHUTDOWN.append(_stop)
