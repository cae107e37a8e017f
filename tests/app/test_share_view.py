"""``ShareState.view`` typed by the view's one definition (sparse_core/view_schema.py): bad flags
are refused on the way in naming the flag, shares saved before the view was typed still open
(a flag that no longer validates is left out, as the page always ignored it), and a share or
gallery page's query overrides the saved view for the ``preload`` island as the page reads it."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from sparsescope.engine.store import DB_NAME
from sparsescope.web.shares import ISLAND_ID

TEXT = "The chef who ran to the store was out of food."
ISLAND_RE = re.compile(r'<script type="application/json" id="([a-z-]+)">(.*?)</script>', re.S)


def islands(html: str) -> dict[str, dict]:
    return {k: json.loads(v) for k, v in ISLAND_RE.findall(html)}


def share(client, state: dict) -> str:
    r = client.post("/api/share", json={"state": state})
    assert r.status_code == 200, r.text
    return r.json()["id"]


@pytest.mark.parametrize(
    ("view", "field", "needle"),
    [
        ({"scope": "all"}, "state.view.scope", "must be one of head, mean, got 'all'"),
        ({"grid": 1}, "state.view.grid", "must be one of gold, recall"),
        ({"hideSpecial": "true"}, "state.view.hideSpecial", "must be true or false"),
        ({"block": "48"}, "state.view.block", "must be one of 16, 32, 64, 128, got '48'"),
        ({"block": 64}, "state.view.block", "(a JSON string), got 64"),
        ({"paretoX": None}, "state.view.paretoX", "must be one of sparsity, block"),
        ({f"k{i}": i for i in range(33)}, "state.view", "at most 32 flags"),
    ],
)
def test_bad_flags_are_422_naming_the_flag(client, view, field, needle):
    r = client.post("/api/share", json={"state": {"text": TEXT, "view": view}})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["field"] == field and needle in body["detail"], body


def test_flags_read_back_as_given(client):
    sid = share(client, {"text": TEXT, "view": {"block": "64", "hideSpecial": False, "tab": "x"}})
    view = client.get(f"/api/share/{sid}").json()["state"]["view"]
    assert view == {"block": "64", "hideSpecial": False, "tab": "x"}  # no defaults added


def test_a_share_saved_before_the_view_was_typed_still_opens(client, app_settings, caplog):
    view = {"scope": "everything", "hideSpecial": 1, "grid": "recall", "block": 32, "tab": "p"}
    saved = {"text": TEXT, "layer": 1, "head": 2, "view": view}
    conn = sqlite3.connect(Path(app_settings.data_dir) / DB_NAME)
    conn.execute(
        "INSERT INTO shares VALUES ('oldview00001', ?, '2024-01-01T00:00:00+00:00')",
        (json.dumps(saved),),
    )
    conn.commit()
    conn.close()
    r = client.get("/api/share/oldview00001")
    assert r.status_code == 200, r.text
    assert r.json()["state"]["view"] == {"grid": "recall", "block": "32", "tab": "p"}
    assert "view.scope must be one of head, mean" in caplog.text
    page = client.get("/s/oldview00001")
    assert page.status_code == 200
    assert islands(page.text)[ISLAND_ID]["state"]["view"] == {
        "grid": "recall",
        "block": "32",
        "tab": "p",
    }

    # a tile size saved as a number (no flag wrong): read as its string, no warning
    conn = sqlite3.connect(Path(app_settings.data_dir) / DB_NAME)
    conn.execute(
        "INSERT INTO shares VALUES ('numblock0001', ?, '2024-01-01T00:00:00+00:00')",
        (json.dumps({"text": TEXT, "view": {"block": 16}}),),
    )
    conn.commit()
    conn.close()
    assert client.get("/api/share/numblock0001").json()["state"]["view"] == {"block": "16"}


def test_the_query_overrides_the_saved_view_for_the_island(client):
    sid = share(client, {"text": TEXT, "alpha": 1.5, "layer": 1, "head": 2})
    pre = islands(client.get(f"/s/{sid}?alpha=2&layer=0&head=3&causal=1").text)["preload"]
    assert (pre["analysis"]["alpha"], pre["analysis"]["causal"]) == (2, True)
    assert (pre["layer"], pre["head"]) == (0, 3)
    # values the page leaves out are left out here too: the saved view stays
    pre = islands(client.get(f"/s/{sid}?alpha=x&layer=x&head=2").text)["preload"]
    assert (pre["analysis"]["alpha"], pre["layer"], pre["head"]) == (1.5, 1, 2)
    # a number out of its range is clamped, as the page clamps it
    pre = islands(client.get(f"/s/{sid}?alpha=3&head=2").text)["preload"]
    assert (pre["analysis"]["alpha"], pre["layer"], pre["head"]) == (2, 1, 2)
