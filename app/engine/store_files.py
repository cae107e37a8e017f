"""Whose file is this? The share database's file inspected without writing a byte.

SQLite changes a file merely by opening it read-write: it rolls back a hot rollback journal,
replays and checkpoints a write-ahead log, deletes the ``-wal`` and ``-shm`` files beside it.
So before :class:`~sparsescope.engine.store.ShareStore` opens a file read-write it is read here
with nothing that can write:

- its first 100 bytes (the database header, https://www.sqlite.org/fileformat.html §1.3):
  the magic string, ``user_version`` at offset 60 and ``application_id`` at offset 68, both
  4-byte big-endian;
- where the header cannot tell (``application_id`` 0: a file of sparsescope from before it
  marked its files, or another program's), its schema through an *immutable* read-only
  connection (``file:…?mode=ro&immutable=1``: no lock, no journal, no log is read or written);
- the ``-wal`` and ``-journal`` files beside it (a killed program's unfinished work).

Verdicts (:class:`Kind`): ``NEW`` (no file, or an empty one with nothing beside it: created),
``OURS`` (our ``application_id``), ``LEGACY`` (``application_id`` 0 and exactly our tables:
adopted, then marked). Anything else raises :class:`ShareStoreError` whose message says the file
was left untouched and what to do.
"""

from __future__ import annotations

import enum
import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from sparse_core.errors import SparsescopeError

#: "SpSc": the ``application_id`` of sparsescope's share databases (PRAGMA application_id).
APPLICATION_ID = 0x53705363
#: The schema this version writes (``PRAGMA user_version``; older files: ``schema_version``).
SCHEMA_VERSION = 1
SQLITE_MAGIC = b"SQLite format 3\x00"
#: Our tables; anything else in a file with ``application_id`` 0 makes it another program's.
OUR_TABLES = frozenset({"schema_version", "shares"})
#: Files SQLite keeps beside a database that hold unfinished work.
SIDECARS = ("-wal", "-journal")

LEAVE = (
    "it was left untouched (not a byte written): move it aside, or point --data-dir / "
    "SPARSESCOPE_DATA_DIR at another folder"
)


class ShareStoreError(SparsescopeError):
    """The share database cannot be opened or written (names the file and what is wrong)."""


class Kind(enum.Enum):
    NEW = "new"
    OURS = "ours"
    LEGACY = "legacy"


def header_ids(head: bytes) -> tuple[int, int]:
    """(application_id, user_version) of a database header (its first 100 bytes)."""
    return int.from_bytes(head[68:72], "big"), int.from_bytes(head[60:64], "big")


def ro_uri(path: Path, *, immutable: bool) -> str:
    """An SQLite URI that opens ``path`` read-only (``immutable``: without locks or journals)."""
    return f"file:{quote(str(path.resolve()))}?mode=ro" + ("&immutable=1" if immutable else "")


def _sidecars(path: Path) -> list[str]:
    """The names of the non-empty ``-wal``/``-journal`` files beside ``path``."""
    found = []
    for suffix in SIDECARS:
        side = Path(f"{path}{suffix}")
        try:
            if side.stat().st_size > 0:
                found.append(side.name)
        except OSError:
            continue
    return found


def inspect(path: Path) -> Kind:
    """What ``path`` is (see the module doc); never opens it for writing."""

    def refuse(what: str) -> ShareStoreError:
        return ShareStoreError(f"share database {path}: {what}; {LEAVE}")

    if not os.path.lexists(path):
        return Kind.NEW
    if not path.is_file():
        raise refuse("exists but is not a regular file")
    try:
        with path.open("rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        raise refuse(f"cannot be read ({exc.strerror or exc})") from None
    sidecars = _sidecars(path)
    if not head:  # what sqlite itself leaves after an interrupted first open
        if sidecars:
            raise refuse(f"is empty but has unfinished work beside it ({', '.join(sidecars)})")
        return Kind.NEW
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        raise refuse("is not a SQLite database (its header is not SQLite's)")
    app_id, version = header_ids(head)
    if app_id == APPLICATION_ID:
        if version > SCHEMA_VERSION:
            raise refuse(_newer(version))
        return Kind.OURS
    if app_id != 0:
        raise refuse(
            f"is a SQLite database of another program (application_id {app_id:#010x}, "
            f"user_version {version}; sparsescope's is {APPLICATION_ID:#010x})"
        )
    objects, schema_version = _schema(path, refuse)
    if not objects and version == 0:
        if sidecars:
            raise refuse(
                f"has no tables of its own but unfinished work beside it ({', '.join(sidecars)}):"
                " another program's database"
            )
        return Kind.NEW
    tables = {name for kind, name in objects if kind == "table"}
    others = [n for k, n in objects if k != "table" or n not in OUR_TABLES]
    if tables != OUR_TABLES or others or version != 0:
        listed = ", ".join(f"{k} {n}" for k, n in objects[:6]) or "no tables"
        raise refuse(f"is a SQLite database of another program ({listed}; user_version {version})")
    if schema_version is None:
        raise refuse("has an empty schema_version table")
    if schema_version > SCHEMA_VERSION:
        raise refuse(_newer(schema_version))
    return Kind.LEGACY


def _newer(version: int) -> str:
    return (
        f"was written by a newer sparsescope (schema version {version}; this one reads up to "
        f"{SCHEMA_VERSION}): upgrade sparsescope"
    )


def _schema(path: Path, refuse) -> tuple[list[tuple[str, str]], int | None]:
    """The (type, name) of each schema object except SQLite's own, and ``MAX(version)`` of a
    ``schema_version`` table, read through an immutable connection."""
    try:
        conn = sqlite3.connect(ro_uri(path, immutable=True), uri=True)
    except sqlite3.Error as exc:
        raise refuse(f"cannot be read ({exc})") from None
    try:
        objects = [
            (str(t), str(n))
            for t, n in conn.execute("SELECT type, name FROM sqlite_master ORDER BY rowid")
            if not str(n).startswith("sqlite_")
        ]
        version = None
        if ("table", "schema_version") in objects:
            row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            version = None if row is None or row[0] is None else int(row[0])
        return objects, version
    except sqlite3.Error as exc:
        raise refuse(f"is unreadable or damaged ({exc})") from None
    finally:
        conn.close()


def writable(path: Path) -> bool:
    """Whether this process can write ``path``'s folder and the file itself (a probe: as root
    the mode bits say nothing, a read-only mount or the immutable attribute still refuse).
    Writes nothing to the file; creates and removes a probe file in the folder."""
    folder = path.parent
    try:
        fd = os.open(folder / f".{path.name}.probe-{os.getpid()}", os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError:
        return False
    os.close(fd)
    try:
        os.unlink(folder / f".{path.name}.probe-{os.getpid()}")
    except OSError:
        return False
    if path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # opened, nothing written
        except OSError:
            return False
        os.close(fd)
    return True
