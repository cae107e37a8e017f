"""The fault suite: what sparsescope does to files that are not its own, and what it does when its
own data directory is read-only, full, or its server is killed.

- Another program's file (a view-only database, an empty one carrying its own application_id,
  one with a hot write-ahead log or rollback journal, a file that is not SQLite) is refused and
  left byte for byte untouched, the database and every file beside it; the refusal says so
  truly and says what to do.
- A share database of sparsescope from before it marked its files (application_id 0, our tables)
  is adopted, with the shares its killed server left in the write-ahead log.
- A read-only data directory holding a valid share database: the server starts, existing shares
  open, new ones are a 503 with the reason.
- A full disk: 507, existing shares open, and new ones are saved once there is room again.
- kill -9 during acknowledged shares (every acknowledged share survives) is in
  tests/app/test_share.py and tests/app/test_hall.py, with a real server.

Every fault is real (module tests/app/faults.py): files written by SQLite itself and left as a
killed process leaves them, directories the operating system refuses to write, a small tmpfs.
"""

from __future__ import annotations

import sqlite3

import httpx
import pytest
from fastapi.testclient import TestClient

from sparsescope.engine.service import AnalysisService
from sparsescope.engine.store import (
    APPLICATION_ID,
    DB_NAME,
    SCHEMA_VERSION,
    ShareStore,
    ShareStoreError,
    ShareStoreUnavailable,
)
from sparsescope.web.main import create_app
from tests.app.conftest import make_settings
from tests.app.faults import (
    FOREIGN,
    is_writable,
    legacy_database,
    read_only,
    small_disk,
    snapshot,
)


def _header_ids(path) -> tuple[int, int]:
    """(application_id, user_version) as the file's header holds them (offsets 68 and 60)."""
    head = path.read_bytes()[:100]
    return int.from_bytes(head[68:72], "big"), int.from_bytes(head[60:64], "big")


# ----------------------------------------------------------------------------- foreign files


@pytest.mark.parametrize("kind", list(FOREIGN))
def test_a_file_of_another_program_is_refused_and_left_byte_for_byte(tmp_path, kind):
    path = tmp_path / DB_NAME
    FOREIGN[kind](path)
    before = snapshot(tmp_path)
    with pytest.raises(ShareStoreError) as err:
        ShareStore(path)
    assert snapshot(tmp_path) == before  # the database, its -wal, -shm, -journal: every byte
    message = str(err.value)
    assert str(path) in message and "left untouched" in message
    # and what to do about it
    assert "SPARSESCOPE_DATA_DIR" in message or "move it aside" in message, message


@pytest.mark.parametrize("kind", list(FOREIGN))
def test_serve_refuses_a_foreign_file_in_one_line_and_writes_nothing(
    tmp_path, capsys, monkeypatch, kind
):
    from bench.bench_load import free_port
    from sparsescope.cli import main
    from sparsescope.engine import service

    def accepted(*args, **kwargs):  # serve got past the store: fail rather than serve forever
        raise AssertionError(f"serve accepted {kind}")

    monkeypatch.setattr(service, "AnalysisService", accepted)
    FOREIGN[kind](tmp_path / DB_NAME)
    before = snapshot(tmp_path)
    code = main(["serve", "--data-dir", str(tmp_path), "--port", str(free_port())])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "left untouched" in err
    assert snapshot(tmp_path) == before


def test_our_own_files_are_marked_with_our_application_id(tmp_path):
    with ShareStore.in_dir(tmp_path) as store:
        store.create({"text": "marked"})
    assert _header_ids(tmp_path / DB_NAME) == (APPLICATION_ID, SCHEMA_VERSION)
    with ShareStore.in_dir(tmp_path) as store:  # and opened again
        assert store.count() == 1


def test_a_newer_schema_of_ours_is_refused_untouched(tmp_path):
    with ShareStore.in_dir(tmp_path) as store:
        store.create({"text": "from the future"})
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = snapshot(tmp_path)
    with pytest.raises(ShareStoreError, match="newer sparsescope"):
        ShareStore.in_dir(tmp_path)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("hot", [False, True], ids=["closed", "killed"])
def test_a_database_of_ours_from_before_the_mark_is_adopted(tmp_path, hot):
    texts = [f"shared before the mark {i}" for i in range(5)]
    ids = legacy_database(tmp_path / DB_NAME, texts, hot=hot)
    assert _header_ids(tmp_path / DB_NAME) == (0, 0)
    with ShareStore.in_dir(tmp_path) as store:
        assert [store.get(i).state["text"] for i in ids] == texts  # the log's shares too
        new = store.create({"text": "after the mark"})
    with ShareStore.in_dir(tmp_path) as store:
        assert store.count() == 6 and store.get(new.id) is not None
    assert _header_ids(tmp_path / DB_NAME) == (APPLICATION_ID, SCHEMA_VERSION)


def test_an_empty_file_with_a_journal_beside_it_is_left_alone(tmp_path):
    path = tmp_path / DB_NAME
    path.write_bytes(b"")
    (tmp_path / f"{DB_NAME}-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" * 64)
    before = snapshot(tmp_path)
    with pytest.raises(ShareStoreError, match="left untouched"):
        ShareStore(path)
    assert snapshot(tmp_path) == before


# ----------------------------------------------------------------------------- read-only


def _saved_shares(folder, count: int = 3) -> list[str]:
    with ShareStore.in_dir(folder) as store:
        return [store.create({"text": f"saved {i}"}).id for i in range(count)]


def test_a_read_only_data_dir_still_opens_its_shares(tmp_path):
    ids = _saved_shares(tmp_path)
    before = snapshot(tmp_path)
    with read_only(tmp_path):
        assert not is_writable(tmp_path / DB_NAME)
        with ShareStore.in_dir(tmp_path) as store:
            assert [store.get(i).state["text"] for i in ids] == ["saved 0", "saved 1", "saved 2"]
            assert store.read_only
            with pytest.raises(ShareStoreUnavailable) as err:
                store.create({"text": "new"})
        message = str(err.value)
        assert message.startswith("the share database is read-only: ")
        assert "SPARSESCOPE_DATA_DIR" in message and str(tmp_path) not in message
        assert snapshot(tmp_path) == before


def test_a_read_only_data_dir_serves_shares_and_answers_503_to_new_ones(tmp_path, tiny_model):
    ids = _saved_shares(tmp_path)
    settings = make_settings(tmp_path)
    with read_only(tmp_path):
        with TestClient(create_app(settings, AnalysisService(settings, model=tiny_model))) as c:
            r = c.get(f"/api/share/{ids[0]}")
            assert r.status_code == 200 and r.json()["state"]["text"] == "saved 0"
            assert c.get(f"/s/{ids[1]}").status_code == 200
            r = c.post("/api/share", json={"state": {"text": "a new view"}})
            assert r.status_code == 503, r.text
            assert r.json()["detail"].startswith("the share database is read-only: ")
            assert int(r.headers["retry-after"]) > 0
            assert c.post("/api/analyze", json={"text": "still analyses"}).status_code == 200


@pytest.mark.slow
def test_serve_starts_on_a_read_only_data_dir(tmp_path):
    """The real ``sparsescope serve`` on a read-only data directory (the issue: it refused to
    start, calling the file damaged)."""
    from bench.bench_load import live_server

    data = tmp_path / "data"
    data.mkdir()
    ids = _saved_shares(data)
    env = {"SPARSESCOPE_DATA_DIR": str(data), "SPARSESCOPE_WARMUP": "0"}
    with read_only(data), live_server(tmp_path / "log", tiny=True, env=env) as server:
        assert httpx.get(f"{server.url}/api/share/{ids[2]}", timeout=30).status_code == 200
        assert httpx.get(f"{server.url}/s/{ids[2]}", timeout=30).status_code == 200
        r = httpx.post(f"{server.url}/api/share", json={"state": {"text": "new"}}, timeout=30)
        assert r.status_code == 503 and "read-only" in r.json()["detail"]


# ----------------------------------------------------------------------------- a full disk


def test_a_full_disk_is_507_and_shares_are_saved_again_once_there_is_room(tmp_path, tiny_model):
    data = tmp_path / "data"
    with small_disk(data, "256k") as real:
        settings = make_settings(data)
        with TestClient(create_app(settings, AnalysisService(settings, model=tiny_model))) as c:
            first = c.post("/api/share", json={"state": {"text": "saved first"}}).json()["id"]
            store = c.app.state.share_store
            if not real:  # no tmpfs here: the database may not grow (SQLITE_FULL all the same)
                pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
                store._conn.execute(f"PRAGMA max_page_count = {pages + 2}")
            filler = data / "filler"
            codes = []
            for i in range(200):
                if real and not filler.exists():  # the rest of the disk taken by another file
                    with open(filler, "wb") as fh:
                        try:
                            fh.write(b"\0" * (1 << 20))
                        except OSError:
                            pass
                r = c.post("/api/share", json={"state": {"text": f"{i} " + "y" * 15000}})
                codes.append(r.status_code)
                if r.status_code != 200:
                    break
            assert codes[-1] == 507, codes
            assert "full" in r.json()["detail"] and str(data) not in r.json()["detail"]
            assert c.get(f"/api/share/{first}").status_code == 200  # reading keeps working
            if real:
                filler.unlink()
            else:
                store._conn.execute("PRAGMA max_page_count = 1073741823")
            r = c.post("/api/share", json={"state": {"text": "room again"}})
            assert r.status_code == 200, r.text
            assert c.get(f"/api/share/{r.json()['id']}").status_code == 200
