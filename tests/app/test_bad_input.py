"""Bad input, route by route: one table of (request -> status, field, message fragments).

Every route of the OpenAPI schema appears in the table (checked below), and so do the share pages.
Each answer must be the contract's error body ``{"detail", "field"}`` (docs/api.md, "Errors"): the
right status (400 bad value, 404 unknown id or route or a part the analysis does not have: a
layer, head, token or tile beyond its own, 405 wrong method, 413 too large, 422 schema),
``field`` naming the request field at fault, and a ``detail`` that says what was wrong and what is
allowed (the fragments) without a trace or a file path. Runs on the tiny random model (2 layers x
4 heads, 512 positions) with a tiny Sparsefinder artefact, so every method can be asked about.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient

from sparse_core.methods import METHODS
from sparsescope.engine.service import AnalysisService
from sparsescope.engine.settings import Settings
from sparsescope.web.main import create_app

JSON = {"content-type": "application/json"}
MIB = 1 << 20
#: What no error may show: a trace, a file path of this machine or of the installed packages.
LEAKS = re.compile(r"Traceback|File \"|/root|/home/|/work/|/usr/|site-packages|\.py\b")
UNKNOWN_ID = "0123456789abcdef01234567"  # well-formed, never issued
UNKNOWN_SHARE = "AAAAAAAAAAAA"


@dataclass(frozen=True)
class Bad:
    """One bad request and what the API must answer. ``url`` may hold ``{aid}`` (a short text's
    analysis), ``{long}`` (a 70-token text's) and ``{sid}`` (a share id)."""

    name: str
    method: str
    url: str
    status: int
    field: str | None
    fragments: tuple[str, ...]
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    route: str = ""  # the OpenAPI path template it exercises (default: derived from url)
    artefact: bool = True  # False: ask the app that has no Sparsefinder artefact


def _chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    """A JSON body sent in pieces, without Content-Length (chunked transfer)."""
    yield b'{"text": "'
    for _ in range(total // size):
        yield b"a" * size
    yield b'"}'


A = "/api/analyze"
AN = "/api/analyses/{aid}"
AN_ROUTE = "/api/analyses/{analysis_id}"
# fmt: off
TABLE: list[Bad] = [
    # --------------------------------------------------------------------- POST /api/analyze
    Bad("empty text", "post", A, 400, "text", ("text is empty or whitespace only",), {"text": ""}),
    Bad("blank text", "post", A, 400, "text", ("empty or whitespace",), {"text": " \n\t\u3000"}),
    # all [UNK]: not blank, but nothing the model knows
    *(
        Bad(f"text of unknown tokens only: {what}", "post", A, 400, "text",
            ("none of this text's tokens is in the model's vocabulary", "[UNK]"), {"text": text})
        for what, text in (
            ("emoji", "\U0001f642\U0001f680 \U0001f9ea"),
            ("emoji among private-use characters", "\ue000\U0001f642 \U000f0000"),
            ("a word of 101 letters", "a" * 101),
        )
    ),
    # BERT's normaliser drops every character of Unicode category C (private use too): blank
    Bad("private-use characters only", "post", A, 400, "text", ("text is empty or whitespace",),
        {"text": "\ue000\ue001 \U000f0000"}),
    # JSON numbers Python will not convert (over 4,300 digits) are a 422
    Bad("alpha of 5,000 digits", "post", A, 422, None, ("more than 4300 digits", "at most"),
        content=b'{"text": "hi", "alpha": 1' + b"0" * 5000 + b"}", headers=JSON),
    Bad("a 5,000-digit number in a share", "post", "/api/share", 422, None,
        ("4300 digits",), content=b'{"state": {"text": "hi", "layer": ' + b"9" * 5000 + b"}}",
        headers=JSON),
    Bad("a 5,000-digit number, not JSON", "post", A, 422, None, ("4300 digits",),
        content=b'{"text": "hi", "alpha": 1' + b"0" * 5000, headers=JSON),
    Bad(
        "text over the token limit",
        "post",
        A,
        400,
        "text",
        ("text is 602 tokens long", "at most 512", "truncate=true"),
        {"text": "word " * 600},
    ),
    Bad("alpha above 2", "post", A, 400, "alpha", ("alpha must be in [1, 2]", "got 3.0"),
        {"text": "hi", "alpha": 3}),
    Bad("alpha below 1", "post", A, 400, "alpha", ("alpha must be in [1, 2]", "got 0.5"),
        {"text": "hi", "alpha": 0.5}),
    Bad("alpha NaN", "post", A, 400, "alpha", ("alpha must be in [1, 2]", "got nan"),
        content=b'{"text": "hi", "alpha": NaN}', headers=JSON),
    Bad("alpha overflows", "post", A, 400, "alpha", ("alpha must be in [1, 2]", "got inf"),
        content=b'{"text": "hi", "alpha": 1e400}', headers=JSON),
    Bad("alpha a word", "post", A, 422, "alpha", ('must be a number in [1, 2] or "own"', "'big'"),
        {"text": "hi", "alpha": "big"}),
    Bad("alpha a boolean", "post", A, 422, "alpha", ('alpha must be a number in [1, 2] or "own"',),
        {"text": "hi", "alpha": True}),
    Bad("text a number", "post", A, 422, "text", ("text must be a valid string",), {"text": 3}),
    Bad("text null", "post", A, 422, "text", ("text must be a valid string",), {"text": None}),
    Bad("text missing", "post", A, 422, "text", ("text is required",), {"alpha": 1.5}),
    Bad("causal a word", "post", A, 422, "causal", ("causal must be a valid boolean", "'maybe'"),
        {"text": "hi", "causal": "maybe"}),
    Bad("truncate a number", "post", A, 422, "truncate", ("truncate must be a valid boolean",),
        {"text": "hi", "truncate": 1}),
    Bad("unknown field", "post", A, 422, "colour", ("colour is not a field of this request",),
        {"text": "hi", "colour": "red"}),
    Bad("array body", "post", A, 422, None, ("must be a valid dictionary",), ["hi"]),
    Bad("malformed JSON", "post", A, 422, None, ("not valid JSON", "send a JSON object"),
        content=b'{"text": "hi",', headers=JSON),
    Bad("bytes not UTF-8", "post", A, 422, None, ("not valid JSON", "UTF-8"),
        content=b'{"text": "\x80\xff"}', headers=JSON),
    Bad("no body", "post", A, 422, None, ("the request body is required",), content=b""),
    Bad("lone surrogate", "post", A, 400, "text", ("text is not valid Unicode", "surrogate"),
        content=b'{"text": "ab\\ud800"}', headers=JSON),
    Bad("body over the cap", "post", A, 413, None, ("at most 1048576 bytes",),
        {"text": "a" * (2 * MIB)}),
    Bad("chunked body over the cap", "post", A, 413, None, ("at most 1048576 bytes",),
        content=b"chunked", headers=JSON),  # content: see _chunks
    Bad("wrong method", "put", A, 405, None, ("PUT is not allowed on /api/analyze",), {}),
    Bad("unknown model", "post", A, 422, "model",
        ("model 'no-such-model' is not served here", "served models: "),
        {"text": "hi", "model": "no-such-model"}),
    Bad("model a number", "post", A, 422, "model", ("model must be a valid string",),
        {"text": "hi", "model": 3}),
    Bad("start negative", "post", A, 422, "start", ("start must be greater than or equal to 0",),
        {"text": "hi", "truncate": True, "start": -1}),
    Bad("models wrong method", "post", "/api/models", 405, None,
        ("POST is not allowed on /api/models",)),
    Bad("methods unknown model", "get", "/api/methods?model=gpt-9", 422, "model",
        ("model 'gpt-9' is not served here",)),
    # --------------------------------------------------------------------- GET /healthz, methods
    Bad("healthz wrong method", "delete", "/healthz", 405, None,
        ("DELETE is not allowed on /healthz",)),
    Bad("n zero", "get", "/api/methods?n=0", 400, "n", ("n must be in [1, 512]", "got 0")),
    Bad("n huge", "get", "/api/methods?n=100000", 400, "n", ("n must be in [1, 512]",)),
    Bad("n a word", "get", "/api/methods?n=abc", 422, "n", ("n must be a valid integer",)),
    # --------------------------------------------------------------------- one analysis
    Bad("unknown id", "get", f"/api/analyses/{UNKNOWN_ID}", 404, "id",
        ("no analysis with id", "POST the text to /api/analyze again")),
    Bad("malformed id", "get", "/api/analyses/DROP%20TABLE%3B", 404, "id", ("no analysis",),
        route="/api/analyses/{analysis_id}"),
    Bad("heads: layer too big", "get", AN + "/heads/2/0", 404, "layer",
        ("layer must be in [0, 1] for this model", "got 2")),
    Bad("heads: layer negative", "get", AN + "/heads/-1/0", 404, "layer", ("got -1",)),
    Bad("heads: head too big", "get", AN + "/heads/0/4", 404, "head",
        ("head must be in [0, 3] for this model", "got 4")),
    Bad("heads: layer a word", "get", AN + "/heads/one/0", 422, "layer",
        ("layer must be a valid integer",)),
    Bad("heads: unknown id", "get", f"/api/analyses/{UNKNOWN_ID}/heads/0/0", 404, "id",
        ("no analysis with id",)),
    # a query key a route does not take is a typo, never silently ignored (app/web/deps.py)
    Bad("heads: unknown query key", "get", AN + "/heads/0/0?prat=graph", 400, "prat",
        ("unknown query parameter 'prat'", "takes: method, part")),
    Bad("models: unknown query key", "get", "/api/models?x=1", 400, "x",
        ("unknown query parameter 'x'", "takes: none")),
    Bad("pareto: layer without head", "get", AN + "/pareto?layer=0", 400, "head",
        ("give both layer and head", "head is missing")),
    Bad("pareto: head without layer", "get", AN + "/pareto?head=0", 400, "layer",
        ("layer is missing",)),
    Bad("pareto: layer too big", "get", AN + "/pareto?layer=7&head=0", 404, "layer",
        ("layer must be in [0, 1]",)),
    Bad("pareto: head a word", "get", AN + "/pareto?layer=0&head=x", 422, "head",
        ("head must be a valid integer",)),
    Bad("pareto: unknown id", "get", f"/api/analyses/{UNKNOWN_ID}/pareto", 404, "id",
        ("no analysis",)),
    Bad("roles: unknown id", "get", f"/api/analyses/{UNKNOWN_ID}/roles", 404, "id",
        ("no analysis", UNKNOWN_ID)),
    Bad("pareto: output error of the mean", "get", AN + "/pareto?output_error=true", 400,
        "output_error", ("output_error is measured per head", "give layer and head")),
    Bad("pareto: output error not a bool", "get", AN + "/pareto?layer=0&head=0&output_error=2",
        422, "output_error", ("output_error",)),
    Bad("tiles: level too big", "get", AN + "/heads/0/0/tiles/9/0/0", 404,
        "level", ("level",),
        route="/api/analyses/{analysis_id}/heads/{layer}/{head}/tiles/{level}/{ti}/{tj}"),
    Bad("tiles: unknown id", "get", f"/api/analyses/{UNKNOWN_ID}/heads/0/0/tiles/0/0/0", 404, "id",
        ("no analysis",),
        route="/api/analyses/{analysis_id}/heads/{layer}/{head}/tiles/{level}/{ti}/{tj}"),
    Bad("budgets: layer without head", "get", AN + "/budgets?layer=0", 400, "head",
        ("give both layer and head", "head is missing")),
    Bad("budgets: head too big", "get", AN + "/budgets?layer=0&head=9", 404, "head",
        ("head must be in [0, 3]",)),
    Bad("budgets: unknown id", "get", f"/api/analyses/{UNKNOWN_ID}/budgets", 404, "id",
        ("no analysis",)),
    Bad("clusters: head too big", "get", AN + "/clusters/0/9", 404, "head",
        ("head must be in [0, 3]",)),
    Bad("clusters: count a word", "get", AN + "/clusters/0/0?clusters=many", 422, "clusters",
        ("clusters must be a valid integer",)),
    Bad("clusters: unknown id", "get", f"/api/analyses/{UNKNOWN_ID}/clusters/0/0", 404, "id",
        ("no analysis",)),
    Bad("flow: token too big", "get", AN + "/flow?token=999", 404, "token",
        ("token must be a token index in [0,", "got 999")),
    Bad("flow: layer too big", "get", AN + "/flow?token=0&layer=9", 404, "layer",
        ("layer must be in [0, 1]", "got 9")),
    Bad("flow: no token", "get", AN + "/flow", 422, "token", ("token is required",)),
    Bad("flow: unknown id", "get", f"/api/analyses/{UNKNOWN_ID}/flow?token=0", 404, "id",
        ("no analysis",)),
    Bad("results: none served", "get", "/api/results", 404, "results", ("--results DIR",)),
    Bad("results head: none served", "get", "/api/results/heads/0/0", 404, "results",
        ("--results DIR",), route="/api/results/heads/{layer}/{head}"),
    Bad("metrics: no method", "get", AN + "/metrics/0/0", 422, "method", ("method is required",)),
    Bad("metrics: unknown method", "get", AN + "/metrics/0/0?method=nope", 400, "method",
        ("method must be one of window, fixed", "got 'nope'")),
    Bad("metrics: unknown parameter", "get", AN + "/metrics/0/0?method=window&colour=red", 400,
        "colour", ("has no parameter 'colour'", "its parameters are window, globals")),
    Bad("metrics: window negative", "get", AN + "/metrics/0/0?method=window&window=-4", 400,
        "window", ("window must be in [0,", "got '-4'")),
    # not a number in the plain form: the request does not match (a 422 naming the parameter)
    Bad("metrics: window a word", "get", AN + "/metrics/0/0?method=bigbird&window=abc", 422,
        "window", ("window must be an integer", "plain ASCII digits")),
    Bad("metrics: window in fullwidth digits", "get", AN + "/metrics/0/0?method=window&window=３",
        422, "window", ("window must be an integer", "plain ASCII digits")),
    Bad("metrics: globals a word", "get", AN + "/metrics/0/0?method=window&globals=maybe", 400,
        "globals", ("true or false",)),
    Bad("metrics: stride zero", "get", AN + "/metrics/0/0?method=fixed&stride=0", 400,
        "stride", ("stride must be in [1,", "got '0'")),
    Bad("metrics: c over stride", "get", AN + "/metrics/0/0?method=fixed&stride=2&c=3", 400,
        "c", ("c must be in [1, stride = 2]", "got 3")),
    Bad("metrics: unknown part", "get", AN + "/metrics/0/0?method=strided&part=zzz", 400,
        "part", ("part must be one of A1, A2, union", "got 'zzz'")),
    Bad("metrics: threshold negative", "get", AN + "/metrics/0/0?method=sf-distance&t=-1", 400,
        "t", ("t must be in [0.0, 10.0]", "got '-1'")),
    Bad("metrics: cluster count not fitted", "get",
        AN + "/metrics/0/0?method=sf-kmeans&n_clusters=3", 400, "n_clusters",
        ("n_clusters must be one of", "got '3'")),
    Bad("metrics: top_k over clusters", "get",
        AN + "/metrics/0/0?method=sf-kmeans&n_clusters=2&top_k=3", 400, "top_k",
        ("top_k must be in [1,",)),
    Bad("head: unknown method", "get", AN + "/heads/0/0?part=graph&method=topk&method=nope",
        422, "method.1", ("method.1 must be 'window'", "got 'nope'")),
    Bad("head: too many methods", "get",
        AN + "/heads/0/0?" + "&".join(["method=topk"] * (len(METHODS) + 1)),
        422, "method", (f"at most {len(METHODS)} items",)),
    Bad("head: unknown query key", "get", AN + "/heads/0/0?methods=topk", 400, "methods",
        ("unknown query parameter 'methods'", "takes: method, part")),
    Bad("summary: unknown method", "get", AN + "/summary?method=nope", 422, "method.0",
        ("method.0 must be 'window'", "got 'nope'")),
    Bad("summary: sf-* without artefact", "get", AN + "/summary?method=sf-kmeans", 404,
        "method", ("method sf-kmeans needs a Sparsefinder artefact", "its methods: window"),
        artefact=False),
    Bad("summary: too many methods", "get",
        AN + "/summary?" + "&".join(["method=topk"] * (len(METHODS) + 1)),
        422, "method", (f"at most {len(METHODS)} items",)),
    Bad("summary: unknown query key", "get", AN + "/summary?methd=topk", 400, "methd",
        ("unknown query parameter 'methd'", "takes: method")),
    Bad("summary: unknown id", "get", f"/api/analyses/{UNKNOWN_ID}/summary", 404, "id",
        ("no analysis with id",)),
    Bad("analyze: summary not a list", "post", A, 422, "summary",
        ("summary",), {"text": "The chef ran.", "summary": "window"}),
    Bad("analyze: summary of an unknown method", "post", A, 422, "summary.0",
        ("summary.0 must be 'window'", "got 'nope'"),
        {"text": "The chef ran.", "summary": ["nope"]}),
    Bad("metrics: sf-* without artefact", "get", AN + "/metrics/0/0?method=sf-distance", 404,
        "method", ("method sf-distance needs a Sparsefinder artefact", "methods: window"),
        artefact=False),
    Bad("metrics: indexer not trained here", "get", AN + "/metrics/0/0?method=indexer", 404,
        "method", ("method indexer needs a trained indexer", "sparsescope fit --method indexer")),
    Bad("metrics: layer too big", "get", AN + "/metrics/5/0?method=window", 404, "layer",
        ("layer must be in [0, 1]",)),
    Bad("metrics: unknown id", "get", f"/api/analyses/{UNKNOWN_ID}/metrics/0/0?method=window",
        404, "id", ("no analysis",)),
    Bad("raw: layer too big", "get", AN + "/raw/3/0", 404, "layer", ("layer must be in [0, 1]",)),
    Bad("raw: head too big", "get", AN + "/raw/0/8", 404, "head", ("head must be in [0, 3]",)),
    Bad("raw: text too long", "get", "/api/analyses/{long}/raw/0/0", 404, "id",
        ("at most 64 tokens",), route=AN_ROUTE + "/raw/{layer}/{head}"),
    Bad("raw: unknown id", "get", f"/api/analyses/{UNKNOWN_ID}/raw/0/0", 404, "id",
        ("no analysis",)),
    # --------------------------------------------------------------------- Host header tricks
    *(
        Bad(f"Host {host!r}", "get", "/healthz", 400, None, ("Host header", "malformed"),
            headers={"host": host})
        for host in ("[::1]evil", "[::1]:80evil", "[nope]", "localhost:abc", "localhost:99999",
                     "localhost:0", "localhost:", "user@localhost", "localhost:80:80",
                     "local host", "localhost\\", "127.0.0.1:+80")
    ),
    # --------------------------------------------------------------------- share links
    Bad("share: no state", "post", "/api/share", 422, "state", ("state is required",), {}),
    Bad("share: state a string", "post", "/api/share", 422, "state",
        ("state must be a valid dictionary",), {"state": "x"}),
    Bad("share: empty text", "post", "/api/share", 422, "state.text", ("at least 1 character",),
        {"state": {"text": ""}}),
    # blank as the analyser calls it: the same 400 and message as /api/analyze
    *(
        Bad(f"share: blank text ({what})", "post", "/api/share", 400, "state.text",
            ("text is empty or whitespace only (invisible and control characters",),
            {"state": {"text": text}})
        for what, text in (
            ("spaces", "   "),
            ("zero-width joiners", "\u200d\u200d"),
            ("a zero-width space", "\u200b"),
            ("NUL", "\x00 \x00"),
            ("a BOM and a soft hyphen", "\ufeff\u00ad"),
        )
    ),
    Bad("share: alpha above 2", "post", "/api/share", 422, "state.alpha",
        ('must be a number in [1, 2] or "own"', "got 3"), {"state": {"text": "hi", "alpha": 3}}),
    Bad("share: unknown method", "post", "/api/share", 422, "state.method",
        ("state.method must be 'window'", "got 'nope'"),
        {"state": {"text": "hi", "method": "nope"}}),
    Bad("share: layer negative", "post", "/api/share", 422, "state.layer",
        ("greater than or equal to 0",), {"state": {"text": "hi", "layer": -1}}),
    Bad("share: step a boolean", "post", "/api/share", 422, "state.lecture_step",
        ("valid integer",), {"state": {"text": "hi", "lecture_step": False}}),
    Bad("share: parameter a list", "post", "/api/share", 422, "state.params.a",
        ("true/false, a number or a short string",),
        {"state": {"text": "hi", "params": {"a": [1]}}}),
    Bad("share: parameter NaN", "post", "/api/share", 422, "state.params.t",
        ("numbers must be finite",), content=b'{"state": {"text": "hi", "params": {"t": NaN}}}',
        headers=JSON),
    Bad("share: unknown key", "post", "/api/share", 422, "state.colour", ("not a field",),
        {"state": {"text": "hi", "colour": "red"}}),
    Bad("share: lone surrogate", "post", "/api/share", 422, "state.view.v", ("valid Unicode",),
        content=b'{"state": {"text": "hi", "view": {"v": "\\udfff"}}}', headers=JSON),
    Bad("share: state over 64 KiB", "post", "/api/share", 413, "state",
        ("at most 65536 bytes",), {"state": {"text": "x" * 70_000}}),
    Bad("share: malformed id", "get", "/api/share/abc", 404, "id",
        ("a share id is 12 characters",), route="/api/share/{share_id}"),
    Bad("share: unknown id", "get", f"/api/share/{UNKNOWN_SHARE}", 404, "id",
        ("no share with id", "never created"), route="/api/share/{share_id}"),
    # --------------------------------------------------------------------- gallery (no input)
    Bad("gallery wrong method", "post", "/api/gallery", 405, None,
        ("POST is not allowed on /api/gallery",)),
    # --------------------------------------------------------------------- no such route
    Bad("no route", "get", "/api/nothing", 404, None, ("there is no page or API route",)),
]
# fmt: on


def _route(bad: Bad) -> str:
    """The OpenAPI path template a row exercises."""
    if bad.route:
        return bad.route
    path = bad.url.split("?")[0].replace("{aid}", "{analysis_id}")
    path = re.sub(r"/api/analyses/[0-9a-f]{24}", "/api/analyses/{analysis_id}", path)
    path = re.sub(r"/(heads|clusters|metrics|raw)/[^/]+/[^/]+$", r"/\1/{layer}/{head}", path)
    return path


def _make_client(tmp_path_factory, model, artefact) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("bad-input"), warmup=False)
    service = AnalysisService(settings, model=model, artefact=artefact)
    with TestClient(create_app(settings, service), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def art_app(tmp_path_factory, tiny_model, tiny_artefact) -> Iterator[TestClient]:
    yield from _make_client(tmp_path_factory, tiny_model, tiny_artefact)


@pytest.fixture(scope="module")
def plain_app(tmp_path_factory, tiny_model) -> Iterator[TestClient]:
    yield from _make_client(tmp_path_factory, tiny_model, None)


def _analyse(client: TestClient, text: str) -> str:
    r = client.post("/api/analyze", json={"text": text})
    assert r.status_code == 200, r.text
    return r.json()["id"]


@pytest.fixture(scope="module")
def ids(art_app, plain_app) -> dict[str, dict[bool, str]]:
    """Placeholders of the table, per app (True: with the artefact)."""
    short = "The chef who ran to the store was out of food."
    share = art_app.post("/api/share", json={"state": {"text": short}})
    assert share.status_code == 200, share.text
    return {
        "aid": {True: _analyse(art_app, short), False: _analyse(plain_app, short)},
        "long": {True: _analyse(art_app, "token " * 70)},
        "sid": {True: share.json()["id"]},
    }


def assert_clean_error(r, status: int, field: str | None, *fragments: str) -> str:
    """``r`` is the contract's error: status, ``{detail, field}``, fragments, no leaks."""
    assert r.status_code == status, (r.status_code, r.text[:500])
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"detail", "field"}, body
    assert body["field"] == field, body
    for fragment in fragments:
        assert fragment in body["detail"], (fragment, body["detail"])
    assert not LEAKS.search(r.text), r.text[:500]
    return body["detail"]


@pytest.mark.parametrize("bad", TABLE, ids=[b.name for b in TABLE])
def test_bad_input_is_a_readable_error(bad: Bad, art_app, plain_app, ids) -> None:
    client = art_app if bad.artefact else plain_app
    url = bad.url.format(**{k: v.get(bad.artefact, "") for k, v in ids.items()})
    kwargs: dict[str, Any] = {"headers": bad.headers}
    if bad.content == b"chunked":
        kwargs["content"] = _chunks(2 * MIB)
    elif bad.content is not None:
        kwargs["content"] = bad.content
    elif bad.json is not None:
        kwargs["json"] = bad.json
    r = client.request(bad.method.upper(), url, **kwargs)
    assert_clean_error(r, bad.status, bad.field, *bad.fragments)


def test_the_table_covers_every_route_of_the_schema(art_app) -> None:
    """A route added to the API without a bad-input row fails here."""
    paths = set(art_app.get("/openapi.json").json()["paths"])
    covered = {_route(b) for b in TABLE}
    assert paths - covered == set(), f"routes without a bad-input row: {sorted(paths - covered)}"


PAGES_404 = [
    ("/s/{id}", "This share link cannot be opened"),
    ("/embed/{id}", "This share link cannot be opened"),
    ("/gallery/{id}", "no gallery example"),
]


@pytest.mark.parametrize(("page", "says"), PAGES_404, ids=[p for p, _ in PAGES_404])
@pytest.mark.parametrize("bad_id", [UNKNOWN_SHARE, "short", "x" * 300, "%3Cscript%3E"])
def test_pages_with_a_bad_id_are_a_plain_404_page(art_app, page, says, bad_id) -> None:
    r = art_app.get(page.format(id=bad_id))
    assert r.status_code == 404, r.text[:300]
    assert r.headers["content-type"].startswith("text/html")
    assert says in r.text
    assert "<script>" not in r.text.lower()
    assert not LEAKS.search(r.text), r.text[:500]


def test_a_bad_request_leaves_the_app_serving(art_app, ids) -> None:
    """After every bad request above, good ones still work (no poisoned cache or lock)."""
    for bad in TABLE[:5]:
        assert art_app.post("/api/analyze", json=bad.json).status_code == bad.status
    assert art_app.get("/healthz").status_code == 200
    aid = ids["aid"][True]
    assert art_app.get(f"/api/analyses/{aid}/heads/1/3").status_code == 200
    r = art_app.get(f"/api/analyses/{aid}/metrics/1/3", params={"method": "window", "window": 3})
    assert r.status_code == 200 and set(r.json()) == {
        "recall",
        "sparsity",
        "exact",
        "precision",
        "mass_recall",
        "block_sparsity",
        "output_error",
    }
