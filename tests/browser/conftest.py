"""Browser fixtures: the app on the tiny random model, served by uvicorn in a thread on a free
loopback port, and a headless Chromium driven by Playwright.

Chromium is Debian's: its headless build (``/usr/bin/chromium-headless-shell``, the same Blink and
V8 without the browser's windowing and UI: the build Playwright itself runs headless tests on) where
it is installed, else the full ``/usr/bin/chromium``, or ``SPARSESCOPE_CHROMIUM``. Playwright's own
browser download is not used. Every test here is skipped, with the reason, when Playwright or
Chromium is missing. The tiny model gets a random Sparsefinder artefact (projections and k-means
centroids of the right shapes) so that the sf-* methods, Reformer, Routing and the POS panel have
data.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time

import pytest

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


#: Debian's Chromium executables, the first present is driven. The headless shell takes about a
#: quarter less CPU for the same tests (docs/benchmarks.md, "Test suite"), and the browser tests
#: are most of the suite's CPU.
CHROMIUMS = (
    "/usr/bin/chromium-headless-shell",
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
)


def chromium_path() -> str | None:
    """The Chromium executable to drive (``SPARSESCOPE_CHROMIUM``, else the first of
    :data:`CHROMIUMS` present), or None."""
    explicit = os.environ.get("SPARSESCOPE_CHROMIUM")
    if explicit:
        return explicit if os.path.exists(explicit) else None
    for name in CHROMIUMS:
        if os.path.exists(name):
            return name
    return shutil.which("chromium") or shutil.which("chromium-browser")


def pytest_collection_modifyitems(config, items):
    reason = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "playwright is not installed (pip install playwright)"
    if reason is None and chromium_path() is None:
        reason = (
            "no Chromium executable (apt-get install chromium-headless-shell, or chromium; "
            "or SPARSESCOPE_CHROMIUM)"
        )
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


def random_artefact(model, seed: int = 0, clusters=(2, 4, 8)):
    """A Sparsefinder artefact of random projections for ``model`` (shapes only matter here),
    with an untrained indexer and AttnGate attached (``testing.random_selectors``)."""
    import torch

    from sparse_core.sparsefinder import Artefact
    from sparse_core.testing import random_selectors

    cfg = model.config
    gen = torch.Generator().manual_seed(seed)
    L, H, d, r = cfg.num_layers, cfg.num_heads, cfg.head_dim, 4
    W = torch.randn(L, H, d, r, generator=gen) / d**0.5
    b = torch.zeros(L, H, r)
    cents = {B: torch.randn(L, H, B, r, generator=gen) for B in clusters}
    art = Artefact(model.model_id, 1.5, r, W, b, cents, {"name": "random-test-artefact"})
    art.learned = random_selectors(L, H, d, model.model_id, 1.5, seed)  # indexer, seer
    return art


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# package scope: the server thread and Playwright's event loop end with the browser tests (an xdist
# worker then goes on with other modules, which run asyncio loops, freeze the collector ...)
@pytest.fixture(scope="package")
def server_url(tmp_path_factory, tiny_model):
    """Base URL of a live server (uvicorn thread) on the tiny model with a random artefact."""
    import uvicorn

    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    settings = Settings(data_dir=tmp_path_factory.mktemp("browser-data"), warmup=False)
    service = AnalysisService(settings, model=tiny_model, artefact=random_artefact(tiny_model))
    port = free_port()
    config = uvicorn.Config(
        create_app(settings, service), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start within 30 s")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="package")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A fresh page; JavaScript errors and console errors fail the test (except the browser's own
    "Failed to load resource" line for an API answer of 4xx, which some tests provoke)."""
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))

    def on_console(msg):
        if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
            errors.append(f"console error: {msg.text}")

    pg.on("console", on_console)
    pg.js_errors = errors
    yield pg
    context.close()
    assert not errors, errors
