"""The lecture's block-selection step (step 10, frontend/js/lecture/step-blocks.js): its MoBA
choice, made in the browser from the head's raw queries and keys, is the registry's ``moba``
(sparse_core/methods/blocks.py): the same recall, sparsity and exactness as the server's at
B = 16, on a text of three blocks, bidirectional and causal; and the slide shows its numbers."""

from __future__ import annotations

import pytest

from tests.browser.test_page import api

pytestmark = pytest.mark.browser

LONG = (
    "When the committee finally published its report, the researchers who had argued for "
    "sparse attention found that most heads keep only a handful of keys per query. The "
    "department answered every recommendation."
)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_the_slides_moba_is_the_registrys(page, server_url, causal):
    a = api(server_url, "/api/analyze", {"text": LONG, "causal": causal})
    assert 32 < a["n"] <= 64  # three or four blocks of 16; raw vectors up to 64 tokens
    page.goto(server_url + "/lecture?step=1")
    got = page.evaluate(
        """async ([id, causal]) => {
            const { mobaBlocks, maskOf } = await import('/js/lecture/step-blocks.js');
            const { prepareHead } = await import('/js/head.js');
            const { computeMetrics } = await import('/js/metrics.js');
            const get = async (p) => (await fetch(`/api/analyses/${id}/${p}`)).json();
            const out = [];
            for (const [layer, head] of [[0, 1], [1, 3]]) {
              const raw = await get(`raw/${layer}/${head}`);
              const h = prepareHead(await get(`heads/${layer}/${head}`), causal);
              for (const k of [1, 2]) {
                const { kept } = mobaBlocks(raw.queries, raw.keys, 16, k, causal);
                const js = computeMetrics(maskOf(kept, h.n, 16, causal), h.gold, h.n, causal);
                const q = new URLSearchParams({ method: 'moba', block: 16, topk: k, window: 0,
                                                globals: false });
                out.push({ layer, head, k, js, py: await get(`metrics/${layer}/${head}?${q}`) });
              }
            }
            return out;
        }""",
        [a["id"], causal],
    )
    assert len(got) == 4
    for row in got:
        for key in ("recall", "sparsity", "exact"):
            assert row["js"][key] == row["py"][key], (row["layer"], row["head"], row["k"], key)
    assert len({row["js"]["sparsity"] for row in got}) > 1  # k changes what is kept


def test_the_slide_shows_its_recall_and_follows_the_slider(page, server_url):
    page.goto(server_url + "/lecture?step=10")
    page.wait_for_function(
        "() => document.body.dataset.step === '10' && 'ready' in document.body.dataset"
    )
    recall = page.locator("#recall-blocks")
    page.wait_for_function("() => /%$/.test(document.getElementById('recall-blocks').textContent)")
    before = recall.text_content()
    slider = page.locator("#blocks-k")
    slider.focus()
    page.keyboard.press("End")  # every block: nothing is missed
    page.wait_for_function(
        "() => document.getElementById('recall-blocks').textContent === '100.0 %'"
    )
    assert before != "100.0 %"  # two blocks of five missed edges
    assert page.locator("#figure canvas").count() == 1
