"""The notebook widget in a real JupyterLab (not a model shim): a kernel runs the real default
model, the view renders every head of it in headless Chromium, and traits sync both ways —
Python sets the head and the view follows, a click on a tile in the view sets it in Python, and
the recall the view shows is the one ``w.metrics()`` computes.

Skips unless JupyterLab and anywidget are installed (the ``test`` extra installs both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from .conftest import free_port

pytest.importorskip("anywidget")
pytest.importorskip("jupyterlab")
pytest.importorskip("ipykernel")

pytestmark = pytest.mark.browser

TEXT = "The chef who ran to the store was out of food."
CELLS = [
    "from sparse_core.model import load_model\n"
    "from sparsescope.widget import AttentionWidget\n"
    f"w = AttentionWidget(load_model(), {TEXT!r}, alpha=1.5)\n"
    "w",
    "w.layer, w.head = 2, 3",
    "print('open', w.layer, w.head)",
    "print('recall', f\"{w.metrics()['recall']:.3f}\")",
]


@pytest.fixture
def lab(tmp_path):
    """JupyterLab on a free port, no token, its config and runtime under tmp_path; the URL."""
    root = tmp_path / "nb"
    root.mkdir()
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "id": f"c{k}",
                "metadata": {},
                "execution_count": None,
                "outputs": [],
                "source": src,
            }
            for k, src in enumerate(CELLS)
        ],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (root / "widget.ipynb").write_text(json.dumps(nb))
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    port = free_port()
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            f"--port={port}",
            "--ServerApp.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.ip=127.0.0.1",
            "--LabApp.news_url=",
            "--allow-root",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(url + "/api", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(
                        "JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-2000:]
                    )
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def run_cell(page, k: int) -> None:
    """Select cell k and run it (Shift+Enter)."""
    page.locator(".jp-Notebook .jp-Cell").nth(k).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def output_of(page, k: int, prefix: str) -> str:
    """Wait for cell k's text output starting with ``prefix``; return it."""
    out = page.locator(".jp-Notebook .jp-Cell").nth(k).locator(".jp-OutputArea-output")
    page.wait_for_function(
        """([k, prefix]) => {
            const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[k];
            return [...cell.querySelectorAll('.jp-OutputArea-output')]
                .some((o) => o.textContent.trim().startsWith(prefix));
        }""",
        arg=[k, prefix],
        timeout=120_000,
    )
    return out.last.inner_text().strip()


def test_widget_renders_and_syncs_in_jupyterlab(browser, lab):
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(lab + "/lab/tree/widget.ipynb", timeout=120_000)
        page.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor", timeout=120_000)
        page.wait_for_function(  # the kernel is up before the first cell runs
            "() => /Idle/.test(document.getElementById('jp-main-statusbar')?.textContent ?? '')",
            timeout=120_000,
        )
        run_cell(page, 0)
        widget = page.locator(".sparsescope-widget")
        widget.wait_for(timeout=180_000)
        page.wait_for_function(
            "() => document.querySelectorAll('.sparsescope-widget .tile').length === 72",
            timeout=60_000,
        )  # MiniLM: 6 layers × 12 heads

        run_cell(page, 1)  # Python -> view
        page.wait_for_function(
            "() => document.querySelector('.sparsescope-widget').textContent"
            ".includes('Layer 2 · head 3 · n = 14')",
            timeout=60_000,
        )

        widget.locator('.tile[data-layer="4"][data-head="5"]').click()  # view -> Python
        page.wait_for_function(
            "() => document.querySelector('.sparsescope-widget').textContent"
            ".includes('Layer 4 · head 5')",
            timeout=60_000,
        )
        run_cell(page, 2)
        assert output_of(page, 2, "open") == "open 4 5"

        run_cell(page, 3)
        shown = widget.locator(".metric-recall .metric-value").inner_text().strip()
        assert output_of(page, 3, "recall") == f"recall {shown}"
        assert not [e for e in errors if "sparsescope" in e or "anywidget" in e], errors
    finally:
        context.close()
