"""Whether a vendor's lexical index agrees with its committed store: every difference counted
once and classed as `behind` (the next sync mends it by itself) or `drift` (only a rebuild
does). See `core.retrieval.check` for what the index must hold; the index's own layout is
`core.retrieval.lexical`'s, read here in one transaction."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from core.errors import StoreError
from core.retrieval.lexical import _TABLES, BUSY_TIMEOUT_S, SCHEMA_VERSION, _version_key
from core.store.audit import StoreRead

# The lexical counts that are differences (lingering rows are allowed).
DIFFERENCES = ("missing", "extra", "stale", "withdrawn", "fts_mismatch", "records")


class LexicalFindings(BaseModel):
    """The lexical index compared with the committed store."""

    path: str
    exists: bool = Field(description="False: never built (the first hybrid search builds it)")
    settled: bool = Field(False, description="the index recorded the store's current "
                                             "generation: searches trust it without a sync")
    rows: int = 0
    missing: int = Field(0, description="committed chunks and stored responses not indexed")
    extra: int = Field(0, description="rows of nothing the store holds or names")
    stale: int = Field(0, description="rows with another text, metadata or fingerprint")
    withdrawn: int = Field(0, description="rows of answers a replaced round withdrew")
    fts_mismatch: int = Field(0, description="rows without full-text rows and the reverse, "
                                             "and a full-text index failing its check")
    records: int = Field(0, description="the index's notes of versions and fingerprints "
                                        "that disagree with its rows or the store")
    lingering: int = Field(0, description="rows of a replaced version whose chunks are still "
                                          "in the store (allowed until they leave)")
    behind: int = Field(0, description="differences the next sync mends by itself")
    drift: int = Field(0, description="differences only a rebuild mends")

    @property
    def differences(self) -> int:
        return sum(getattr(self, name) for name in DIFFERENCES)



@dataclass
class IndexRow:
    rowid: int
    version_key: str | None
    metadata: str
    text: str | None  # None: no full-text row


@dataclass
class IndexRead:
    """Everything an index file holds, read in one transaction."""

    schema_ok: bool
    collection_id: str | None = None
    generation: str | None = None
    versions: set[tuple[str, str]] = field(default_factory=set)
    followups: dict[str, str] = field(default_factory=dict)
    rows: dict[str, IndexRow] = field(default_factory=dict)
    fts_only: int = 0
    intact: bool = True


def read_index(path: Any) -> IndexRead | None:
    """The index file's content (None when there is none), read under its write lock so that
    no sync changes it meanwhile: FTS5's own integrity check needs that lock too."""
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"The lexical index {path} cannot be opened: {exc}") from exc
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            return _read_index(db)
        finally:
            db.execute("ROLLBACK")
    except sqlite3.Error as exc:
        raise StoreError(f"The lexical index {path} cannot be read: {exc}; it is derived from "
                         "the store, so delete it and the next search builds it again.") from exc
    finally:
        db.close()


def _read_index(db: sqlite3.Connection) -> IndexRead:
    tables = {name for (name,) in db.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    if not set(_TABLES) <= tables:
        return IndexRead(schema_ok=False)
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("schema_version") != str(SCHEMA_VERSION):
        return IndexRead(schema_ok=False)
    rows = {record_id: IndexRow(rowid, version_key, metadata, text if has_text else None)
            for rowid, record_id, version_key, metadata, has_text, text in db.execute(
                "SELECT c.rowid, c.id, c.version_key, c.metadata, t.rowid IS NOT NULL, t.text "
                "FROM chunks AS c LEFT JOIN chunk_text AS t ON t.rowid = c.rowid")}
    fts_only = db.execute("SELECT count(*) FROM chunk_text "
                          "WHERE rowid NOT IN (SELECT rowid FROM chunks)").fetchone()[0]
    try:
        db.execute("INSERT INTO chunk_text (chunk_text, rank) VALUES ('integrity-check', 1)")
        intact = True
    except sqlite3.DatabaseError:
        intact = False
    return IndexRead(
        schema_ok=True, collection_id=meta.get("collection_id"),
        generation=meta.get("generation"),
        versions=set(db.execute("SELECT doc_key, version FROM versions").fetchall()),
        followups=dict(db.execute("SELECT id, fingerprint FROM followups").fetchall()),
        rows=rows, fts_only=fts_only, intact=intact)


def _metadata_json(metadata: dict[str, Any]) -> str:
    """A row's metadata as the index writes it."""
    return json.dumps(metadata, sort_keys=True)


def compare_index(path: Any, index: IndexRead | None, read: StoreRead,
                  collection_id: str) -> LexicalFindings:
    """The index against the committed store, each difference counted once and classed as
    `behind` (the next sync mends it) or `drift` (only a rebuild does)."""
    found = LexicalFindings(path=str(path), exists=index is not None)
    if index is None:
        return found
    expected = len([i for i, key in read.chunk_versions.items()
                    if key in read.committed_keys()]) + len(read.followups)
    if not index.schema_ok or index.collection_id != collection_id:
        # Another layout, or another store's index: the next sync empties and refills it.
        found.rows = len(index.rows)
        found.missing, found.extra = expected, len(index.rows)
        found.behind = found.missing + found.extra
        return found
    settled = index.generation is not None and index.generation == read.generation
    found.settled = settled
    found.rows = len(index.rows)
    counts = {name: [0, 0] for name in DIFFERENCES}  # name -> [behind, drift]

    def note(name: str, mended_by_sync: bool) -> None:
        counts[name][0 if mended_by_sync and not settled else 1] += 1

    committed = read.committed_keys()
    recorded = {_version_key(k, v) for k, v in index.versions}
    stored_keys = set(read.chunk_versions.values())
    fts_missing = {i for i, row in index.rows.items() if row.text is None}
    for _ in fts_missing:
        note("fts_mismatch", False)
    for _ in range(index.fts_only):
        note("fts_mismatch", False)
    if not index.intact:
        note("fts_mismatch", False)

    # Document rows.
    for record_id, row in index.rows.items():
        key = row.version_key
        if key is None or record_id in fts_missing:
            continue
        stored = read.chunks.get(record_id)
        of_this_version = stored is not None and read.chunk_versions[record_id] == key
        if key in committed:
            if not of_this_version:
                note("extra", False)  # no sync removes a row of a version it keeps
            elif row.text != stored[0] or row.metadata != _metadata_json(stored[1]):
                note("stale", key not in recorded)  # an unrecorded version is read again
        elif key in recorded and key in stored_keys:
            if of_this_version and row.text == stored[0] and row.metadata == _metadata_json(
                    stored[1]):
                found.lingering += 1  # a replaced version, until its chunks leave the store
            else:
                note("stale" if of_this_version else "extra", False)
        else:
            # A recorded version gone from the store is removed by a sync; a row of a version
            # never recorded stays for good.
            note("extra", key in recorded)
    for record_id, key in read.chunk_versions.items():
        if key in committed and record_id not in index.rows:
            note("missing", key not in recorded)

    # Follow-up rows.
    for record_id, row in index.rows.items():
        if row.version_key is not None or record_id in fts_missing:
            continue
        noted = index.followups.get(record_id)
        stored_followup = read.followups.get(record_id)
        if stored_followup is None:
            # Removed (or withdrawn) from the store: a sync removes what it keeps a
            # fingerprint for; a row it keeps none for stays.
            note("withdrawn" if record_id in read.markers else "extra", noted is not None)
        elif noted is None:
            note("records", True)  # a row without its fingerprint: a sync writes it again
        elif noted != stored_followup[2]:
            note("stale", True)  # a sync re-reads a response whose noted fingerprint differs
        elif row.text != stored_followup[0] or row.metadata != _metadata_json(
                stored_followup[1]):
            note("stale", False)
    for record_id, (_, _, fingerprint) in read.followups.items():
        if record_id not in index.rows:
            note("missing", index.followups.get(record_id) != fingerprint)

    # The index's notes that no row above accounts for.
    for record_id in index.followups:
        row = index.rows.get(record_id)
        if row is None and record_id not in read.followups:
            note("records", True)  # a sync forgets a response the store no longer holds
        elif row is not None and row.version_key is not None:
            note("records", False)
    for key in recorded - committed:
        if key not in stored_keys and not any(r.version_key == key
                                              for r in index.rows.values()):
            note("records", True)  # a version gone from the store, forgotten by a sync

    for name, (behind, drift) in counts.items():
        setattr(found, name, behind + drift)
        found.behind += behind
        found.drift += drift
    return found


