"""Security properties of every page and error (docs/api.md, "Security").

- Every HTML page is served with a Content-Security-Policy whose scripts come from 'self' only
  (no 'unsafe-inline', no 'unsafe-eval', no other origin).
- No page and no template has an inline script other than ``<script type="application/json">``
  data islands, no inline event handler attribute and no ``javascript:`` URL; script sources are
  same-origin paths. Pages are parsed (html.parser), templates scanned as text.
- Errors, a server bug included, never show a trace or a file path.
- ``sparsescope serve`` binds 127.0.0.1 unless told otherwise (the live check, through
  /proc/net/tcp, is in test_load.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sparsescope.engine.service import AnalysisService
from sparsescope.engine.settings import Settings
from sparsescope.web.main import create_app

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "frontend" / "templates"
LEAKS = re.compile(r"Traceback|File \"|/root|/home/|/work/|/usr/|site-packages|\.py\b")


class Scripts(HTMLParser):
    """Every <script> (attributes, body) and every attribute that could run code."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.handlers: list[str] = []
        self._open: dict[str, str | None] | None = None
        self._body: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name.startswith("on"):
                self.handlers.append(f"<{tag} {name}=...>")
            if name in ("href", "src", "action", "formaction") and value:
                if value.strip().lower().startswith("javascript:"):
                    self.handlers.append(f"<{tag} {name}={value!r}>")
        if tag == "script":
            self._open, self._body = dict(attrs), []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._body.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._open is not None:
            self.scripts.append((self._open, "".join(self._body)))
            self._open = None


def assert_scripts_are_safe(html: str) -> None:
    p = Scripts()
    p.feed(html)
    p.close()
    assert p.handlers == [], p.handlers
    for attrs, body in p.scripts:
        if attrs.get("type") == "application/json":
            assert "src" not in attrs
            json.loads(body)  # data, not code
            assert "<" not in body, "a JSON island must write < as \\u003c"
            continue
        src = attrs.get("src")
        assert src, f"inline script without type=application/json: {body[:200]!r}"
        assert body.strip() == "", f"a script with src has a body: {body[:200]!r}"
        assert src.startswith("/") and not src.startswith("//"), f"script from elsewhere: {src}"


def script_src(csp: str) -> list[str]:
    directives = {d.strip().split()[0]: d.strip().split()[1:] for d in csp.split(";") if d.strip()}
    return directives.get("script-src", directives.get("default-src", []))


@pytest.fixture(scope="module")
def client(tmp_path_factory, tiny_model) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("security"), warmup=False)
    service = AnalysisService(settings, model=tiny_model)
    with TestClient(create_app(settings, service), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def pages(client) -> dict[str, str]:
    """Every HTML page of the app: name -> path."""
    hostile = "</script><script>alert(1)</script> & <!-- \u2028"
    state = {"text": f"The chef ran. {hostile}", "layer": 1, "head": 2}
    sid = client.post("/api/share", json={"state": state}).json()["id"]
    slug = client.get("/api/gallery").json()["examples"][0]["slug"]
    return {
        "index": "/",
        "index with a hostile query": "/?text=%3C/script%3E%3Cscript%3Ealert(1)%3C/script%3E",
        "lecture": "/lecture?text=%3C/script%3E",
        "share": f"/s/{sid}",
        "embed": f"/embed/{sid}",
        "share 404": "/s/AAAAAAAAAAAA",
        "embed 404": "/embed/AAAAAAAAAAAA",
        "docs": "/docs",
        "gallery": "/gallery",
        f"gallery example {slug}": f"/gallery/{slug}",
        "gallery 404": "/gallery/no-such-example",
    }


PAGE_NAMES = [
    "index",
    "index with a hostile query",
    "lecture",
    "share",
    "embed",
    "share 404",
    "embed 404",
    "gallery",
    "gallery example",
    "gallery 404",
    "docs",
]


@pytest.mark.parametrize("name", PAGE_NAMES)
def test_html_pages_allow_scripts_from_self_only(client, pages, name):
    paths = [p for n, p in pages.items() if n == name or n.startswith(name + " ")]
    assert paths, name
    for path in paths:
        r = client.get(path)
        assert r.status_code in (200, 404), (path, r.status_code)
        assert r.headers["content-type"].startswith("text/html"), path
        csp = r.headers["content-security-policy"]
        assert script_src(csp) == ["'self'"], (path, csp)
        assert "unsafe-eval" not in csp and "object-src 'none'" in csp, csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert_scripts_are_safe(r.text)
        assert "alert(1)</script>" not in r.text


@pytest.mark.parametrize("template", sorted(p.name for p in TEMPLATES.glob("*.html")))
def test_templates_have_no_inline_script(template):
    text = (TEMPLATES / template).read_text(encoding="utf-8")
    for tag in re.findall(r"<script\b[^>]*>", text, flags=re.IGNORECASE):
        assert re.search(r'\bsrc="', tag) or 'type="application/json"' in tag, (template, tag)
    assert not re.search(r"\son[a-z]+\s*=", text, flags=re.IGNORECASE), template
    assert "javascript:" not in text.lower(), template


def test_a_server_bug_is_a_plain_500(client, monkeypatch):
    """An unexpected exception, whose message holds paths, reaches the client as the generic
    500 body only (the trace goes to the log), with the security headers."""
    service = client.app.state.service

    def broken() -> dict:
        raise RuntimeError('boom in File "/root/x/site-packages/y.py", line 3')

    monkeypatch.setattr(service, "health", broken)
    r = client.get("/healthz")
    assert r.status_code == 500
    assert r.json() == {
        "detail": "internal server error: the server hit a bug; the log has the details",
        "field": None,
    }
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert not LEAKS.search(r.text)


def test_a_share_database_failure_does_not_show_its_path(client, monkeypatch):
    from sparsescope.engine.store import ShareStoreError

    store = client.app.state.share_store

    def failing(state):
        raise ShareStoreError(f"share database {store.path}: cannot save the share: disk full")

    monkeypatch.setattr(store, "create", failing)
    r = client.post("/api/share", json={"state": {"text": "hi"}})
    assert r.status_code == 500, r.text
    assert str(store.path) not in r.text and not LEAKS.search(r.text)


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/static/../app/web/main.py"), ("get", "/static/%2e%2e/%2e%2e/etc/passwd"),
     ("get", "/js/..%2f..%2fpyproject.toml"), ("get", "/static/nope.css"), ("post", "/healthz"),
     ("get", "/api/analyses/%00/heads/0/0")],
)  # fmt: skip
def test_error_responses_show_no_path_trace_or_file(client, method, path):
    """Path traversal finds nothing, and the error names only the path that was asked for."""
    r = client.request(method.upper(), path)
    assert 400 <= r.status_code < 500, (path, r.status_code)
    assert set(r.json()) == {"detail", "field"}
    for leak in ("Traceback", "site-packages", str(ROOT), "/root", "import ", "[project]", "root:"):
        assert leak not in r.text, (leak, r.text)


def test_serve_binds_localhost_by_default(monkeypatch):
    from sparsescope.cli import build_parser
    from sparsescope.commands.serve import settings_from_args

    for name in ("SPARSESCOPE_HOST", "SPARSESCOPE_PORT"):
        monkeypatch.delenv(name, raising=False)
    args = build_parser().parse_args(["serve"])
    assert settings_from_args(args).host == "127.0.0.1"
    assert Settings().host == "127.0.0.1"
