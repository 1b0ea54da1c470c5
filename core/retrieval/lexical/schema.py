"""An index file: where it lives, its tables, and the transactions and records every part of
the index reads and writes."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from core.config import Settings

# The layout of one index file; a file of another layout is emptied and rebuilt (derived).
SCHEMA_VERSION = 3
# A sync holds the write lock while it reads new chunks from the store; other writers wait.
BUSY_TIMEOUT_S = 120.0
# The full-text table's tokenizer; the postings take their terms from FTS5 itself.
TOKENIZE = "unicode61 remove_diacritics 2"

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS versions (
    doc_key TEXT NOT NULL, version TEXT NOT NULL, PRIMARY KEY (doc_key, version));
CREATE TABLE IF NOT EXISTS followups (id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    version_key TEXT,
    metadata TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_by_version ON chunks (version_key);
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_text USING fts5(text, tokenize = '{TOKENIZE}');
CREATE TABLE IF NOT EXISTS postings (
    term TEXT NOT NULL,
    block INTEGER NOT NULL,
    rowids BLOB NOT NULL,
    tfs BLOB NOT NULL,
    positions BLOB NOT NULL,
    PRIMARY KEY (term, block)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lengths (
    block INTEGER PRIMARY KEY,
    rowids BLOB NOT NULL,
    lengths BLOB NOT NULL);
"""
TABLES = ("meta", "versions", "followups", "chunks", "chunk_text", "postings", "lengths")


def lexical_folder(settings: Settings) -> Path:
    """Where the vendors' index files live: `lexical_dir` if set; beside an embedded store in
    `<store>/lexical/`; for a server, a folder per server under ~/.cache."""
    if settings.lexical_dir is not None:
        return settings.lexical_dir
    if settings.chroma_host:
        server = re.sub(r"[^A-Za-z0-9._-]", "_", f"{settings.chroma_host}-{settings.chroma_port}")
        return Path.home() / ".cache" / "evidence-workbench" / "lexical" / server
    return settings.store / "lexical"


def index_path(settings: Settings, vendor_id: str) -> Path:
    """The vendor's index file (vendor ids are file-name safe)."""
    return lexical_folder(settings) / f"{vendor_id}.sqlite3"


# The most of an index file a connection reads through a memory mapping.
MAPPED_BYTES = 256 << 20


def prepare(db: sqlite3.Connection) -> None:
    """WAL (readers never wait for a writer) and the current schema; a file of another schema
    is emptied, since everything in it can be read again from the store."""
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    # Reads of the file through memory it maps instead of a read call per page: `hybrid` reads
    # a hundred rows scattered over a large file, 1.45 ms in read calls at 100,000 chunks and
    # 1.12 ms mapped (benchmarks/README.md). Only what is touched is brought in; the mapping
    # is the operating system's page cache, not a copy.
    db.execute(f"PRAGMA mmap_size = {MAPPED_BYTES}")
    if _schema_version(db) == SCHEMA_VERSION:
        return
    with immediate(db):
        if _schema_version(db) != SCHEMA_VERSION:
            create_tables(db)


@contextlib.contextmanager
def immediate(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once (other writers wait), rolled back on any error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


@contextlib.contextmanager
def snapshot(db: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every read inside it sees the same committed state."""
    db.execute("BEGIN")
    try:
        yield
    finally:
        if db.in_transaction:
            db.execute("COMMIT")


def create_tables(db: sqlite3.Connection) -> None:
    """The tables dropped and made afresh, inside the caller's transaction."""
    for table in TABLES:
        db.execute(f"DROP TABLE IF EXISTS {table}")
    # One statement at a time: executescript would commit the transaction first.
    for statement in filter(str.strip, _SCHEMA.split(";")):
        db.execute(statement)
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))


def _schema_version(db: sqlite3.Connection) -> int | None:
    exists = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
                        ).fetchone()
    if not exists:
        return None
    value = meta(db, "schema_version")
    return int(value) if value is not None and value.isdigit() else None


def meta(db: sqlite3.Connection, key: str) -> str | None:
    """One value of the file's `meta` table; None when it holds none."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def recorded_versions(db: sqlite3.Connection) -> set[tuple[str, str]]:
    """The document versions (doc_key, version) the index records holding."""
    return set(db.execute("SELECT doc_key, version FROM versions").fetchall())


def recorded_followups(db: sqlite3.Connection) -> dict[str, str]:
    """follow-up id -> fingerprint, of every response the index records holding."""
    return dict(db.execute("SELECT id, fingerprint FROM followups").fetchall())
