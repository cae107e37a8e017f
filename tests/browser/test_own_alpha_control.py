"""The α control's "model's own α", in a real headless Chromium: a model
trained with entmax opens at its own α per head, a global α overrides it, and back; a
softmax-trained model opens at 1.5."""

from __future__ import annotations

import threading
import time
from urllib.parse import quote

import pytest
import torch

from sparse_core.outputs import normalize_alpha

from .conftest import free_port
from .test_page import TEXT, wait_ready

pytestmark = pytest.mark.browser

#: The tiny model's own α per (layer, head), as a learned-α adaptation has one.
OWN = [[1.1, 1.5, 1.9, 2.0], [1.3, 1.7, 1.2, 1.6]]


@pytest.fixture(scope="module")
def learned_url(tmp_path_factory):
    import uvicorn

    from sparse_core.testing import tiny_model
    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    model = tiny_model(seed=5)
    model.default_alpha = normalize_alpha(torch.tensor(OWN), 2, 4)
    model.alpha_trained = True
    settings = Settings(data_dir=tmp_path_factory.mktemp("own-alpha"), warmup=False)
    app = create_app(settings, AnalysisService(settings, model=model))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
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


def checked(page) -> str:
    return page.locator("input[name=alpha]:checked").get_attribute("value")


def wait_alpha_in_address(page, value: str) -> None:
    page.wait_for_function(
        "(v) => new URLSearchParams(location.search).get('alpha') === v", arg=value, timeout=30_000
    )


def test_own_alpha_is_the_default_and_a_global_alpha_overrides_it(page, learned_url):
    # head (0, 0) named: a text alone opens on the landing example's head
    page.goto(f"{learned_url}/?text={quote(TEXT)}&layer=0&head=0")
    wait_ready(page)
    assert checked(page) == "own"
    wait_alpha_in_address(page, "own")
    # the open head (0, 0) runs at its own α 1.1: the metrics panel says so
    page.wait_for_function(
        "() => document.getElementById('metrics').textContent.includes('own α for this head: 1.1')",
        timeout=30_000,
    )
    page.wait_for_function(
        "() => document.getElementById('metrics').textContent.includes('each head at its own α')"
    )
    own_rows = page.locator("#grid").inner_text()
    page.get_by_label("sparsemax 2.0").check()
    wait_alpha_in_address(page, "2")
    wait_ready(page)
    assert checked(page) == "2"
    page.wait_for_function(
        "() => document.getElementById('metrics').textContent.includes('this view: α = 2')",
        timeout=30_000,
    )
    page.get_by_label("model's own α").check()
    wait_alpha_in_address(page, "own")
    wait_ready(page)
    assert checked(page) == "own"
    assert page.locator("#grid").inner_text() == own_rows


def test_an_address_alpha_wins_over_the_model_s_own(page, learned_url):
    page.goto(f"{learned_url}/?text={quote(TEXT)}&alpha=1.5")
    wait_ready(page)
    assert checked(page) == "1.5"


def test_a_softmax_trained_model_opens_at_one_alpha(page, server_url):
    """It has no α of its own: "model's own α" is not offered, and an address asking for it
    opens at the 1.5 it would run at, said as 1.5."""
    page.goto(f"{server_url}/?text={quote(TEXT)}")
    wait_ready(page)
    assert checked(page) == "1.5"
    assert not page.get_by_label("model's own α").is_visible()
    page.goto(f"{server_url}/?text={quote(TEXT)}&alpha=own")
    wait_ready(page)
    assert checked(page) == "1.5"
    wait_alpha_in_address(page, "1.5")


def test_a_learned_alpha_model_offers_its_own_alpha_and_shows_its_card(page, learned_url):
    page.goto(f"{learned_url}/?text={quote(TEXT)}")
    wait_ready(page)
    assert page.get_by_label("model's own α").is_visible()
    card = page.locator("#model-card")
    assert card.is_visible()
    card.locator("summary").click()
    assert "trained with entmax" in card.locator("summary").inner_text()
    assert "learned per head, 1.10–2.00" in card.inner_text()
