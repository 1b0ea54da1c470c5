"""Connections to the vendors' index files, kept open between retrievals.

A connection's page cache is its own: one opened for each retrieval reads every page it
touches again and pays for the open, the pragmas and the close besides (about 1.5 ms of a
hybrid retrieval at 100,000 chunks). A connection a retrieval is done with is kept here,
outside any transaction, and the next search of the same file takes it. SQLite's WAL mode
tells a connection at the start of each read what other connections and processes committed
since, so a kept connection reads what a fresh one would.

A kept connection is given out again only for the same file: one whose path now names
another file (deleted and made again, by this process or another) is closed instead. Each
process keeps its own (a forked child never takes its parent's), at most `PER_FILE` per file
and `FILES` files in all, the least recently used file's closed first."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path

# Idle connections kept per index file (a hybrid search uses two at once: its lexical search
# on a thread of its own while another call reads), and index files kept open in all.
PER_FILE = 2
FILES = 32


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file the path names now; None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


class IdleConnections:
    """Open connections no call is using, by (process, file)."""

    def __init__(self, per_file: int = PER_FILE, files: int = FILES) -> None:
        self._per_file = per_file
        self._files = files
        self._lock = threading.Lock()
        self._idle: OrderedDict[tuple[int, str],
                                list[tuple[tuple[int, int], sqlite3.Connection]]] = OrderedDict()

    def take(self, path: Path) -> sqlite3.Connection | None:
        """An idle connection to the file `path` names now, or None."""
        key = (os.getpid(), str(path))
        with self._lock:
            held = self._idle.pop(key, None)
        if not held:
            return None
        now = _identity(path)
        taken = None
        for identity, db in held:
            if identity != now:
                self._close(db)  # a connection to another file by now
            elif taken is None:
                taken = db
            else:
                self.give(path, db)  # still idle: kept for the next call
        return taken

    def give(self, path: Path, db: sqlite3.Connection) -> None:
        """Keep a connection a call is done with; one inside a transaction is closed."""
        identity = _identity(path)
        if identity is None or db.in_transaction:
            self._close(db)
            return
        key = (os.getpid(), str(path))
        dropped: list[sqlite3.Connection] = []
        with self._lock:
            held = self._idle.pop(key, [])
            held.append((identity, db))
            while len(held) > self._per_file:
                dropped.append(held.pop(0)[1])
            self._idle[key] = held
            while len(self._idle) > self._files:
                _, evicted = self._idle.popitem(last=False)
                dropped.extend(db for _, db in evicted)
        for old in dropped:
            self._close(old)

    def close_all(self) -> None:
        """Close every idle connection of this process."""
        with self._lock:
            mine = [key for key in self._idle if key[0] == os.getpid()]
            held = [db for key in mine for _, db in self._idle.pop(key)]
        for db in held:
            self._close(db)

    def count(self, path: Path) -> int:
        """Idle connections kept for the file at `path`."""
        with self._lock:
            return len(self._idle.get((os.getpid(), str(path)), ()))

    @staticmethod
    def _close(db: sqlite3.Connection) -> None:
        with contextlib.suppress(sqlite3.Error):
            db.close()


IDLE = IdleConnections()
