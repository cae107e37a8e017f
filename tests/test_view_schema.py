"""The view's one definition (sparse_core/view_schema.py VIEW_FIELDS) and what derives from it:
the page's codec (frontend/js/view-state.js, under node: tests/js/view_state_cases.mjs), the
server's reading of addresses and shares (sparse_core.view_codec), ``ShareState.view`` (pydantic).

The same cases go through both codecs and must give the same answers: addresses read (valid ones,
every field at a value other than its default, and bad values, rejected with the same message),
states written to an address and read back, states written as a share and read back. A view flag
added to the table alone (here in a copy of frontend/js) reaches the store's defaults, the
address, the share link and the server's type.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sparse_core import metrics, view_schema
from sparse_core.methods import METHODS
from sparse_core.view_codec import decode_query, from_share, to_share
from sparse_core.view_schema import FIELDS, FLAGS, VIEW_FIELDS, ViewField, js_module

ROOT = Path(__file__).resolve().parents[1]
JS_ROOT = ROOT / "frontend" / "js"
CASES = ROOT / "tests" / "js" / "view_state_cases.mjs"
NODE = shutil.which("node")

needs_node = pytest.mark.skipif(
    NODE is None, reason="node is not installed: the page's codec runs under node (CI has it)"
)


def run_js(cases: list[dict], tmp_path: Path, js_root: Path = JS_ROOT) -> list[Any]:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    res = subprocess.run(
        [NODE, str(CASES), str(path), "--js", str(js_root)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def run_py(cases: list[dict]) -> list[Any]:
    out: list[Any] = []
    for c in cases:
        if c["op"] == "decode":
            d = decode_query(c["query"])
            out.append({"state": d.state, "errors": d.errors, "notices": d.notices})
        elif c["op"] == "toShare":
            out.append(to_share(c["state"]))
        elif c["op"] == "fromShare":
            d = from_share(c["share"])
            out.append({"state": d.state, "errors": d.errors})
        else:
            out.append(None)  # the address is written by the page alone
    return out


def view_state(**over: Any) -> dict[str, Any]:
    return {**view_schema.defaults(), "analysis": {"id": "0123abcd"}, **over}


# every view field away from its default (two views), and the defaults
STATES = [
    view_state(),
    view_state(text="The chef who ran to the store was out of food.", model="tiny-enc",
               alpha=1.25, causal=True, truncate=True, start=7, layer=3, head=11,
               method="sf-kmeans", params={"clusters": 4, "top_k": 1, "globals": True},
               lockedRow=5, cluster=2, scope="mean", gridColour="recall", hideSpecial=True,
               block="16", paretoX="block", compare="method", cmpLayer=1, cmpHead=2,
               cmpMethod="strided", cmpAlpha=1.25, cmpModel="tiny-dec", view="model"),
    view_state(text="x" * 1501, alpha="own", layer=0, head=1, method="bigbird",
               params={"window": 3, "random_keys": 0, "globals": False}, lockedRow=0,
               cluster=0, block="64"),
]  # fmt: skip

# addresses: the page's own (old and new), and bad values of every kind
QUERIES = [
    "",
    "?text=The+chef.&alpha=1.5&layer=1&head=2&method=bigbird&p.random_keys=2&p.window=5"
    "&p.globals=0&row=3&hide=1",
    "alpha=2&causal=0&layer=0&head=2&method=window&p.window=3&p.globals=0&row=&cluster="
    "&scope=head&grid=gold&hide=0&block=128&px=sparsity",
    "text=A%20%3Cscript%3E&model=tiny-enc&alpha=1&causal=1&start=12&method=strided&p.stride=4"
    "&cluster=3&scope=mean&grid=recall&block=32&px=block",
    "id=abc123&alpha=own",  # the model's own α
    "text=a&text=b&alpha=1.5&alpha=3&p.window=2&p.window=9",  # the first of a repeated key
    # bad values: each is left out, with a message; numbers out of range are clamped
    "alpha=3&causal=yes&layer=-1&head=1024&row=x&cluster=1.5&scope=foo&grid=blue&hide=true"
    "&block=48&px=tokens&start=99999999&method=Bad%20Name&view=grid",
    "alpha=&alpha=1&layer=&model=" + "m" * 301,
    "alpha=0x1&layer=%C2%B2&head=1e2&start=+3",
    "alpha=Own",
    "p.bad%20name=1&p.ok=" + "v" * 201 + "&p.__proto__=1",
    # side by side's fields (frontend/js/compare.js): bad values, then good ones
    "cmp=beside&cl=-1&ch=1024&cm=Strided&ca=2.5&cmo=" + "m" * 301,
    "cmp=alpha&cl=3&ch=11&cm=bigbird&ca=1.25&cmo=tiny-dec",
]

SHARES = [
    {"text": "hi"},
    {"text": "hi", "alpha": 2.0, "causal": True, "truncate": True, "start": 9, "model": "m",
     "layer": None, "head": 3, "method": "strided", "params": {"stride": 4}, "token": 2,
     "cluster": 1, "lecture_step": None,
     "view": {"scope": "mean", "grid": "recall", "hideSpecial": True, "block": "32",
              "paretoX": "block"}},
    {"text": "hi", "view": {"block": 64, "tab": "pareto", "hideSpecial": 1, "scope": "foo"}},
    {"text": "hi", "view": {"grid": None, "paretoX": "sparsity", "block": 48}},
    {"text": "hi", "alpha": "own"},
]  # fmt: skip


def test_the_page_s_module_is_generated_from_the_table():
    """frontend/js/view-schema.js is js_module() of the table; when it is not, the message says
    the command that rewrites it."""
    path = ROOT / view_schema.JS_PATH
    assert path.read_text(encoding="utf-8") == js_module(), (
        f"{view_schema.JS_PATH} is stale: run python -m sparse_core.view_schema --write"
    )
    assert view_schema.main(["--check"]) == 0


def test_the_table_is_consistent_with_the_server():
    """Keys are unique; every default is a value its field allows; the share keys are
    ShareState's; the method and tile-size values are the registry's and the metrics'."""
    from sparsescope.web.schemas import ShareState, ViewFlags

    for attr in ("key", "query", "share"):
        keys = [getattr(f, attr) for f in VIEW_FIELDS if getattr(f, attr) is not None]
        assert len(keys) == len(set(keys)), attr
    for f in VIEW_FIELDS:
        if f.kind != "params" and f.share is not None:
            assert view_schema.check_share_value(f, f.default) == f.default, f.key
    top = {f.share for f in VIEW_FIELDS if f.share and not f.flag}
    assert top | {"lecture_step", "view"} == set(ShareState.model_fields)
    assert set(FLAGS) == set(ViewFlags.model_fields)
    assert FIELDS["method"].default in METHODS
    for name in METHODS:
        assert view_schema.check_query_value(FIELDS["method"], name) == name
    assert FIELDS["block"].values == tuple(str(b) for b in metrics.BLOCKS)
    assert ShareState.model_fields["alpha"].default == FIELDS["alpha"].default


@needs_node
def test_addresses_are_read_alike_by_the_page_and_the_server(tmp_path):
    cases = [{"op": "decode", "query": q} for q in QUERIES]
    js, py = run_js(cases, tmp_path), run_py(cases)
    for q, a, b in zip(QUERIES, js, py, strict=True):
        assert a == b, q
    legacy = py[1]["state"]  # tests/browser/test_page.py's address, as the old url.js read it
    assert legacy == {"text": "The chef.", "alpha": 1.5, "layer": 1, "head": 2, "method": "bigbird",
                      "params": {"random_keys": "2", "window": "5", "globals": "0"},
                      "lockedRow": 3, "hideSpecial": True}  # fmt: skip
    assert py[2]["state"]["lockedRow"] is None and py[2]["state"]["block"] == "128"
    assert py[3]["state"]["truncate"] is True and py[3]["state"]["start"] == 12
    assert py[4]["state"] == {"id": "abc123", "alpha": "own"}
    assert py[5]["state"]["text"] == "a" and py[5]["state"]["alpha"] == 1.5
    assert py[5]["state"]["params"] == {"window": "2"}


@needs_node
def test_bad_values_are_left_out_alike_with_a_message(tmp_path):
    cases = [{"op": "decode", "query": q} for q in QUERIES[6:]]
    js, py = run_js(cases, tmp_path), run_py(cases)
    assert js == py
    bad = py[0]
    # numbers out of their range: clamped to the nearest end, each with a notice
    assert bad["state"] == {"alpha": 2.0, "layer": 0, "head": 1023, "start": 10_000_000,
                            "truncate": True}  # fmt: skip
    assert bad["notices"] == {
        "alpha": "alpha=3 is above the maximum 2: using 2",
        "layer": "layer=-1 is below the minimum 0: using 0",
        "head": "head=1024 is above the maximum 1023: using 1023",
        "start": "start=99999999 is above the maximum 10000000: using 10000000",
    }
    # every other value refused: the saved view or the defaults stay
    keys = ["causal", "row", "cluster", "scope", "grid", "hide", "block", "px", "method", "view"]
    assert set(bad["errors"]) == set(keys)
    assert bad["errors"]["view"] == 'view must be one of head, model, got "grid"'
    assert bad["errors"]["hide"] == 'hide must be 1 or 0, got "true"'
    assert bad["errors"]["block"] == 'block must be one of 16, 32, 64, 128, got "48"'
    assert bad["errors"]["row"] == 'row must be a whole number in [0, 100000] or empty, got "x"'
    assert "a method name" in bad["errors"]["method"]
    # the first "alpha" (empty) is refused, not the second; an empty layer is not "none"
    assert set(py[1]["errors"]) == {"alpha", "layer", "model"} and py[1]["state"] == {}
    assert "300 characters" in py[1]["errors"]["model"] and py[1]["errors"]["model"].endswith("…")
    assert set(py[2]["errors"]) == {"alpha", "layer", "head", "start"}  # 0x1, ², 1e2, " 3"
    assert py[3]["errors"] == {"alpha": 'alpha must be a number in [1, 2] or own, got "Own"'}
    assert set(py[4]["errors"]) == {"p.bad name", "p.ok", "p.__proto__"}
    assert py[4]["state"] == {"params": {}}
    # side by side: numbers out of range clamped with a notice, every other value refused with
    # what is allowed
    assert py[5]["state"] == {"cmpLayer": 0, "cmpHead": 1023, "cmpAlpha": 2.0}
    assert set(py[5]["errors"]) == {"cmp", "cm", "cmo"}
    want = 'cmp must be one of off, head, method, alpha, model, got "beside"'
    assert py[5]["errors"]["cmp"] == want
    assert py[5]["notices"]["ca"] == "ca=2.5 is above the maximum 2: using 2"
    assert set(py[5]["notices"]) == {"cl", "ch", "ca"}
    assert py[6]["errors"] == {}
    assert py[6]["state"] == {"compare": "alpha", "cmpLayer": 3, "cmpHead": 11,
                              "cmpMethod": "bigbird", "cmpAlpha": 1.25,
                              "cmpModel": "tiny-dec"}  # fmt: skip


def _written(f: ViewField, v: Any) -> Any:
    """A store value as the address gives it back: slider values as strings."""
    if f.kind == "params":
        return {k: ("1" if x else "0") if isinstance(x, bool) else str(x) for k, x in v.items()}
    return v


@needs_node
def test_every_field_round_trips_through_the_address(tmp_path):
    """The page writes every state; both codecs read it back to that state: on a saved view's
    page (every flag written, no text) all of the view but the text; on a plain page what
    differs from the defaults."""
    cases = [{"op": "encode", "state": s, "withText": w} for s in STATES for w in (True, False)]
    queries = run_js(cases, tmp_path)
    reads = [{"op": "decode", "query": q} for q in queries]
    js, py = run_js(reads, tmp_path), run_py(reads)
    assert js == py
    for case, query, got in zip(cases, queries, py, strict=True):
        s, all_flags = case["state"], not case["withText"]
        text_fits = 0 < len(s["text"]) <= view_schema.MAX_TEXT_IN_URL
        assert got["errors"] == {}, query
        want = {}
        for f in VIEW_FIELDS:
            v = s[f.key] if f.state else None
            written = {
                "always": f.query is not None,
                "changed": v != f.default or all_flags,
                "set": v is not None,
                "analysis": True,
                "truncate": s["truncate"],
                "text": not all_flags and text_fits,
                "never": False,
            }[f.write]
            if written:
                want[f.key] = _written(f, v)
        if s["truncate"]:
            want["truncate"] = True
        if not all_flags and not text_fits:
            want["id"] = s["analysis"]["id"]  # no text or a long one: the analysis id
        assert got["state"] == want, query
    # the old url.js's exact strings (main's frontend/js/url.js before the schema)
    assert queries[0] == "id=0123abcd&alpha=1.5&layer=0&head=0&method=window"
    assert queries[1] == ("alpha=1.5&causal=0&layer=0&head=0&method=window&row=&cluster="
                          "&scope=head&grid=gold&hide=0&block=128&px=sparsity&pts=0&zoom="
                          "&cmp=off&cl=0&ch=0&cm=&ca=2&cmo=&ry=recall&view=head")  # fmt: skip


@needs_node
def test_shares_are_written_and_read_alike(tmp_path):
    cases = [{"op": "toShare", "state": s} for s in STATES]
    cases += [{"op": "fromShare", "share": s} for s in SHARES]
    js, py = run_js(cases, tmp_path), run_py(cases)
    assert js == py
    shared = py[1]
    assert shared["view"] == {"scope": "mean", "grid": "recall", "hideSpecial": True,
                              "block": "16", "paretoX": "block", "compare": "method",
                              "cmpLayer": 1, "cmpHead": 2, "cmpMethod": "strided",
                              "cmpAlpha": 1.25, "cmpModel": "tiny-dec",
                              "view": "model"}  # fmt: skip
    assert shared["token"] == 5 and shared["start"] == 7 and shared["lecture_step"] is None
    assert py[0]["view"] == {} and "start" not in py[0]
    # a share reads back to the state it was written from
    for s, share in zip(STATES, py[:3], strict=True):
        back = from_share(share)
        assert back.errors == {}
        assert back.state == {k: v for k, v in s.items() if FIELDS.get(k) and FIELDS[k].share
                              and (not FIELDS[k].flag or v != FIELDS[k].default)}  # fmt: skip
    old = py[len(STATES) + 2]  # a share saved before the view was typed
    assert old["state"]["block"] == "64" and "hideSpecial" not in old["state"]
    assert set(old["errors"]) == {"view.hideSpecial", "view.scope"}
    assert old["errors"]["view.hideSpecial"] == "view.hideSpecial must be true or false, got 1"
    assert set(py[-2]["errors"]) == {"view.grid", "view.block"}
    assert py[-1]["state"]["alpha"] == "own" and py[-1]["errors"] == {}  # the model's own α


# ----------------------------------------------------------------------------- one more flag

DENSITY = ViewField("density", "enum", "low", "dens", "view.density", write="changed",
                    values=("low", "high"), doc="a flag added for this test")  # fmt: skip


@pytest.fixture
def one_more_flag(monkeypatch, tmp_path) -> Path:
    """The table with one row more, and a copy of frontend/js with its view-schema.js."""
    fields = (*VIEW_FIELDS, DENSITY)
    monkeypatch.setattr(view_schema, "VIEW_FIELDS", fields)
    monkeypatch.setattr(view_schema, "FIELDS", {f.key: f for f in fields})
    monkeypatch.setattr(view_schema, "FLAGS", {f.flag: f for f in fields if f.flag})
    js = tmp_path / "js"
    shutil.copytree(JS_ROOT, js)
    (js / "view-schema.js").write_text(view_schema.js_module(), encoding="utf-8")
    return js


@needs_node
def test_a_new_view_flag_is_one_row_of_the_table(one_more_flag, tmp_path):
    from pydantic import ValidationError

    from sparsescope.web.schemas import _ViewExtras
    from sparsescope.web.view_state import view_flags_model

    state = view_state(density="high")
    cases = [
        {"op": "encode", "state": state, "withText": True},
        {"op": "decode", "query": "dens=high"},
        {"op": "decode", "query": "dens=medium"},
        {"op": "toShare", "state": state},
        {"op": "fromShare", "share": {"text": "hi", "view": {"density": "high"}}},
    ]
    js = run_js(cases, tmp_path, one_more_flag)
    assert js[0].endswith("&dens=high")
    assert js[1:] == run_py(cases)[1:]
    assert js[1]["state"] == {"density": "high"}
    assert js[2]["errors"] == {"dens": 'dens must be one of low, high, got "medium"'}
    assert js[3]["view"] == {"density": "high"}
    assert js[4]["state"]["density"] == "high"
    assert view_schema.defaults()["density"] == "low"
    # the server's type: a Literal field with its default, the same rule
    model = view_flags_model(_ViewExtras)
    assert model.model_json_schema()["properties"]["density"]["enum"] == ["low", "high"]
    assert model.model_validate({"density": "high"}) == {"density": "high"}
    with pytest.raises(ValidationError, match="must be one of low, high"):
        model.model_validate({"density": "medium"})


def test_the_flag_model_is_typed_and_dumps_what_it_was_given():
    from pydantic import ValidationError

    from sparsescope.web.schemas import ShareState, ViewFlags

    props = ShareState.model_json_schema()["$defs"]["ViewFlags"]["properties"]
    assert props["scope"]["enum"] == ["head", "mean"] and props["hideSpecial"]["type"] == "boolean"
    v = ViewFlags.model_validate({"block": "64", "scope": "head", "tab": "pareto"})
    assert v.block == "64" and v.grid == "gold"  # a default, not dumped
    assert v.model_dump(mode="json") == {"scope": "head", "block": "64", "tab": "pareto"}
    assert v == {"scope": "head", "block": "64", "tab": "pareto"}
    with pytest.raises(ValidationError, match="at most 32 flags"):
        ViewFlags.model_validate({f"k{i}": i for i in range(33)})
    for bad in ({"hideSpecial": "true"}, {"paretoX": "tokens"}, {"block": "48"}, {"block": 64}):
        with pytest.raises(ValidationError, match="must be"):
            ViewFlags.model_validate(bad)


def test_to_share_state_checks_its_flags_by_the_table(tiny_model):
    from sparse_core import viz

    out = tiny_model.run("The chef ran.", alpha=1.5)
    assert viz.to_share_state(out, view={"block": 32, "grid": "recall"})["view"] == {
        "block": "32", "grid": "recall"}  # fmt: skip
    with pytest.raises(ValueError, match='view.scope must be one of head, mean, got "all"'):
        viz.to_share_state(out, view={"scope": "all"})
    with pytest.raises(ValueError, match="'hidespecial' is not one the page reads"):
        viz.to_share_state(out, view={"hidespecial": True})


def test_a_field_must_name_a_known_kind():
    with pytest.raises(ValueError, match="kind"):
        dataclasses.replace(DENSITY, kind="colour")
