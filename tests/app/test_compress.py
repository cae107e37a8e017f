"""gzip of JSON, pages and static files (app/web/compress.py): smaller bodies, the same content, and
the caching and security headers still hold."""

from __future__ import annotations

import gzip
import json
import re

import anyio
import pytest

from sparsescope.web.compress import Compress, GzipCache, accepts_gzip
from sparsescope.web.middleware import CSP

GZIP = {"Accept-Encoding": "gzip"}
PLAIN = {"Accept-Encoding": "identity"}


def raw(client, url: str, headers: dict, method: str = "GET"):
    """The response with its body as sent (not decoded)."""
    with client.stream(method, url, headers=headers) as r:
        body = b"".join(r.iter_raw())
    return r, body


def test_json_is_gzipped_for_clients_that_take_it(client, analysis):
    url = f"/api/analyses/{analysis['id']}/pareto?layer=0&head=1"
    r, packed = raw(client, url, GZIP)
    assert r.status_code == 200
    assert r.headers["content-encoding"] == "gzip"
    assert int(r.headers["content-length"]) == len(packed)
    assert "accept-encoding" in r.headers["vary"].lower()
    assert r.headers["content-security-policy"] == CSP  # the other headers are kept
    p, plain = raw(client, url, PLAIN)
    assert "content-encoding" not in p.headers and "accept-encoding" in p.headers["vary"].lower()
    assert gzip.decompress(packed) == plain and len(packed) < len(plain) / 3
    assert json.loads(plain)["layer"] == 0


def test_small_and_error_bodies_are_sent_as_they_are(client, analysis):
    r, body = raw(client, "/healthz", GZIP)
    assert "content-encoding" not in r.headers and json.loads(body)["status"] == "ok"
    r, body = raw(client, "/api/analyses/" + "0" * 24, GZIP)
    assert r.status_code == 404 and "content-encoding" not in r.headers
    assert json.loads(body)["detail"]


def test_static_files_gzipped_once_and_still_immutable(client):
    html = client.get("/").text
    plotly = json.loads(re.search(r'id="config">(.*?)</script>', html).group(1))["plotly"]
    css = re.search(r'href="(/v/[0-9a-f]{12}/static/[^"]+\.css)"', html).group(1)
    for url in (plotly, css):
        r, packed = raw(client, url, GZIP)
        assert r.status_code == 200 and r.headers["content-encoding"] == "gzip", url
        assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert r.headers["etag"].startswith('W/"')
        _, plain = raw(client, url, PLAIN)
        assert gzip.decompress(packed) == plain
        again, packed2 = raw(client, url, GZIP)
        assert packed2 == packed  # from the cache, same bytes
    # a revalidating client sends the weak ETag back: still 304
    r, _ = raw(client, css.replace(css.split("/static/")[0], ""), GZIP)
    etag = r.headers["etag"]
    assert client.get(css.replace(css.split("/static/")[0], ""),
                      headers={**GZIP, "If-None-Match": etag}).status_code == 304  # fmt: skip


def test_head_sends_headers_without_a_body(client):
    r, body = raw(client, "/", GZIP, method="HEAD")
    assert r.status_code == 200 and body == b""
    assert r.headers["content-security-policy"] == CSP


def test_ranges_are_not_compressed(client):
    html = client.get("/").text
    css = re.search(r'href="(/v/[0-9a-f]{12}/static/[^"]+\.css)"', html).group(1)
    r, body = raw(client, css, {**GZIP, "Range": "bytes=0-99"})
    assert r.status_code == 206 and "content-encoding" not in r.headers and len(body) == 100


@pytest.mark.parametrize(
    ("header", "want"),
    [("gzip", True), ("gzip, deflate, br", True), ("br;q=1, gzip;q=0.5", True), ("*", True),
     ("gzip;q=0", False), ("identity", False), ("", False), ("gzip;q=x", False)],
)  # fmt: skip
def test_accept_encoding(header, want):
    assert accepts_gzip({"headers": [(b"accept-encoding", header.encode())]}) is want


def test_one_compression_for_simultaneous_requests_of_a_file():
    calls = []
    body = b"x" * 200_000

    headers = [(b"content-type", b"text/javascript"), (b"etag", b'"v1"')]

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    mw = Compress(app, cache=GzipCache())
    real = mw.cache.put
    mw.cache.put = lambda k, v: (calls.append(k), real(k, v))

    async def one(results):
        sent = []

        async def send(m):
            sent.append(m)

        scope = {"type": "http", "path": "/f.js", "headers": [(b"accept-encoding", b"gzip")]}
        await mw(scope, None, send)
        results.append(sent[-1]["body"])

    async def main():
        results = []
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(one, results)
        return results

    results = anyio.run(main)
    assert len(calls) == 1 and len(results) == 8
    assert all(gzip.decompress(b) == body for b in results)
