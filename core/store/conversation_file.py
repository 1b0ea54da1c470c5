"""A vendor's conversation messages beside an embedded store: one SQLite file per vendor in
`<store>/conversations/`, answering as the vendor's conversations collection does
(`ConversationRecords`: count, messages, messages with vectors, one write per turn).

Why a file and not a collection: a turn is one small write of two messages, and ChromaDB's
write of two records syncs the disk about sixteen times (its log, its metadata, its vector
index), where SQLite commits a transaction with one or two. A turn's messages no longer need a
vector index either: a conversation is read whole and its messages ranked in memory. A store
on a ChromaDB server keeps its conversations in the server, where every process sharing the
server sees them.

A store whose conversations were kept in its collection before has them copied into the file
when the file is first opened, in the same transaction that notes the copy, so the copy runs
once whoever opens it first (`import_once`); the collection is left as it was."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.store.conversations import MessageRecord
from core.store.filters import Condition, Where

# Metadata keys the file keeps in columns of their own, so the reads a turn makes (one
# conversation, one role) are found by index, not by reading every message.
_COLUMNS = ("conversation_id", "role")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS messages (id TEXT PRIMARY KEY, conversation_id TEXT, "
    "role TEXT, text TEXT NOT NULL, metadata TEXT NOT NULL, vector BLOB)",
    "CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages (conversation_id, role)",
    "CREATE INDEX IF NOT EXISTS messages_by_role ON messages (role)",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
# Seconds a write waits for another process's write to the same file.
_BUSY_S = 30.0
_IMPORTED = "imported_from_collection"


def conversation_file_path(store: Path, vendor_id: str) -> Path:
    """The vendor's file (vendor ids are file-name safe)."""
    return store / "conversations" / f"{vendor_id}.sqlite3"


def _matches(condition: Condition, metadata: dict[str, Any]) -> bool:
    value = metadata.get(condition.key)
    if condition.op == "eq":
        return value == condition.value
    if condition.op == "ne":
        return value != condition.value
    return value in condition.value  # type: ignore[operator]


class ConversationFile:
    """One vendor's messages in its SQLite file; the same answers as `ConversationRecords`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def exists(self) -> bool:
        return self.path.exists()

    @contextlib.contextmanager
    def _connection(self, *, create: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection to the file, closed afterwards; with `create` (a writer's), the
        folder, the file's journal mode and sync, and the schema are made sure of."""
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=_BUSY_S, isolation_level=None)
        try:
            if create:  # a writer's connection; WAL, once set, is the file's own mode
                db.execute("PRAGMA journal_mode = WAL")  # readers never wait for a writer
                db.execute("PRAGMA synchronous = FULL")  # a committed turn survives a power cut
                for statement in _SCHEMA:
                    db.execute(statement)
            yield db
        finally:
            db.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction, taken at once (BEGIN IMMEDIATE): committed whole or not at all."""
        with self._connection(create=True) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _rows(self, where: Where | None, columns: str) -> list[tuple[Any, ...]]:
        """The rows whose metadata meets every condition, in the order they were written."""
        if not self.exists():
            return []
        conditions = list(where.conditions) if where else []
        indexed = [c for c in conditions if c.op == "eq" and c.key in _COLUMNS]
        sql = f"SELECT metadata, {columns} FROM messages"
        if indexed:
            sql += " WHERE " + " AND ".join(f"{c.key} = ?" for c in indexed)
        with self._connection() as db:
            rows = db.execute(sql + " ORDER BY rowid", [c.value for c in indexed]).fetchall()
        found = []
        for raw, *rest in rows:
            metadata = json.loads(raw)
            if all(_matches(c, metadata) for c in conditions):
                found.append((metadata, *rest))
        return found

    def count(self, where: Where) -> int:
        """How many messages match."""
        return len(self._rows(where, "id"))

    def messages(self, where: Where, *, text: bool = True) -> list[MessageRecord]:
        """Every message that matches, with its metadata (and text)."""
        return [MessageRecord(found if text else "", metadata)
                for metadata, found in self._rows(where, "text")]

    def with_vectors(self, where: Where) -> list[MessageRecord]:
        """Every message that matches, with its text, metadata and vector."""
        return [MessageRecord(found, metadata,
                              np.frombuffer(vector, dtype=np.float32).copy() if vector else None)
                for metadata, found, vector in self._rows(where, "text, vector")]

    def write(self, ids: Sequence[str], texts: Sequence[str],
              metadatas: Sequence[dict[str, Any]], vectors: Sequence[np.ndarray]) -> None:
        """These messages, in one transaction (a message of the same id is replaced)."""
        rows = _rows_of(ids, texts, metadatas, vectors)
        with self._transaction() as db:
            db.executemany("INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?, ?, ?)", rows)

    def import_once(self, read: Callable[[], list[tuple[str, MessageRecord]]]) -> None:
        """Copy the messages `read` gives ((id, message) each, with its vector) unless the
        file notes that a copy was made; the copy and the note are one transaction, and a
        message the file already holds (written since) is kept as it is."""
        if self.exists():  # a file that notes the copy is not written again
            with self._connection() as db:
                if _imported(db):
                    return
        with self._transaction() as db:
            if _imported(db):
                return
            found = read()
            db.executemany(
                "INSERT OR IGNORE INTO messages VALUES (?, ?, ?, ?, ?, ?)",
                _rows_of([i for i, _ in found], [m.text for _, m in found],
                         [m.metadata for _, m in found],
                         [m.vector for _, m in found]))
            db.execute("INSERT INTO meta VALUES (?, ?)", (_IMPORTED, str(len(found))))


def _imported(db: sqlite3.Connection) -> bool:
    try:
        return db.execute("SELECT 1 FROM meta WHERE key = ?", (_IMPORTED,)).fetchone() is not None
    except sqlite3.OperationalError:  # no schema yet
        return False


def _rows_of(ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]],
             vectors: Sequence[np.ndarray | None]) -> list[tuple[Any, ...]]:
    if not len(ids) == len(texts) == len(metadatas) == len(vectors):
        raise ValueError("ids, texts, metadatas and vectors must be as many")
    return [(record_id, metadata.get("conversation_id"), metadata.get("role"), text,
             json.dumps(metadata, sort_keys=True),
             None if vector is None else np.asarray(vector, dtype=np.float32).tobytes())
            for record_id, text, metadata, vector in zip(ids, texts, metadatas, vectors,
                                                         strict=True)]
