"""Two indexes ChromaDB 1.5's SQLite schema lacks, for an embedded store and for a server's.

ChromaDB looks up, on every read and write of a collection, the collection's segments and
its entries in the write log, by columns its schema does not index. Each lookup scanned every
collection's rows, so every call grew with the number of vendors (at 1,000 vendors a small
upsert took 18.6 ms against 11.6 in a store of one; 13.0 with these). The indexes carry names
of our own, which no ChromaDB migration uses, and change nothing but the speed of lookups.

An embedded store gets them when it is opened (`core/store/client.py`). A team's `chroma run`
server keeps its own SQLite file, which no client reaches; its operator adds them once, with
the server stopped or running:

    python -m core.store.lookups /srv/chroma        # the folder given to `chroma run --path`
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from pathlib import Path

LOOKUP_INDEXES = {
    "evidence_segments_by_collection": "segments (collection)",
    "evidence_queue_by_topic": "embeddings_queue (topic, seq_id)",
}
DATABASE = "chroma.sqlite3"


def index_lookups(database: Path, *, timeout_s: float = 5.0) -> list[str]:
    """Add the indexes the SQLite file lacks; the names of those added. Raises sqlite3.Error
    when the file cannot take them (read-only, or a writer holding it past the wait)."""
    added = []
    with contextlib.closing(sqlite3.connect(database, timeout=timeout_s)) as db:
        present = {name for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'evidence_%'")}
        for name, columns in LOOKUP_INDEXES.items():
            if name not in present:
                db.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {columns}")
                added.append(name)
        db.commit()
    return added


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("Usage: python -m core.store.lookups DIR (the folder of a ChromaDB store, as "
              "given to `chroma run --path`).", file=sys.stderr)
        return 2
    database = Path(arguments[0]) / DATABASE
    if not database.is_file():
        print(f"{database} does not exist: give the folder a ChromaDB store was made in.",
              file=sys.stderr)
        return 2
    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
            tables = {name for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"segments", "embeddings_queue"} <= tables:
            print(f"{database} is not a ChromaDB store's database: nothing was changed.",
                  file=sys.stderr)
            return 2
        added = index_lookups(database, timeout_s=60.0)
    except sqlite3.Error as exc:
        print(f"The indexes could not be added to {database}: {exc}.", file=sys.stderr)
        return 1
    print(f"{database}: added {', '.join(added)}." if added
          else f"{database}: both indexes were already there.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
