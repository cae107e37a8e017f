"""The corpus-results panel in headless Chromium: a server started with --results DIR (a real
`sparsescope pareto` folder of the tiny model) shows each method's corpus frontier beside this
text's, per head; on a server without results, a picked pareto.json is read in the page, and a
foreign or broken file gets a clear message instead of a plot."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

from sparse_core import pareto as PA
from sparsescope.commands.pareto import write_outputs
from tests.browser.conftest import free_port
from tests.browser.test_page import TEXT, analyse

pytestmark = pytest.mark.browser


@pytest.fixture(autouse=True)
def _patient(page):
    """The machine is shared: a loaded CI box answers slowly, never wrongly."""
    page.set_default_timeout(90_000)


TEXTS = [
    "The cat sat on the mat because it was warm.",
    "Alice met Bob in Paris, and she gave him the book he wanted.",
    "Numbers like 3, 14 and 159 follow each other here.",
]


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory, tiny_model):
    sweep = PA.sweep_corpus(
        tiny_model, TEXTS, None, methods=["window", "fixed", "strided"], progress=False
    )
    out = tmp_path_factory.mktemp("results") / "wiki-run"
    write_outputs(sweep, out, {"corpus": "test"})
    return out


@pytest.fixture(scope="module")
def results_url(tmp_path_factory, tiny_model, results_dir):
    """A live server on the tiny model with ``--results`` (the conftest server has none)."""
    import uvicorn

    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    settings = Settings(
        data_dir=tmp_path_factory.mktemp("results-data"), warmup=False, results_dir=results_dir
    )
    service = AnalysisService(settings, model=tiny_model)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, service), host="127.0.0.1", port=free_port(), log_level="warning"
        )  # fmt: skip
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{server.config.port}"
    server.should_exit = True
    thread.join(timeout=10)


def get(url: str) -> dict:
    with urllib.request.urlopen(url) as r:
        return json.load(r)


def best_at(body: dict, method: str, level: float) -> str:
    rec = [body["points"][i]["recall"] for i in body["frontiers"].get(method, [])
           if body["points"][i]["sparsity"] >= level]  # fmt: skip
    return f"{max(rec):.3f}" if rec else "–"


def table(page) -> dict[str, list[str]]:
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#results-rows tbody tr')]
            .map((tr) => [tr.dataset.method,
                [...tr.querySelectorAll('td')].map((td) => td.textContent)]))"""
    )


def test_served_results_per_head_beside_this_text(page, results_url):
    analyse(page, results_url)
    aid = page.evaluate(
        "fetch('/api/analyze', {method: 'POST', headers: {'Content-Type': 'application/json'},"
        f" body: JSON.stringify({{text: {json.dumps(TEXT)}}})}}).then((r) => r.json())"
        ".then((b) => b.id)"
    )
    page.wait_for_selector(f"#results[data-analysis='{aid}'] #results-rows tbody tr")
    assert page.inner_text("#results-source").startswith("Served: wiki-run")
    layer, head = page.evaluate(
        "() => { const q = new URLSearchParams(location.search);"
        " return [Number(q.get('layer') ?? 0), Number(q.get('head') ?? 0)]; }"
    )
    corpus = get(f"{results_url}/api/results/heads/{layer}/{head}")
    text = get(f"{results_url}/api/analyses/{aid}/pareto?layer={layer}&head={head}")
    rows = table(page)
    assert set(rows) >= {"window", "fixed", "strided"}
    for m in ("window", "fixed", "strided"):
        assert rows[m] == [best_at(corpus, m, 0.8), best_at(text, m, 0.8),
                           best_at(corpus, m, 0.9), best_at(text, m, 0.9)]  # fmt: skip
    n_corpus = sum(1 for idx in corpus["frontiers"].values() if idx)
    assert page.locator("#results-plot .front-corpus").count() == n_corpus
    assert page.locator("#results-plot .front-text").count() >= 1
    assert page.locator("#results-plot .gold-corpus").count() == 1
    # the mean: the pareto.json body's frontiers
    page.click("#results-scope [data-scope=mean]")
    page.wait_for_function(
        "() => document.querySelector('#results-rows caption').textContent.includes('mean')"
    )
    mean = get(f"{results_url}/api/results")
    assert table(page)["window"][0] == best_at(mean, "window", 0.8)
    assert page.get_attribute("#results-scope [data-scope=mean]", "aria-pressed") == "true"


def test_a_picked_file_is_checked_in_the_page(page, server_url, results_dir, tmp_path):
    analyse(page, server_url)
    page.wait_for_function(
        "() => document.getElementById('results-source').textContent.includes('No corpus results')"
    )
    foreign = tmp_path / "package.json"
    foreign.write_text(json.dumps({"name": "left-pad", "version": "1.3.0"}))
    page.set_input_files("#results-file", str(foreign))
    page.wait_for_function("() => document.getElementById('results-message').textContent")
    msg = page.inner_text("#results-message")
    assert "package.json cannot be shown" in msg and "lacks model" in msg
    assert page.locator("#results-plot svg").count() == 0

    broken = tmp_path / "pareto.json"
    broken.write_text('{"model": "x", "points": [')
    page.set_input_files("#results-file", str(broken))
    page.wait_for_function(
        "() => document.getElementById('results-message').textContent.includes('not valid JSON')"
    )
    hostile = tmp_path / "hostile.json"
    body = json.loads((results_dir / "pareto.json").read_text())
    body["points"][0]["method"] = "<img src=x onerror=window.__pwned=1>"
    hostile.write_text(json.dumps(body))
    page.set_input_files("#results-file", str(hostile))
    page.wait_for_function(
        "() => document.getElementById('results-message').textContent.includes('known methods')"
    )
    assert page.evaluate("window.__pwned") is None

    page.set_input_files("#results-file", str(results_dir / "pareto.json"))
    page.wait_for_selector("#results-rows tbody tr", timeout=90_000)
    assert page.inner_text("#results-source").startswith("Opened: pareto.json")
    assert "mean over heads only" in page.inner_text("#results-source")
    assert "No per-head figures" in page.inner_text("#results-warn")
    assert page.inner_text("#results-message") == ""
    assert table(page)["window"][0] == best_at(body | {"points": json.loads(
        (results_dir / "pareto.json").read_text())["points"]}, "window", 0.8)  # fmt: skip
