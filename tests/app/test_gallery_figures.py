"""The gallery's measured figures (static/gallery/examples.json) are what the real model measures
today: every example is re-measured with scripts/build_gallery.py and compared with the shipped
file, so a change to the model, a metric or a method that moves them fails here (rebuild the
gallery with ``python scripts/build_gallery.py`` and review the new picks).

Tolerances are those of printed numbers: a figure may move by one unit in its last printed
place (floating-point results differ in the last bits between CPUs), a head pick or a state not
at all."""

from __future__ import annotations

import json
import re

import pytest

from scripts.build_gallery import build, load_artefact_for
from sparsescope.web.gallery import examples_path

NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _close(new: str, old: str) -> bool:
    """Two printed numbers within one unit of the last place printed."""
    places = len(old.split(".")[1]) if "." in old else 0
    return abs(float(new) - float(old)) <= 10**-places + 1e-9


def assert_same_prose(new: str, old: str, where: str) -> None:
    """The same words, and numbers within their printed precision."""
    assert NUMBER.sub("#", new) == NUMBER.sub("#", old), where
    for a, b in zip(NUMBER.findall(new), NUMBER.findall(old), strict=True):
        assert _close(a, b), f"{where}: {a} (measured) vs {b} (shipped)"


@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads(examples_path().read_text(encoding="utf-8"))


@pytest.mark.real_model
@pytest.mark.slow
def test_the_shipped_figures_are_what_the_real_model_measures(real_model, shipped):
    # the Wikipedia passage is the one copied into the gallery (the corpus is not shipped)
    wiki = next(e for e in shipped["examples"] if e["slug"].startswith("wikipedia-"))
    rebuilt = build(real_model, load_artefact_for(real_model, None), wiki["state"]["text"])
    assert (rebuilt["model"], rebuilt["artefact"]) == (shipped["model"], shipped["artefact"])
    assert [e["slug"] for e in rebuilt["examples"]] == [e["slug"] for e in shipped["examples"]]
    for new, old in zip(rebuilt["examples"], shipped["examples"], strict=True):
        slug = old["slug"]
        assert new["state"] == old["state"], f"{slug}: another head, text or setting is picked"
        assert [f["label"] for f in new["figures"]] == [f["label"] for f in old["figures"]], slug
        for f_new, f_old in zip(new["figures"], old["figures"], strict=True):
            where = f"{slug}: {f_old['label']}"
            if isinstance(f_old["value"], str):
                assert_same_prose(f_new["value"], f_old["value"], where)
            else:
                assert _close(str(f_new["value"]), str(f_old["value"])), (where, f_new, f_old)
        for key in ("title", "summary", "explain", "how"):
            assert_same_prose(new[key], old[key], f"{slug}: {key}")
        cells_new, cells_old = new["thumb"]["cells"], old["thumb"]["cells"]
        assert new["thumb"]["m"] == old["thumb"]["m"] and len(cells_new) == len(cells_old)
        changed = sum(a != b for a, b in zip(cells_new, cells_old, strict=True))
        assert changed <= len(cells_old) // 100, f"{slug}: {changed} thumbnail cells changed"


def test_prose_comparison_catches_a_drift():
    """The comparison itself: equal prose passes, a moved number or a changed word fails."""
    assert_same_prose("recall 0.31 at 41%", "recall 0.32 at 40%", "x")  # last place: passes
    with pytest.raises(AssertionError):
        assert_same_prose("recall 0.35", "recall 0.31", "x")
    with pytest.raises(AssertionError):
        assert_same_prose("precision 0.31", "recall 0.31", "x")
