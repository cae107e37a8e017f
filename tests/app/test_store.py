"""The share database: round trips, unguessable ids, restarts, never losing or clobbering data."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from sparsescope.engine.store import (
    DB_NAME,
    SCHEMA_VERSION,
    ShareStore,
    ShareStoreError,
    is_valid_id,
    new_share_id,
)

STATE = {"text": "The chef who ran to the store.", "alpha": 1.5, "params": {"window": 3}}


def test_create_then_get_round_trips(tmp_path):
    with ShareStore.in_dir(tmp_path) as store:
        rec = store.create(STATE)
        got = store.get(rec.id)
    assert got is not None
    assert got.id == rec.id and got.state == STATE and got.created == rec.created
    assert got.created.endswith("+00:00")


def test_creates_missing_parent_folders(tmp_path):
    data = tmp_path / "a" / "b" / "c"
    with ShareStore.in_dir(data) as store:
        store.create(STATE)
    assert (data / DB_NAME).is_file()


def test_database_settings(tmp_path):
    with ShareStore.in_dir(tmp_path) as store:
        conn = store._conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    conn = sqlite3.connect(tmp_path / DB_NAME)
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    conn.close()


def test_ids_are_unguessable_and_url_safe(tmp_path):
    drawn = [new_share_id() for _ in range(1000)]
    assert len(set(drawn)) == 1000
    with ShareStore.in_dir(tmp_path) as store:
        ids = [store.create({"text": f"t{i}"}).id for i in range(100)]
    assert len(set(ids)) == 100
    ids += drawn
    for share_id in ids:
        assert len(share_id) >= 8
        assert is_valid_id(share_id)
        assert set(share_id) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        )


@pytest.mark.parametrize(
    "bad", ["", "short", "x" * 200, "../../etc/passwd", "abc def ghij", "ab%00cdefgh", "é" * 12]
)
def test_unknown_or_malformed_ids_are_none(tmp_path, bad):
    with ShareStore.in_dir(tmp_path) as store:
        store.create(STATE)
        assert store.get(bad) is None
        assert store.get("A" * 12) is None


def test_shares_survive_reopening(tmp_path):
    with ShareStore.in_dir(tmp_path) as store:
        ids = [store.create({"text": f"t{i}"}).id for i in range(20)]
    with ShareStore.in_dir(tmp_path) as store:
        assert store.count() == 20
        assert [store.get(i).state for i in ids] == [{"text": f"t{i}"} for i in range(20)]


def test_concurrent_writers_from_threads(tmp_path):
    store = ShareStore.in_dir(tmp_path)
    ids: list[str] = []
    lock = threading.Lock()

    def work(k: int) -> None:
        for i in range(25):
            rec = store.create({"text": f"{k}-{i}"})
            with lock:
                ids.append(rec.id)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 200 and store.count() == 200
    store.close()


def test_not_a_database_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / DB_NAME
    junk = b"these are someone's notes, not a database\n" * 100
    path.write_bytes(junk)
    with pytest.raises(ShareStoreError, match=str(path)):
        ShareStore(path)
    assert path.read_bytes() == junk


def test_damaged_database_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / DB_NAME
    with ShareStore(path) as store:
        for i in range(200):
            store.create({"text": "x" * 500 + str(i)})
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # fold the WAL into the main file
    conn.close()
    raw = bytearray(path.read_bytes())
    page = 4096
    assert len(raw) > 4 * page
    raw[2 * page : 4 * page] = b"\xff" * (2 * page)  # clobber two b-tree pages
    path.write_bytes(bytes(raw))
    with pytest.raises(ShareStoreError, match=str(path)) as err:
        ShareStore(path)
    assert "untouched" in str(err.value)
    assert path.read_bytes() == bytes(raw)


def test_database_of_another_program_is_refused(tmp_path):
    path = tmp_path / DB_NAME
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(ShareStoreError, match="another program"):
        ShareStore(path)
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert tables == {"recipes"}


def test_newer_schema_is_refused(tmp_path):
    with ShareStore.in_dir(tmp_path) as store:
        store.create(STATE)
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(ShareStoreError, match="newer sparsescope"):
        ShareStore.in_dir(tmp_path)


def test_a_folder_in_place_of_the_file_is_refused(tmp_path):
    (tmp_path / DB_NAME).mkdir()
    with pytest.raises(ShareStoreError, match="not a regular file"):
        ShareStore.in_dir(tmp_path)


def test_empty_file_is_initialised(tmp_path):
    (tmp_path / DB_NAME).write_bytes(b"")
    with ShareStore.in_dir(tmp_path) as store:
        assert store.get(store.create(STATE).id) is not None


def test_closed_store_raises_a_clear_error(tmp_path):
    store = ShareStore.in_dir(tmp_path)
    store.close()
    with pytest.raises(ShareStoreError, match="closed"):
        store.create(STATE)
