"""The notebook widget (sparsescope.widget): its traits, data and validation in Python, and its
bundled ESM rendered in headless Chromium with a minimal anywidget-like model (get / set / on /
save_changes), on the tiny model; one test on the real default model."""

from __future__ import annotations

import pytest

pytest.importorskip("anywidget")

import traitlets  # noqa: E402

from sparse_core.metrics import BLOCKS  # noqa: E402
from sparsescope.widget import AttentionWidget, BundleError, _module, bundle  # noqa: E402

TEXT = "The chef who ran to the store was out of food."


@pytest.fixture
def widget(tiny_model):
    return AttentionWidget(tiny_model, TEXT, alpha=1.5)


# ----------------------------------------------------------------------------- Python side


def test_traits_start_on_the_analysis_and_the_open_head(widget, tiny_model):
    a = widget.analysis
    cfg = tiny_model.config
    assert (a["layers"], a["heads"]) == (cfg.num_layers, cfg.num_heads)
    assert a["text"] == TEXT and a["alpha"] == 1.5 and a["causal"] is False
    assert (widget.layer, widget.head, widget.method) == (0, 0, "window")
    assert set(widget.params) == {"window", "globals"}  # the defaults, resolved for n
    assert widget._head["layer"] == 0 and widget._head["head"] == 0
    assert widget._head["n"] == a["n"] and widget._head["edges"]
    # the traits the view syncs are tagged for sync
    for name in ("layer", "head", "method", "params", "_analysis", "_head"):
        assert widget.trait_metadata(name, "sync"), name
    state = widget.get_state()
    assert "export default" in state["_esm"] and ".sparsescope-widget" in state["_css"]


def test_setting_head_and_layer_sends_that_heads_payload(widget):
    widget.layer, widget.head = 1, 2
    assert (widget._head["layer"], widget._head["head"]) == (1, 2)
    before = widget._head["edges"]
    widget.head = 3
    assert widget._head["head"] == 3 and widget._head["edges"] != before


def test_method_and_params_are_validated_with_the_registry(widget):
    widget.method = "strided"
    assert set(widget.params) >= {"window", "globals"} and len(widget.params) > 2
    default_l = widget.params["stride"]
    widget.params = {"stride": 2}  # missing ones take their defaults
    assert widget.params["stride"] == 2 and "window" in widget.params
    with pytest.raises(traitlets.TraitError, match=r"stride must be in \[") as err:
        widget.params = {"stride": 10_000}
    assert widget.params["stride"] == 2  # unchanged after a refused value
    with pytest.raises(traitlets.TraitError, match="no parameter"):
        widget.params = {"bogus": 1}
    with pytest.raises(traitlets.TraitError, match="method must be one of"):
        widget.method = "nope"
    with pytest.raises(traitlets.TraitError, match=r"layer must be in \[0, 1\]"):
        widget.layer = 99
    with pytest.raises(traitlets.TraitError, match="head must be in"):
        widget.head = -1
    with pytest.raises(traitlets.TraitError, match="alpha must be in"):
        widget.alpha = 2.5
    with pytest.raises(traitlets.TraitError, match="empty"):
        widget.text = "   "
    assert default_l >= 1 and err.value is not None


def test_metrics_match_the_registry_and_change_with_the_setting(widget):
    widget.method = "window"
    widget.params = {"window": 1, "globals": False}
    narrow = widget.metrics()
    widget.params = {"window": 27, "globals": True}
    wide = widget.metrics()
    blocks = {f"block_{b}" for b in BLOCKS}  # block sparsity at every tile size (definitions §4)
    assert set(narrow) == {"recall", "sparsity", "exact", "precision", "mass_recall", *blocks}
    assert all(0 <= narrow[k] <= 1 for k in (*blocks, "mass_recall"))
    assert wide["mass_recall"] >= narrow["mass_recall"]  # the wider window keeps more mass
    assert wide["recall"] == pytest.approx(1.0) and narrow["sparsity"] > wide["sparsity"]


def test_recall_of_every_head_follows_the_setting(widget):
    r = widget._recall
    a = widget.analysis
    assert r["analysis"] == a["id"] and r["method"] == widget.method
    assert r["params"] == widget.params and len(r["recall"]) == a["layers"] * a["heads"]
    widget.layer, widget.head = 1, 2
    k = 1 * a["heads"] + 2
    assert widget._recall["recall"][k] == pytest.approx(widget.metrics()["recall"], abs=1e-6)
    widget.params = {"window": 0, "globals": False}
    assert widget._recall["params"] == widget.params
    assert widget._recall["recall"][k] == pytest.approx(widget.metrics()["recall"], abs=1e-6)


def test_thumbnails_max_pool_every_heads_graph(widget):
    t = widget._thumbs
    a = widget.analysis
    k = min(a["n"], 24)
    assert t["analysis"] == a["id"] and t["k"] == k
    assert len(t["probs"]) == a["layers"] * a["heads"] and len(t["probs"][0]) == k * k
    # n <= 24: one cell per block, so the thumbnail is the head's probabilities themselves
    probs = widget._entry.out.probs
    for idx in (0, len(t["probs"]) - 1):
        want = probs[idx // a["heads"], idx % a["heads"]].flatten().tolist()
        assert t["probs"][idx] == pytest.approx(want, abs=1e-4)
    # a longer text: block (a, b) is the max over rows [a·n/k, (a+1)·n/k) and likewise columns
    widget.text = " ".join(["word"] * 40)
    n, t = widget.analysis["n"], widget._thumbs
    assert n > 24 and t["k"] == 24
    p = widget._entry.out.probs[0, 0]
    for a_, b_ in [(0, 0), (5, 17), (23, 23)]:
        rows = slice(a_ * n // 24, max(a_ * n // 24 + 1, (a_ + 1) * n // 24))
        cols = slice(b_ * n // 24, max(b_ * n // 24 + 1, (b_ + 1) * n // 24))
        want = float(p[rows, cols].max())
        assert t["probs"][0][a_ * 24 + b_] == pytest.approx(want, abs=1e-4)


def test_new_text_or_alpha_reanalyses_and_keeps_the_head(widget):
    widget.layer, widget.head = 1, 1
    first = widget.analysis["id"]
    widget.alpha = 2.0
    assert widget.analysis["id"] != first and widget.analysis["alpha"] == 2.0
    widget.text = "A much shorter one."
    assert widget.analysis["text"] == "A much shorter one."
    assert (widget.layer, widget.head) == (1, 1)
    assert widget._head["n"] == widget.analysis["n"]
    assert widget.params == widget._clean(widget.method, widget.params)  # valid for the new n


def test_the_bundle_is_one_module_from_the_installed_package_with_no_network():
    esm = bundle()
    assert esm.count("export default") == 1
    assert "// ---- widget/widget.js" in esm and "// ---- heatmap.js" in esm
    assert "// ---- grid.js" in esm and "// ---- controls.js" in esm
    assert "http://" not in esm.replace("http://www.w3.org", "") and "https://" not in esm
    assert "\nimport " not in esm  # every import rewritten


def test_the_bundler_refuses_what_it_cannot_rewrite():
    with pytest.raises(BundleError, match="export default"):
        _module("x.js", "export default 1;\n", {})
    with pytest.raises(BundleError, match="relative"):
        _module("x.js", 'import { a } from "lodash";\n', {})
    with pytest.raises(BundleError):
        _module("x.js", "export let x = 1;\n", {})


@pytest.mark.real_model
@pytest.mark.slow
def test_the_real_default_model(real_model):
    w = AttentionWidget(real_model, TEXT, alpha=1.5)
    a = w.analysis
    assert (a["layers"], a["heads"]) == (6, 12)
    w.layer, w.head = 5, 11
    assert (w._head["layer"], w._head["head"]) == (5, 11)
    assert 0 <= w.metrics()["recall"] <= 1


def test_the_causal_trait_says_a_decoder_ran_causally(tmp_path):
    """A GPT-2-style decoder is always causal; the trait reads True, not the
    False it was built with, and a bidirectional encoder's stays False."""
    from sparse_core import load_model
    from sparse_core.testing import write_tiny_checkpoint

    gpt2 = load_model(str(write_tiny_checkpoint(tmp_path / "gpt2", "gpt2")))
    w = AttentionWidget(gpt2, TEXT)
    assert w.analysis["causal"] is True and w.causal is True
    w.causal = False  # asked again: still a decoder
    assert w.causal is True and w.analysis["causal"] is True


def test_the_causal_trait_of_an_encoder_follows_the_user(widget):
    assert widget.causal is False
    widget.causal = True
    assert widget.causal is True and widget.analysis["causal"] is True
