#!/usr/bin/python3
"""Keeps a reproduce.sh output as a committed result set:

    store_result_set.py OUTDIR NAME

copies OUTDIR/brickdl.db to results/data/NAME.db (compacted, in rollback-journal mode so that
it reads without -wal / -shm files, also from a read-only checkout) and OUTDIR/figures/* to
results/figures/NAME/."""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import brickdl_store  # noqa: E402


def main(argv):
    if len(argv) != 2:
        print("usage: store_result_set.py OUTDIR NAME", file=sys.stderr)
        return 2
    outdir, name = argv
    src = os.path.join(outdir, "brickdl.db")
    figures = os.path.join(outdir, "figures")
    if not os.path.isfile(src) or not os.path.isdir(figures):
        print(f"store_result_set.py: {outdir} has no brickdl.db and figures/ (run "
              "scripts/reproduce.sh OUTDIR first)", file=sys.stderr)
        return 2
    db = os.path.join(HERE, "data", f"{name}.db")
    try:
        conn = brickdl_store.open_db(src)  # read-only: checks that it is a tuning database
    except brickdl_store.StoreError as e:
        print(f"store_result_set.py: {e}", file=sys.stderr)
        return 2
    os.makedirs(os.path.dirname(db), exist_ok=True)
    if os.path.exists(db):
        os.remove(db)
    conn.execute("VACUUM INTO ?", (db,))
    conn.close()
    conn = brickdl_store.open_db(db, write=True)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    dest = os.path.join(HERE, "figures", name)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(figures, dest)
    print(f"store_result_set.py: {db} and {dest}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
