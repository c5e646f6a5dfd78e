"""results/brickdl_store.py: the schema version comes from core/store/schema.sql, a created
database has the schema's meta rows, and foreign, damaged or newer databases are refused with
one error class that names the file."""
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))

import brickdl_store as store  # noqa: E402

SCHEMA = os.path.join(ROOT, "core", "store", "schema.sql")


def meta_of(path):
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())
    finally:
        conn.close()


def set_meta(path, key, value):
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))
    conn.commit()
    conn.close()


class SchemaTest(unittest.TestCase):
    def test_version_is_read_from_the_schema_file(self):
        self.assertEqual(os.path.realpath(store.schema_path()), os.path.realpath(SCHEMA))
        with open(SCHEMA) as f:
            stated = re.findall(r"'schema_version', '(\d+)'", f.read())
        self.assertEqual(len(stated), 1)
        self.assertEqual(store.schema_version(), int(stated[0]))

    def test_the_version_must_be_stated_once(self):
        self.assertEqual(store.parse_schema_version("VALUES ('schema_version', '7');"), 7)
        with self.assertRaisesRegex(store.StoreError, "x.sql: states .* 0 times"):
            store.parse_schema_version("CREATE TABLE t (a);", "x.sql")
        with self.assertRaisesRegex(store.StoreError, "2 times"):
            store.parse_schema_version("('schema_version', '1') ('schema_version', '2')")


class OpenTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "t.db")

    def tearDown(self):
        self.tmp.cleanup()

    def test_created_database_has_the_schema_and_its_meta_rows(self):
        conn = store.open_db(self.path, write=True, create=True)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE "
                                             "type = 'table'")}
        conn.close()
        self.assertTrue({"meta", "runs", "measurements", "baselines"} <= tables, tables)
        self.assertEqual(meta_of(self.path), {"application": "brickdl",
                                              "schema_version": str(store.schema_version())})
        # Opening it again (read-only, or to create) changes nothing and adds no meta row.
        store.open_db(self.path).close()
        store.open_db(self.path, write=True, create=True).close()
        self.assertEqual(len(meta_of(self.path)), 2)

    def test_an_empty_file_is_created_when_asked_and_refused_otherwise(self):
        open(self.path, "wb").close()
        with self.assertRaisesRegex(store.StoreError, "^" + re.escape(self.path) + ": not a "
                                    "brickdl tuning database"):
            store.open_db(self.path)
        store.open_db(self.path, write=True, create=True).close()
        self.assertEqual(meta_of(self.path)["application"], "brickdl")

    def test_read_only_creates_nothing_and_writes_nothing(self):
        with self.assertRaisesRegex(store.StoreError, "no such database file"):
            store.open_db(self.path)
        with self.assertRaisesRegex(store.StoreError, "no such database file"):
            store.open_db(self.path, write=True)
        self.assertFalse(os.path.exists(self.path))
        with self.assertRaises(ValueError):
            store.open_db(self.path, create=True)
        store.open_db(self.path, write=True, create=True).close()
        conn = store.open_db(self.path)
        with self.assertRaises(sqlite3.OperationalError):
            conn.execute("INSERT INTO targets (fingerprint, backend) VALUES ('x', 'cpu')")
        conn.close()

    def _unprivileged(self, body):
        """Runs body() in a child that permission bits apply to (root drops to `nobody`);
        returns its exit status (77: cannot drop privileges)."""
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                if os.geteuid() == 0:
                    os.setgroups([])
                    os.setgid(65534)
                    os.setuid(65534)
                code = body()
            except BaseException as e:  # noqa: B902 - reported through the exit status
                sys.stderr.write(f"child: {e}\n")
                code = 77 if isinstance(e, PermissionError) else 1
            os._exit(code)
        return os.waitpid(pid, 0)[1] >> 8

    def test_a_database_in_a_read_only_folder_is_read(self):
        conn = store.open_db(self.path, write=True, create=True)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("INSERT INTO targets (fingerprint, backend) VALUES ('cpu:x', 'cpu')")
        conn.commit()
        conn.close()
        os.chmod(self.path, 0o444)
        os.chmod(self.tmp.name, 0o555)

        def read():
            c = store.open_db(self.path)
            return 0 if c.execute("SELECT count(*) FROM targets").fetchone()[0] == 1 else 3

        def refused():
            try:
                store.open_db(self.path)
            except store.StoreError as e:
                return 0 if "write-ahead log" in str(e) else 4
            return 5

        try:
            code = self._unprivileged(read)
            if code == 77:
                self.skipTest("cannot drop root privileges to test permission bits")
            self.assertEqual(code, 0)
            # A -wal file with data that immutable mode would leave out: refused, not ignored.
            os.chmod(self.tmp.name, 0o755)
            with open(self.path + "-wal", "wb") as f:
                f.write(b"\0" * 32)
            os.chmod(self.tmp.name, 0o555)
            self.assertEqual(self._unprivileged(refused), 0)
        finally:
            os.chmod(self.tmp.name, 0o755)

    def test_newer_schema_is_refused(self):
        store.open_db(self.path, write=True, create=True).close()
        newer = store.schema_version() + 1
        set_meta(self.path, "schema_version", str(newer))
        for write in (False, True):
            with self.assertRaisesRegex(store.StoreError, f"^{re.escape(self.path)}: schema "
                                        f"version {newer} is newer"):
                store.open_db(self.path, write=write)

    def test_damaged_version_is_refused(self):
        store.open_db(self.path, write=True, create=True).close()
        set_meta(self.path, "schema_version", "one")
        with self.assertRaisesRegex(store.StoreError, "damaged .* 'one'"):
            store.open_db(self.path)

    def test_foreign_files_are_refused(self):
        conn = sqlite3.connect(self.path)
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
        conn.commit()
        conn.close()
        for write, create in ((False, False), (True, True)):
            with self.assertRaisesRegex(store.StoreError, f"^{re.escape(self.path)}: not a "
                                        "brickdl tuning database"):
                store.open_db(self.path, write=write, create=create)
        conn = sqlite3.connect(self.path)
        conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
        conn.execute("INSERT INTO meta VALUES ('application', 'other')")
        conn.commit()
        conn.close()
        with self.assertRaisesRegex(store.StoreError, "meta.application is 'other', expected "
                                    "'brickdl'"):
            store.open_db(self.path)
        garbage = os.path.join(self.tmp.name, "garbage.db")
        with open(garbage, "wb") as f:
            f.write(b"this is not sqlite" * 100)
        with self.assertRaisesRegex(store.StoreError, "^" + re.escape(garbage) + ": not a "
                                    "brickdl tuning database"):
            store.open_db(garbage, write=True, create=True)

    def test_the_cpp_store_reads_what_python_created(self):
        # ctest passes the tuner's path; brickdl-query is built next to it.
        tune = os.environ.get("BRICKDL_TUNE")
        query = os.path.join(os.path.dirname(tune), "brickdl-query") if tune else None
        if not query or not os.path.exists(query):
            self.skipTest("BRICKDL_TUNE not set (run through ctest)")
        store.open_db(self.path, write=True, create=True).close()
        out = subprocess.run([query, "--db", self.path, "runs"], capture_output=True,
                             text=True, check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("no runs in", out.stdout)

    def test_the_committed_result_set_opens(self):
        path = os.path.join(ROOT, "results", "data", "reproduce-cpu.db")
        if not os.path.exists(path):
            self.skipTest("no committed result set")
        before = os.path.getmtime(path)
        conn = store.open_db(path)
        self.assertGreater(conn.execute("SELECT count(*) FROM runs").fetchone()[0], 0)
        conn.close()
        self.assertEqual(os.path.getmtime(path), before)


if __name__ == "__main__":
    unittest.main()
