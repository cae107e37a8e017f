"""Share links: page states saved in a SQLite database in the user's data directory.

One file, ``<data_dir>/shares.sqlite3``, holds a ``schema_version`` table and a ``shares`` table
(``id`` TEXT PRIMARY KEY, ``state`` JSON text, ``created`` ISO-8601 UTC).

Durability. The database runs in WAL mode with ``synchronous=FULL``: every share is one
transaction whose COMMIT fsyncs the write-ahead log before :meth:`ShareStore.create` returns, so a
share the API acknowledged (200) survives ``kill -9`` of the server and also an OS crash or power
loss. (``NORMAL`` with WAL would survive ``kill -9`` too, but may drop the last commits on power
loss; one fsync per share is cheap at the rate people share links.)

Never touching another program's file. Our files carry ``PRAGMA application_id`` =
:data:`APPLICATION_ID` and ``user_version`` = the schema version. Before a file is opened
read-write, :func:`~sparsescope.engine.store_files.inspect` reads its header and, where needed,
its schema through an immutable read-only connection: a file that is not SQLite, belongs to
another program (another ``application_id``, other objects, a hot log or journal beside a file
without our tables) or was written by a newer schema raises :class:`ShareStoreError` naming the
file, left byte for byte untouched (no checkpoint, no rollback, no ``-wal``/``-shm`` deleted). A
file of ours from before the mark (``application_id`` 0, exactly our tables) is adopted and
marked. A damaged file of ours (``PRAGMA quick_check``) is refused too.

Read-only. When the data directory or the file cannot be written (file modes, a read-only mount,
the immutable attribute), the file is opened read-only: shares open, new ones are a
:class:`ShareStoreUnavailable` (503) "the share database is read-only: …".

Bounds and faults. The store holds at most ``max_shares`` shares and ``max_bytes`` bytes of state
(:class:`ShareStoreFull`, a 507, beyond them); a full disk is the same 507, a read-only data
directory or database a :class:`ShareStoreUnavailable` (503). Reading keeps working in both cases.

Threads. FastAPI runs plain ``def`` routes in a thread pool, so one connection is shared under a
lock (``check_same_thread=False``); several server processes on one file are serialised by SQLite's
own file locks (``busy_timeout``).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .store_files import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    Kind,
    ShareStoreError,
    inspect,
    ro_uri,
    writable,
)

__all__ = [
    "APPLICATION_ID",
    "DB_NAME",
    "SCHEMA_VERSION",
    "ShareRecord",
    "ShareStore",
    "ShareStoreError",
    "ShareStoreFull",
    "ShareStoreUnavailable",
]

log = logging.getLogger(__name__)

DB_NAME = "shares.sqlite3"
#: ``secrets.token_urlsafe(9)`` -> 12 URL-safe characters, 72 random bits.
ID_BYTES = 9
#: What an id may look like; anything else is "unknown" without touching the database.
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{8,32}")
_ID_ATTEMPTS = 8


class ShareStoreFull(ShareStoreError):
    """No room for another share: the store's bounds (count, bytes) or the disk are full. Its
    message names no server path (it is shown to the client); the log has the file."""


class ShareStoreUnavailable(ShareStoreError):
    """The database cannot be written right now (a read-only data directory or file, an I/O
    error); reading may still work. Its message names no server path either."""

    retry_after = 60


#: Where the clients' messages point the operator (the path itself is only logged).
DATA_DIR_WORDS = "the server's data directory (--data-dir / SPARSESCOPE_DATA_DIR)"


@dataclass(frozen=True)
class ShareRecord:
    """One saved share: its id, the state as JSON text and the UTC creation time (ISO 8601)."""

    id: str
    state_json: str
    created: str

    @property
    def state(self) -> Any:
        return json.loads(self.state_json)


def new_share_id() -> str:
    """A fresh, unguessable, URL-safe id (12 characters from :mod:`secrets`)."""
    return secrets.token_urlsafe(ID_BYTES)


def is_valid_id(share_id: str) -> bool:
    return ID_PATTERN.fullmatch(share_id) is not None


class ShareStore:
    """The share database at ``path`` (created with its parent folders on first use)."""

    def __init__(
        self, path: str | Path, *, max_shares: int | None = None, max_bytes: int | None = None
    ) -> None:
        self.path = Path(path).expanduser()
        self.max_shares = max_shares
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self.read_only = False
        self._open()
        self._shares, self._bytes = self._usage()

    @classmethod
    def in_dir(cls, data_dir: str | Path, **bounds: int | None) -> ShareStore:
        """The store of a data directory: ``<data_dir>/shares.sqlite3``."""
        return cls(Path(data_dir).expanduser() / DB_NAME, **bounds)

    def _usage(self) -> tuple[int, int]:
        """(shares, bytes of state) in the file now."""
        with self._lock:
            row = (
                self._connection()
                .execute(
                    "SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(state AS BLOB))), 0) FROM shares"
                )
                .fetchone()
            )
        return int(row[0]), int(row[1])

    @property
    def usage(self) -> dict[str, int | None]:
        """What the store holds and may hold (``None``: unbounded)."""
        return {
            "shares": self._shares,
            "bytes": self._bytes,
            "max_shares": self.max_shares,
            "max_bytes": self.max_bytes,
        }

    def _check_room(self, size: int) -> None:
        if self.max_shares is not None and self._shares + 1 > self.max_shares:
            raise ShareStoreFull(
                f"share storage is full: it holds {self._shares} shares, the most this server "
                f"keeps (SPARSESCOPE_SHARE_MAX_COUNT); no new share can be saved until its "
                "operator raises the bound or removes old shares"
            )
        if self.max_bytes is not None and self._bytes + size > self.max_bytes:
            raise ShareStoreFull(
                f"share storage is full: {self._bytes} of at most {self.max_bytes} bytes "
                f"(SPARSESCOPE_SHARE_MAX_BYTES) are used and this share needs {size}; no new "
                "share can be saved until its operator raises the bound or removes old shares"
            )

    def _write_failure(self, exc: sqlite3.Error) -> ShareStoreError:
        """A failed write as the client may see it (full: 507; read-only, I/O: 503); the log
        names the file."""
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        log.error("share database %s: cannot save a share: %s", self.path, exc)
        if primary == sqlite3.SQLITE_FULL or "full" in str(exc).lower():
            return ShareStoreFull(
                f"cannot save the share: the disk of {DATA_DIR_WORDS} is full; shares can "
                "still be opened, and new ones saved once its operator frees space"
            )
        if primary in _UNWRITABLE:
            return ShareStoreUnavailable(
                f"cannot save the share: {DATA_DIR_WORDS} cannot be written right now "
                f"({_sqlite_reason(primary)}); shares can still be opened; try again later"
            )
        return self._fail(f"cannot save the share: {exc}")

    # -- opening -------------------------------------------------------------------------------

    def _fail(self, what: str) -> ShareStoreError:
        return ShareStoreError(f"share database {self.path}: {what}")

    def _open(self) -> None:
        """Inspect the file without writing (:func:`~.store_files.inspect`), then open it:
        read-write when its folder and file can be written, else read-only (:attr:`read_only`:
        shares open, new ones are a :class:`ShareStoreUnavailable`)."""
        if not self.path.parent.is_dir():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise self._fail(f"cannot create its folder: {exc.strerror or exc}") from None
        kind = inspect(self.path)
        self.read_only = not writable(self.path)
        if self.read_only and kind is Kind.NEW:
            raise self._fail(
                "cannot be created: its folder is read-only; point --data-dir / "
                "SPARSESCOPE_DATA_DIR at a writable folder"
            )
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            raise self._fail(f"cannot be opened: {exc}") from None
        try:
            self._check(conn)
            if not self.read_only:
                self._ensure_schema(conn, kind)
                self._configure(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise self._fail(
                f"is unreadable or damaged ({exc}); it was left untouched: move it aside "
                "(or restore a backup) and start again"
            ) from None
        except ShareStoreError:
            conn.close()
            raise
        self._conn = conn
        how = "read-only" if self.read_only else "read-write"
        log.info("share database %s open %s (schema %d)", self.path, how, SCHEMA_VERSION)

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE ... COMMIT).
        opts: dict[str, Any] = {"isolation_level": None, "check_same_thread": False}
        if not self.read_only:
            return sqlite3.connect(str(self.path), timeout=10.0, **opts)
        conn = sqlite3.connect(ro_uri(self.path, immutable=False), uri=True, **opts)
        try:  # read-only: with the log's shares where SQLite can read it without writing
            conn.execute("SELECT COUNT(*) FROM shares").fetchone()
            return conn
        except sqlite3.Error:  # a WAL database needs its -shm, which cannot be created here
            conn.close()
            return sqlite3.connect(ro_uri(self.path, immutable=True), uri=True, **opts)

    def _check(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA busy_timeout = 10000")  # a connection setting: the file is not written
        problem = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if problem != "ok":
            raise self._fail(
                f"is damaged (quick_check: {problem}); it was left untouched: move it aside "
                "(or restore a backup) and start again"
            )

    def _configure(self, conn: sqlite3.Connection) -> None:
        """WAL and FULL sync, once the file is known to be ours (:meth:`_ensure_schema`)."""
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # e.g. a file system without shared memory
            log.warning("share database %s: WAL unavailable, journal mode is %s", self.path, mode)
        conn.execute("PRAGMA synchronous = FULL")

    def _ensure_schema(self, conn: sqlite3.Connection, kind: Kind) -> None:
        """Create the tables of a new file; mark a file of ours from before the mark (its
        ``application_id`` and ``user_version``); refuse a newer schema of ours."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            if kind is Kind.NEW:
                conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
                conn.execute(
                    "CREATE TABLE shares ("
                    " id TEXT PRIMARY KEY,"
                    " state TEXT NOT NULL,"
                    " created TEXT NOT NULL"
                    ")"
                )
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
                log.info("created share database %s", self.path)
            row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            version = max(conn.execute("PRAGMA user_version").fetchone()[0], row[0] or 0)
            if version > SCHEMA_VERSION:  # the log of a file of ours may hold a newer header
                raise self._fail(
                    f"was written by a newer sparsescope (schema version {version}; this one "
                    f"reads up to {SCHEMA_VERSION}): upgrade sparsescope"
                )
            if kind is not Kind.OURS or version != SCHEMA_VERSION:
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                if kind is Kind.LEGACY:
                    log.info("share database %s marked as sparsescope's", self.path)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # -- use -----------------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise self._fail("is closed")
        return self._conn

    def create(self, state: Mapping[str, Any] | str) -> ShareRecord:
        """Save ``state`` (a JSON-able mapping, or JSON text) in one durable transaction."""
        state_json = (
            state
            if isinstance(state, str)
            else json.dumps(state, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        )
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        size = len(state_json.encode("utf-8", "surrogatepass"))
        with self._lock:
            conn = self._connection()
            if self.read_only:
                raise ShareStoreUnavailable(
                    f"the share database is read-only: {DATA_DIR_WORDS} or its file cannot be "
                    "written; shares can still be opened, and new ones saved once its operator "
                    "makes it writable"
                )
            self._check_room(size)
            for _ in range(_ID_ATTEMPTS):
                share_id = new_share_id()
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute(
                        "INSERT INTO shares (id, state, created) VALUES (?, ?, ?)",
                        (share_id, state_json, created),
                    )
                    conn.execute("COMMIT")
                except sqlite3.IntegrityError:  # an id collision (2**-72): draw again
                    conn.execute("ROLLBACK")
                    continue
                except sqlite3.Error as exc:
                    if conn.in_transaction:
                        try:
                            conn.execute("ROLLBACK")
                        except sqlite3.Error:  # the failed COMMIT may have rolled back already
                            pass
                    raise self._write_failure(exc) from None
                self._shares += 1
                self._bytes += size
                return ShareRecord(share_id, state_json, created)
        raise self._fail(f"no free id after {_ID_ATTEMPTS} draws")  # pragma: no cover

    def get(self, share_id: str) -> ShareRecord | None:
        """The share ``share_id``, or None when the id is unknown or malformed."""
        if not is_valid_id(share_id):
            return None
        with self._lock:
            try:
                row = (
                    self._connection()
                    .execute("SELECT id, state, created FROM shares WHERE id = ?", (share_id,))
                    .fetchone()
                )
            except sqlite3.Error as exc:
                raise self._fail(f"cannot read share {share_id}: {exc}") from None
        return None if row is None else ShareRecord(row[0], row[1], row[2])

    def count(self) -> int:
        with self._lock:
            return int(self._connection().execute("SELECT COUNT(*) FROM shares").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> ShareStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: SQLite's primary result codes of a database that cannot be written now (a 503, not a 507).
_UNWRITABLE = (
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PERM,
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
)


def _sqlite_reason(primary: int | None) -> str:
    return {
        sqlite3.SQLITE_READONLY: "it is read-only",
        sqlite3.SQLITE_IOERR: "an I/O error",
        sqlite3.SQLITE_CANTOPEN: "a file cannot be opened",
        sqlite3.SQLITE_PERM: "permission denied",
        sqlite3.SQLITE_BUSY: "the database is locked by another process",
        sqlite3.SQLITE_LOCKED: "the database is locked",
    }.get(primary, "a database error")
