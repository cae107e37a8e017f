"""A browser gets a styled HTML page for an unknown path, for ``/s/`` and for a
share link that cannot be opened; API clients keep the ``{detail, field}`` JSON body."""

from __future__ import annotations

import pytest

HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.mark.parametrize("path", ["/no/such/page", "/s/", "/embed/", "/lecturex"])
def test_a_browser_gets_a_styled_page_for_an_unknown_path(client, path):
    r = client.get(path, headers=HTML)
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("text/html")
    assert "<title>sparsescope: page not found</title>" in r.text
    assert "/css/app.css" in r.text and 'lang="en"' in r.text
    assert f"no page at {path}" in r.text


@pytest.mark.parametrize("path", ["/no/such/page", "/s/", "/api/nope"])
@pytest.mark.parametrize("accept", [None, "application/json", "*/*"])
def test_api_clients_keep_the_json_body(client, path, accept):
    r = client.get(path, headers={"Accept": accept} if accept else {})
    assert r.status_code == 404 and r.headers["content-type"] == "application/json"
    assert set(r.json()) == {"detail", "field"}


def test_an_api_path_stays_json_even_for_a_browser(client):
    r = client.get("/api/nope", headers=HTML)
    assert r.status_code == 404 and r.headers["content-type"] == "application/json"


def test_a_user_path_is_escaped_in_the_page(client):
    r = client.get("/<script>alert(1)</script>", headers=HTML)
    assert r.status_code == 404 and "<script>alert(1)" not in r.text


@pytest.mark.parametrize("path", ["/s/zzzzzzzzzzzz", "/embed/zzzzzzzzzzzz"])
def test_a_bad_share_id_gets_the_styled_page(client, path):
    r = client.get(path, headers=HTML)
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert "This share link cannot be opened" in r.text and "/css/app.css" in r.text
