"""The one table that maps domain errors to HTTP (app/web/errors.py): each class's status and
``{detail, field}`` body, the most specific class winning, hidden messages, and that a new kind
of refusal is a class plus one row."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from sparse_core.errors import ArtefactError, EmptyTextError, SparsescopeError
from sparsescope.engine.store import ShareStoreError
from sparsescope.web import errors
from sparsescope.web.main import create_app


@pytest.fixture
def raising_client(app_settings, service):
    """The app with a route that raises whatever the test puts in ``box["error"]``."""
    app = create_app(app_settings, service)
    box: dict[str, Exception] = {}

    @app.get("/raise")
    def _raise() -> None:
        raise box["error"]

    with TestClient(app, raise_server_exceptions=False) as c:
        yield c, box


@pytest.mark.parametrize(
    ("error", "status", "field"),
    [
        (SparsescopeError("alpha must be in [1, 2], got 3", field="alpha"), 400, "alpha"),
        (EmptyTextError(), 400, "text"),
        (ArtefactError("the artefact is for another model"), 400, "artefact"),
        (errors.NotFound("no analysis with id 'x'"), 404, "id"),
        (errors.Gone("saved in an older form", field="state"), 410, "state"),
        (errors.TooLarge("the state is too large", field="state"), 413, "state"),
        (errors.Invalid("state.alpha must be <= 2", field="state.alpha"), 422, "state.alpha"),
    ],
)
def test_each_domain_error_has_its_status(raising_client, error, status, field):
    client, box = raising_client
    box["error"] = error
    r = client.get("/raise")
    assert r.status_code == status
    assert r.json() == {"detail": str(error), "field": field}


def test_a_hidden_message_goes_to_the_log_only(raising_client, caplog):
    client, box = raising_client
    box["error"] = ShareStoreError("share database /srv/secret/shares.sqlite3: disk I/O error")
    r = client.get("/raise")
    assert r.status_code == 500 and "/srv/secret" not in r.text
    assert r.json()["detail"] == errors.HTTP[ShareStoreError].detail
    assert "/srv/secret/shares.sqlite3" in caplog.text


def test_a_new_refusal_is_a_class_and_one_row(raising_client, monkeypatch):
    """E.g. a rate limit: subclass, add its row, raise it; Retry-After comes from retry_after."""

    class RateLimited(SparsescopeError):
        def __init__(self, seconds: float) -> None:
            super().__init__(f"too many requests; retry in {seconds:g} s")
            self.retry_after = seconds

    monkeypatch.setitem(errors.HTTP, RateLimited, errors.Http(429))
    client, box = raising_client
    box["error"] = RateLimited(1.2)
    r = client.get("/raise")
    assert r.status_code == 429 and r.headers["retry-after"] == "2"
    assert r.json() == {
        "detail": "too many requests; retry in 1.2 s",
        "field": None,
        "retry_after": 2,
    }


def test_the_most_specific_row_wins():
    class Special(errors.NotFound):
        pass

    assert errors.http_of(Special("x")).status == 404
    assert errors.http_of(ShareStoreError("x")).status == 500  # not its base's 400
    assert errors.http_of(ValueError("x")) is None  # not a domain error: a bug, a plain 500
