"""Opening a brickdl tuning database from Python: the one place where the Python side
(results/ figure scripts, experiments/baselines/, the tests' synthetic database) checks that a
file is a brickdl database of a schema version it knows.

The schema and its version come from core/store/schema.sql, the file the C++ store embeds
(an installed copy sits next to this module): bumping the version is one edit there.

    conn = brickdl_store.open_db(path)                          # read-only
    conn = brickdl_store.open_db(path, write=True, create=True)  # created from the schema

Every refusal raises StoreError with a message that starts with the file's path. Only the
standard library is used: these scripts run where the Python package brickdl (whose
brickdl.Database reads through the C++ store) is not built: under Debian's /usr/bin/python3
with its matplotlib, in framework environments (experiments/baselines/), and on the GPU machine
of the device bundle (docs/python.md, "Why the figure scripts keep results/brickdl_store.py").
"""
import functools
import os
import re
import sqlite3
import urllib.parse

APPLICATION = "brickdl"

HERE = os.path.dirname(os.path.abspath(__file__))
# The source tree's schema first, then the copy installed next to this module.
SCHEMA_PATHS = (os.path.normpath(os.path.join(HERE, "..", "core", "store", "schema.sql")),
                os.path.join(HERE, "schema.sql"))

# The schema's meta statement: ... ('schema_version', '<number>') ...
_VERSION_PATTERN = re.compile(r"\('schema_version',\s*'(\d+)'\)")


class StoreError(Exception):
    """A file cannot be used as a brickdl tuning database; the message names the file."""


# ---- the schema ------------------------------------------------------------------------

def schema_path():
    """The schema file (core/store/schema.sql)."""
    for path in SCHEMA_PATHS:
        if os.path.isfile(path):
            return path
    raise StoreError(f"{SCHEMA_PATHS[0]}: the brickdl schema file is missing (looked there "
                     f"and at {SCHEMA_PATHS[1]}); reinstall brickdl")


@functools.lru_cache(maxsize=None)
def schema_sql():
    """The schema script: every table of the current version and the meta rows."""
    with open(schema_path(), encoding="utf-8") as f:
        return f.read()


def parse_schema_version(sql, where="schema.sql"):
    """The version a schema script states in its meta statement (exactly once)."""
    found = _VERSION_PATTERN.findall(sql)
    if len(found) != 1:
        raise StoreError(f"{where}: states ('schema_version', '<number>') {len(found)} times, "
                         "expected once")
    return int(found[0])


@functools.lru_cache(maxsize=None)
def schema_version():
    """The newest schema version these scripts read and write (from the schema file)."""
    return parse_schema_version(schema_sql(), schema_path())


# ---- opening ---------------------------------------------------------------------------

def open_db(path, write=False, create=False, timeout=10.0):
    """Opens the tuning database at `path` and checks it; returns an sqlite3.Connection whose
    rows are sqlite3.Row (by index or by column name).

    write=False: read-only (the file must exist and is never written). write=True: read-write;
    with create=True a missing or empty file is created from the schema file, meta rows
    included. `timeout`: seconds a statement waits for another connection's lock.
    Raises StoreError for a missing, foreign, damaged or newer-schema database."""
    if create and not write:
        raise ValueError("open_db: create=True needs write=True")
    if not os.path.isfile(path) and not create:
        raise StoreError(f"{path}: no such database file (run brickdl-tune first, or give "
                         "the path of an existing tuning database)")
    try:
        if write:
            conn = sqlite3.connect(path, timeout=timeout)
        else:
            conn = _connect_read_only(path, timeout)
    except sqlite3.Error as e:
        raise StoreError(f"{path}: cannot open it ({e})") from None
    conn.row_factory = sqlite3.Row
    try:
        if create and not _tables(conn, path):
            _create(conn, path)
        _check(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _needs_write_access(error):
    """Whether SQLite failed for want of writing (a WAL database's -shm file in a read-only
    folder or mount), not because of the file's content."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (8, 14)  # SQLITE_READONLY, SQLITE_CANTOPEN
    text = str(error)
    return "readonly database" in text or "unable to open" in text


def _connect_read_only(path, timeout):
    """A read-only connection (mode=ro). Where that cannot read the file (a read-only folder
    or mount), SQLite's immutable mode, which reads the database file alone: refused when
    the -wal file holds data it would silently leave out (as the C++ store does)."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(path))
    conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=timeout)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.Error as e:
        if not _needs_write_access(e):
            return conn  # a garbage or foreign file: the checks that follow say so
        conn.close()
    wal = path + "-wal"
    if os.path.isfile(wal) and os.path.getsize(wal) > 0:
        raise StoreError(f"{path}: cannot be read without write access: its write-ahead log "
                         f"{wal} holds {os.path.getsize(wal)} bytes of data that SQLite reads "
                         "only through a -shm file, which cannot be created in its folder; "
                         "copy the database with its -wal file to a writable folder and read "
                         "the copy")
    return sqlite3.connect(uri + "?immutable=1", uri=True, timeout=timeout)


def _tables(conn, path):
    try:
        return [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path}: not a brickdl tuning database ({e})") from None


def _statements(sql):
    """The statements of a script, one by one (so that they can run in one transaction)."""
    pending = ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""
    rest = [line for line in pending.splitlines() if not line.strip().startswith("--")]
    if "".join(rest).strip():
        raise StoreError(f"{schema_path()}: ends with an incomplete statement")


def _create(conn, path):
    """Creates the schema in an empty database, under the write lock: of two processes
    creating the same new file, the second finds the tables and leaves them."""
    isolation = conn.isolation_level
    conn.isolation_level = None  # transactions by hand: one for the whole script
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not _tables(conn, path):
                for statement in _statements(schema_sql()):
                    conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as e:
        raise StoreError(f"{path}: cannot create the tuning database ({e})") from None
    finally:
        conn.isolation_level = isolation


def _check(conn, path):
    """The meta rows: application 'brickdl' and a schema version no newer than ours."""
    try:
        meta = {r[0]: r[1] for r in conn.execute("SELECT key, value FROM meta")}
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path}: not a brickdl tuning database ({e})") from None
    if meta.get("application") != APPLICATION:
        raise StoreError(f"{path}: not a brickdl tuning database (meta.application is "
                         f"{meta.get('application')!r}, expected {APPLICATION!r})")
    text = meta.get("schema_version")
    if text is None or not str(text).isdigit():
        raise StoreError(f"{path}: a damaged brickdl tuning database (meta.schema_version is "
                         f"{text!r}, expected a number); restore it from a copy")
    version = int(text)
    if version > schema_version():
        raise StoreError(f"{path}: schema version {version} is newer than these scripts "
                         f"support ({schema_version()}); update brickdl")
    return version
