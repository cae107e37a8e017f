"""The corpus-results panel's chart of sparsity against length (``sparsescope pareto
--lengths``, pareto-lengths.json) in headless Chromium: one line per method through its best
recall at the chosen sparsity at each length, the values those of the served file, the level
switched by its buttons; a screenshot of the panel is written for a look."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from sparse_core.pareto.lengths import sweep_lengths
from sparsescope.commands.pareto import write_outputs
from tests.browser.conftest import free_port
from tests.browser.test_page import analyse

pytestmark = pytest.mark.browser

PROSE = (
    "The river rose through the night and by morning the low fields were under water. "
    "Farmers moved their cattle to the ridge, where the old church stood above the town. "
    "Nobody remembered a flood like it, though the records in the church spoke of three. "
)
METHODS = ["window", "streaming", "topk", "h2o"]
LENGTHS = [32, 64, 128]


@pytest.fixture(autouse=True)
def _patient(page):
    page.set_default_timeout(90_000)


@pytest.fixture(scope="module")
def lengths_dir(tmp_path_factory, tiny_model):
    texts = [" ".join([PROSE] * 3), " ".join([PROSE] * 4)]
    sweep = sweep_lengths(tiny_model, texts, None, LENGTHS, methods=METHODS, progress=False)
    out = tmp_path_factory.mktemp("results") / "lengths-run"
    write_outputs(sweep.sweeps[-1], out, {"corpus": "test"})
    (out / "pareto-lengths.json").write_text(json.dumps(sweep.to_json()))
    return out


@pytest.fixture(scope="module")
def lengths_url(tmp_path_factory, tiny_model, lengths_dir):
    import uvicorn

    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    settings = Settings(
        data_dir=tmp_path_factory.mktemp("lengths-data"), warmup=False, results_dir=lengths_dir
    )
    service = AnalysisService(settings, model=tiny_model)
    config = uvicorn.Config(create_app(settings, service), host="127.0.0.1", port=free_port(),
                            log_level="warning")  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{server.config.port}"
    server.should_exit = True
    thread.join(timeout=10)


def dots(page) -> dict[tuple[str, int], float]:
    got = page.evaluate(
        """() => [...document.querySelectorAll('#results-lengths .dot-length')].map((c) =>
            [c.dataset.method, Number(c.dataset.length), Number(c.dataset.recall)])"""
    )
    return {(m, n): r for m, n, r in got}


def want(body: dict, level: str) -> dict[tuple[str, int], float]:
    return {
        (m, n): v
        for m, by in body["recall_at_sparsity"].items()
        for n, v in zip(body["lengths"], by[level], strict=True)
        if v is not None
    }


def test_recall_against_length_one_line_per_method(page, lengths_url, lengths_dir):
    body = json.loads((lengths_dir / "pareto-lengths.json").read_text())
    analyse(page, lengths_url)
    page.wait_for_selector("#results-lengths svg .dot-length")
    # the default level is 0.9: the dots are the file's values there
    assert page.get_attribute("#results-lengths-level [data-level='0.9']", "aria-pressed") == "true"
    assert dots(page) == pytest.approx(want(body, "0.9"))
    lines = {
        m for m, by in body["recall_at_sparsity"].items() if any(v is not None for v in by["0.9"])
    }
    drawn = page.evaluate(
        "() => [...document.querySelectorAll('#results-lengths path.front-corpus')]"
        ".map((p) => p.dataset.method)"
    )
    assert set(drawn) == lines and len(drawn) == len(lines)
    ticks = page.evaluate("() => document.querySelector('#results-lengths svg').textContent")
    for n, g in zip(body["lengths"], body["gold_sparsity"], strict=True):
        assert str(n) in ticks and f"gold {g:.3f}" in ticks
    page.click("#results-lengths-level [data-level='0.5']")
    page.wait_for_function(
        "() => document.querySelector(\"#results-lengths-level [data-level='0.5']\")"
        ".getAttribute('aria-pressed') === 'true'"
    )
    assert dots(page) == pytest.approx(want(body, "0.5"))
    shot = os.environ.get("SPARSESCOPE_SHOT_DIR")
    if shot:  # a look at the panel (docs, review)
        page.locator(".panel-results").screenshot(path=str(Path(shot) / "results-lengths.png"))
