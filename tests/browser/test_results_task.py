"""The corpus-results panel's task axis in headless Chromium: a real
`sparsescope pareto --task` folder (a tiny checkpoint adapted to entmax, so it has a masked-LM
head) served with --results; the "task loss" toggle plots each method's frontier losses and the
unrestricted loss, is kept in the address (`ry=task`), and the table gives the lowest loss."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
import torch

from sparse_core.testing import write_tiny_checkpoint
from sparsescope.cli import main
from tests.browser.conftest import free_port
from tests.browser.test_page import analyse

from .test_results_panel import TEXTS

pytestmark = pytest.mark.browser


@pytest.fixture(autouse=True)
def _patient(page):
    page.set_default_timeout(90_000)


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("task")
    corpus = root / "corpus.txt"
    corpus.write_text("".join(f" = Part {k} = \n\n {t} \n\n" for k in range(12) for t in TEXTS))
    tiny = write_tiny_checkpoint(root / "tiny-bert", "bert")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        adapted = root / "adapted"
        assert main(["adapt", "--model", str(tiny), "--corpus", str(corpus), "--steps", "2",
                     "--seq-len", "32", "--batch", "4", "--out", str(adapted), "--device",
                     "cpu", "--quiet"]) == 0  # fmt: skip
        out = root / "run"
        assert main(["pareto", "--model", str(adapted), "--corpus", str(corpus), "--limit", "3",
                     "--max-tokens", "48", "--min-tokens", "8", "--methods",
                     "window,fixed,strided", "--task", "--task-texts", "2", "--workers", "1",
                     "--out", str(out)]) == 0  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.fixture(scope="module")
def task_url(tmp_path_factory, tiny_model, task_dir):
    import uvicorn

    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    settings = Settings(
        data_dir=tmp_path_factory.mktemp("task-data"), warmup=False, results_dir=task_dir
    )
    app = create_app(settings, AnalysisService(settings, model=tiny_model))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
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


def lowest(body: dict, method: str, level: float) -> str:
    v = [body["points"][i]["task_loss"] for i in body["frontiers"].get(method, [])
         if body["points"][i]["sparsity"] >= level
         and body["points"][i]["task_loss"] is not None]  # fmt: skip
    return f"{min(v):.3f}" if v else "–"


def test_the_task_toggle_plots_frontier_losses_and_the_unrestricted_one(page, task_url, task_dir):
    body = json.loads((task_dir / "pareto.json").read_text())
    analyse(page, task_url)
    page.wait_for_selector("#results-rows tbody tr")
    toggle = page.locator("#results-y")
    assert toggle.is_visible()
    assert toggle.locator("[data-y=recall]").get_attribute("aria-pressed") == "true"
    assert page.locator("#results-plot .dot-task").count() == 0
    # pressed from the keyboard, not clicked at a point: under the whole suite's load the click
    # once left the toggle unchanged (a point click misses when the layout above shifts after
    # Playwright's stability check); the mouse path is the "recall" click below
    toggle.locator("[data-y=task]").press("Enter")
    page.wait_for_selector("#results[data-y=task] #results-plot .dot-task")
    page.wait_for_function("() => new URLSearchParams(location.search).get('ry') === 'task'")
    assert toggle.locator("[data-y=task]").get_attribute("aria-pressed") == "true"
    # the reference line is the unrestricted loss; the dots are exactly the frontier losses
    ref = float(page.locator("#results-plot .task-full").get_attribute("data-loss"))
    assert ref == pytest.approx(body["task"]["loss_full"])
    shown = page.locator("#results-plot .dot-task").evaluate_all(
        "ds => ds.map((d) => [d.dataset.method, Number(d.dataset.loss)])"
    )
    want = [(p["method"], p["task_loss"]) for p in body["points"] if p["task_loss"] is not None]
    assert sorted((m, round(v, 6)) for m, v in shown) == sorted((m, round(v, 6)) for m, v in want)
    methods = {m for m, _ in want}
    assert page.locator("#results-plot path.front-corpus").count() == len(methods)
    rows = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#results-rows tbody tr')]
            .map((tr) => [tr.dataset.method,
                [...tr.querySelectorAll('td')].map((td) => td.textContent)]))"""
    )
    assert rows == {m: [lowest(body, m, 0.8), lowest(body, m, 0.9)] for m in methods}
    if shots := os.environ.get("SPARSESCOPE_SHOTS"):
        page.set_viewport_size({"width": 1440, "height": 900})
        page.locator(".panel-results").scroll_into_view_if_needed()
        page.locator(".panel-results").screenshot(path=f"{shots}/results-task-1440x900.png")
    # the address keeps it: a reload opens on the task axis; back to recall drops it
    page.reload()
    page.wait_for_selector("#results[data-y=task] #results-plot .dot-task")
    page.locator("#results-y [data-y=recall]").click()
    page.wait_for_selector("#results[data-y=recall] #results-plot .front-text")
    assert page.locator("#results-plot .dot-task").count() == 0


def test_results_without_task_losses_have_no_toggle_and_bad_ones_are_named(page, task_url):
    analyse(page, task_url)
    got = page.evaluate(
        """async () => {
            const r = await import('/js/results.js');
            const body = await (await fetch('/api/results')).json();
            const plain = {...body, task: undefined,
                           points: body.points.map((p) => ({...p, task_loss: undefined}))};
            const bad = {...body, points: body.points.map((p, k) => k ? p : {...p, task_loss: -2})};
            return [r.hasTask(body), r.hasTask(plain), r.checkTask(plain), r.checkTask(bad),
                    r.checkTask({...body, task: {loss_full: 'x'}})];
        }"""
    )
    assert got[0] is True and got[1] is False and got[2] is None
    assert got[3] == "point 0's task_loss must be a number ≥ 0 or null"
    assert "loss_full is a number ≥ 0" in got[4]
