"""Real faults for the fault suite (tests/app/test_faults.py): other programs' SQLite files in the
states they leave behind, a read-only data directory, a full disk.

Nothing here is a stand-in: the files are written by SQLite itself (a hot write-ahead log or
rollback journal is what a process killed mid-transaction leaves), a read-only directory is one
the operating system refuses writes to (file modes for a normal user; for root, who ignores
them, the immutable attribute or a read-only bind mount), a full disk is a small tmpfs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

# ----------------------------------------------------------------------------- snapshots


def snapshot(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` (the database and its -wal, -shm, -journal) -> its sha256."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


# ----------------------------------------------------------------------------- foreign files


def _sqlite_child(path: Path, script: str) -> None:
    """Run ``script`` (SQL statements, ';'-separated) on ``path`` in a child process that then
    dies without closing the database (``os._exit``): what a killed program leaves behind."""
    code = (
        "import os, sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.executescript(sys.argv[2])\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path), script], check=True, timeout=60)


def view_only(path: Path) -> None:
    """A database whose only object is a view (no table of its own)."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIEW answers AS SELECT 42 AS answer")
    conn.commit()
    conn.close()


def empty_with_its_own_ids(path: Path) -> None:
    """An empty database that another program marked as its own (application_id, user_version)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234567")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()


def hot_wal(path: Path) -> None:
    """Another program's WAL database, killed with commits still in its write-ahead log."""
    _sqlite_child(
        path,
        "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;"
        "CREATE TABLE notes (body TEXT);"
        "INSERT INTO notes VALUES ('only in the log');"
        "INSERT INTO notes SELECT body || ' too' FROM notes;",
    )
    assert Path(f"{path}-wal").stat().st_size > 0, "the child left no write-ahead log"


def hot_journal(path: Path) -> None:
    """Another program's rollback-journal database, killed in the middle of a transaction that
    had already written pages of the main file (a hot journal to roll back)."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.executemany("INSERT INTO notes VALUES (?)", [("x" * 500,) for _ in range(400)])
    conn.commit()
    conn.close()
    _sqlite_child(
        path,
        "PRAGMA journal_mode = DELETE; PRAGMA cache_size = 2;"
        "BEGIN; UPDATE notes SET body = 'changed ' || body; "
        "INSERT INTO notes SELECT body FROM notes;",
    )
    journal = Path(f"{path}-journal")
    assert journal.exists() and journal.stat().st_size > 0, "the child left no journal"


def not_sqlite(path: Path) -> None:
    path.write_bytes(b"these are someone's notes, not a database\n" * 100)


#: Other programs' files in the states they leave behind (name -> maker).
FOREIGN: dict[str, Callable[[Path], None]] = {
    "a view-only database": view_only,
    "an empty database with its own application_id": empty_with_its_own_ids,
    "a database with a hot WAL": hot_wal,
    "a database with a hot rollback journal": hot_journal,
    "not a SQLite file": not_sqlite,
}


def legacy_database(path: Path, texts: list[str], *, hot: bool = False) -> list[str]:
    """A share database as sparsescope wrote it before it marked its files (application_id 0,
    user_version 0, a ``schema_version`` table, WAL); ``hot``: its server was killed, the last
    shares only in the write-ahead log. The ids of the shares."""
    ids = [f"legacyid{i:04d}" for i in range(len(texts))]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute(
        "CREATE TABLE shares ( id TEXT PRIMARY KEY, state TEXT NOT NULL, created TEXT NOT NULL)"
    )
    conn.execute("INSERT INTO schema_version (version) VALUES (1)")
    conn.execute("COMMIT")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    rows = "".join(
        f"INSERT INTO shares VALUES ('{i}', '{{\"text\": \"{t}\"}}', '2025-01-01T00:00:00+00:00');"
        for i, t in zip(ids, texts, strict=True)
    )
    if hot:
        _sqlite_child(path, "PRAGMA wal_autocheckpoint = 0;" + rows)
    else:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.executescript(rows)
        conn.close()
    return ids


# ----------------------------------------------------------------------------- read-only


def _run(*cmd: str) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[str]:
    """``folder`` and its files made read-only for this process and its children, by the
    operating system; yields how (``chmod``, ``chattr``, ``mount``). Restored afterwards."""
    files = [p for p in folder.iterdir() if p.is_file()]
    if os.geteuid() != 0:  # file modes bind a normal user
        modes = {p: p.stat().st_mode for p in [folder, *files]}
        for p in files:
            p.chmod(0o444)
        folder.chmod(0o555)
        try:
            yield "chmod"
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    # root ignores file modes: the immutable attribute (ext4, xfs, btrfs) binds root too
    if _run("chattr", "+i", *map(str, files), str(folder)):
        try:
            yield "chattr"
        finally:
            _run("chattr", "-i", str(folder), *map(str, files))
        return
    if _run("mount", "--bind", str(folder), str(folder)):
        try:
            if not _run("mount", "-o", "remount,bind,ro", str(folder)):
                raise RuntimeError(f"cannot make {folder} read-only (remount,bind,ro failed)")
            yield "mount"
        finally:
            _run("umount", str(folder))
        return
    raise RuntimeError(f"cannot make {folder} read-only here (no chattr, no bind mount as root)")


def is_writable(path: Path) -> bool:
    """Whether this process can really write ``path`` (a probe, not the mode bits)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except OSError:
        return False
    os.close(fd)
    return True


# ----------------------------------------------------------------------------- a full disk


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "512k") -> Iterator[bool]:
    """A tmpfs of ``size`` mounted on ``folder`` (a disk that really fills: ENOSPC); yields
    False when no file system can be mounted here (not root), and the caller bounds the
    database instead (SQLite's ``max_page_count``: SQLITE_FULL, the same error)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                     str(folder)):  # fmt: skip
        yield False
        return
    try:
        yield True
    finally:
        _run("umount", "-l", str(folder))
