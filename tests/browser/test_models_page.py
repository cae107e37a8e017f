"""Two models on one server, in a real headless Chromium: the page's model picker switches to a
decoder (causal locked on) and back, a share link of the decoder reopens on it after a restart
of the server, and the lecture runs on the model its URL names."""

from __future__ import annotations

import threading
import time

import pytest

from sparse_core.testing import write_tiny_checkpoint

from .conftest import free_port
from .test_page import TEXT, wait_ready

pytestmark = pytest.mark.browser


class LiveServer:
    """sparsescope on ``models`` (directories), uvicorn in a thread, until :meth:`stop`."""

    def __init__(self, data_dir, *models) -> None:
        import uvicorn

        from sparsescope.engine.service import AnalysisService
        from sparsescope.engine.settings import Settings
        from sparsescope.web.main import create_app

        settings = Settings(data_dir=data_dir, models=tuple(str(m) for m in models), warmup=False)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(
            uvicorn.Config(
                create_app(settings, AnalysisService(settings)),
                host="127.0.0.1",
                port=port,
                log_level="warning",
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start within 60 s")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return (
        write_tiny_checkpoint(root / "tiny-enc", "bert", seed=1),
        write_tiny_checkpoint(root / "tiny-dec", "gpt2", seed=2),
    )


def status(page) -> str:
    return page.locator("#status").inner_text()


def wait_status(page, needle: str) -> None:
    """Until the status line describes an analysis that mentions ``needle`` (not "Analysing…")."""
    page.wait_for_function(
        """(needle) => {
            const t = document.getElementById('status').textContent;
            return t.includes(needle) && !t.startsWith('Analysing');
        }""",
        arg=needle,
        timeout=30_000,
    )


def test_picker_switches_models_and_a_share_reopens_after_restart(page, tmp_path, model_dirs):
    data = tmp_path / "data"
    live = LiveServer(data, *model_dirs)
    try:
        page.goto(live.url + "/")
        picker = page.locator("#model")
        picker.wait_for(state="visible")
        # friendly labels (the card's), the full id in each option's title and in the card
        assert picker.locator("option").all_inner_texts() == [
            "tiny-enc, softmax-trained; entmax applied",
            "tiny-dec, softmax-trained; entmax applied (decoder)",
        ]
        assert picker.locator("option").first.get_attribute("title") == "tiny-enc"
        page.locator("#model-card summary").click()
        assert "tiny-enc" in page.locator("#model-card").inner_text()
        page.fill("#text", TEXT)
        page.click("#analyze")
        wait_ready(page)
        wait_status(page, "tiny-enc")
        assert "bidirectional" in status(page)
        assert not page.is_disabled("#causal")

        picker.select_option("tiny-dec")
        wait_status(page, "tiny-dec")
        wait_ready(page)
        assert "causal (a decoder)" in status(page)
        assert page.is_disabled("#causal") and page.is_checked("#causal")
        # no artefact for this model: one plain line says the learned methods are off, and at
        # which α
        hint = page.locator("#artefact-hint")
        assert hint.is_visible()
        assert "no Sparsefinder predictor fitted for this model at α = 1.5" in hint.inner_text()
        assert "decoder" in page.locator("label.switch").get_attribute("title")
        page.wait_for_function("() => location.search.includes('model=tiny-dec')")

        page.click(".share-button")
        page.wait_for_function(
            "() => /\\/s\\/[A-Za-z0-9_-]{12}$/.test(document.querySelector('.share-url').value)",
            timeout=30_000,
        )
        shared = page.locator(".share-url").input_value()
        sid = shared.rsplit("/", 1)[1]

        picker.select_option("tiny-enc")
        wait_status(page, "tiny-enc")
        wait_ready(page)
        assert not page.is_disabled("#causal")
        page.wait_for_function("() => location.search.includes('model=tiny-enc')")
        # leave before the server goes: a fetch cut by its shutdown is not the page's error
        page.goto("about:blank")
    finally:
        live.stop()

    # a new server process on the same data directory, with the models the other way round
    live = LiveServer(data, model_dirs[1], model_dirs[0])
    try:
        page.goto(f"{live.url}/s/{sid}")
        wait_ready(page)
        wait_status(page, "tiny-dec")
        assert page.locator("#model").input_value() == "tiny-dec"
        assert page.is_disabled("#causal")

        page.goto(f"{live.url}/lecture?step=2&model=tiny-enc&causal=0")
        page.wait_for_function(
            "() => document.getElementById('settings').textContent.includes('tiny-enc')",
            timeout=30_000,
        )
        assert page.locator("#model-select").input_value() == "tiny-enc"
    finally:
        live.stop()


def test_switching_models_and_back_keeps_the_users_view(page, tmp_path_factory):
    """To a decoder (causal forced on; no layer 2 there) and back: causal is
    off again as the user had it, and the layer, head and method come back."""
    root = tmp_path_factory.mktemp("models-view")
    enc = write_tiny_checkpoint(root / "enc3", "bert", seed=1, layers=3)
    dec = write_tiny_checkpoint(root / "dec2", "gpt2", seed=2, layers=2)
    live = LiveServer(root / "data", enc, dec)
    try:
        page.goto(f"{live.url}/?text={TEXT}&layer=2&head=3&method=strided&p.stride=3")
        wait_ready(page)
        wait_status(page, "enc3")
        assert not page.is_checked("#causal")
        page.locator("#model").select_option("dec2")
        wait_status(page, "dec2")
        wait_ready(page)
        assert page.is_checked("#causal")
        assert page.inner_text("#head-title").startswith("Layer 1")  # dec2 has 2: the nearest
        page.locator("#model").select_option("enc3")
        wait_status(page, "enc3")
        wait_ready(page)
        assert "bidirectional" in status(page) and not page.is_checked("#causal")
        assert page.inner_text("#head-title").startswith("Layer 2 · head 3")
        assert page.input_value("#method") == "strided"
        assert page.input_value('[data-param="stride"]') == "3"
        page.goto("about:blank")
    finally:
        live.stop()
