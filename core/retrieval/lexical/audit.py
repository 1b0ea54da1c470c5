"""Whether a vendor's lexical index agrees with its committed store: every difference counted
once and classed as `behind` (the next sync mends it by itself) or `drift` (only a rebuild
does). The index file is read in one transaction, in the layout `schema` gives it."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from core.errors import StoreError
from core.retrieval.lexical.postings import instances, read_blocks
from core.retrieval.lexical.schema import BUSY_TIMEOUT_S, SCHEMA_VERSION, TABLES
from core.retrieval.lexical.terms import indexed_text
from core.store.audit import StoreRead
from core.store.records import version_key as _version_key

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
                                             "a full-text index failing its check, and rows "
                                             "whose postings or length disagree with the "
                                             "full-text index")
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
    # Rowids of rows (in `rows`) whose postings or length disagree with the full-text index,
    # and how many rowids in neither table the postings or lengths still hold.
    postings_rows: set[int] = field(default_factory=set)
    postings_orphans: int = 0


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
    if not set(TABLES) <= tables:
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
    postings_rows: set[int] = set()
    orphans = 0
    if intact:  # a damaged full-text index is rebuilt anyway, postings and all
        texts = [rowid for (rowid,) in db.execute("SELECT rowid FROM chunk_text")]
        off = _postings_disagreeing(db, texts)
        indexed = {row.rowid for row in rows.values()}
        postings_rows = off & indexed
        orphans = len(off - indexed - set(texts))
    return IndexRead(
        schema_ok=True, collection_id=meta.get("collection_id"),
        generation=meta.get("generation"),
        versions=set(db.execute("SELECT doc_key, version FROM versions").fetchall()),
        followups=dict(db.execute("SELECT id, fingerprint FROM followups").fetchall()),
        rows=rows, fts_only=fts_only, intact=intact, postings_rows=postings_rows,
        postings_orphans=orphans)


def _postings_disagreeing(db: sqlite3.Connection, texts: list[int]) -> set[int]:
    """The rowids whose postings (terms, frequencies, offsets) or length differ from what the
    full-text index holds of them (`texts`: the full-text table's rowids): the postings are
    what queries rank by, and must be the full-text index's to the token."""
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.audit_instances "
               "USING fts5vocab(main, chunk_text, instance)")
    truth = instances(db, "temp.audit_instances")
    stored = read_blocks(db.execute("SELECT term, block, rowids, tfs, positions FROM postings "
                                    "ORDER BY term, block"), positions=True)
    off: set[int] = set()
    for term in truth.keys() | stored.keys():
        expected, held = truth.get(term), stored.get(term)
        if (expected is not None and held is not None
                and np.array_equal(expected.rowids, held.rowids)
                and np.array_equal(expected.tfs, held.tfs)
                and np.array_equal(expected.positions, held.positions)):
            continue
        by_row = [_offsets_by_row(found) for found in (expected, held)]
        off.update(rowid for rowid in by_row[0].keys() | by_row[1].keys()
                   if by_row[0].get(rowid) != by_row[1].get(rowid))

    # A row's length: its tokens, for every row of the full-text table (an empty text has 0);
    # -1 where a table holds no length.
    in_text = np.array(texts, dtype=np.int64)
    every = [found.rowids for found in truth.values()]
    rowids = np.concatenate(every) if every else np.zeros(0, dtype=np.int64)
    tfs = np.concatenate([found.tfs for found in truth.values()]) if every else rowids
    held = read_blocks(db.execute("SELECT 'lengths', block, rowids, lengths FROM lengths "
                                  "ORDER BY block"), positions=False).get("lengths")
    held_rowids = held.rowids if held is not None else np.zeros(0, dtype=np.int64)
    size = 1 + max([0] + [int(a.max()) for a in (in_text, rowids, held_rowids) if len(a)])
    expected = np.full(size, -1, dtype=np.int64)
    expected[in_text] = 0
    expected[rowids] = 0
    expected += np.bincount(rowids, weights=tfs, minlength=size).astype(np.int64)
    stored = np.full(size, -1, dtype=np.int64)
    if held is not None:
        stored[held.rowids] = held.tfs
    off.update(np.flatnonzero(expected != stored).tolist())
    return off


def _offsets_by_row(found: Any) -> dict[int, tuple[int, ...]]:
    """rowid -> the term's offsets in it, of one term's postings (none if `found` is None)."""
    if found is None:
        return {}
    ends = np.cumsum(found.tfs)
    positions = found.positions.tolist()
    return {rowid: tuple(positions[end - tf:end]) for rowid, tf, end in zip(
        found.rowids.tolist(), found.tfs.tolist(), ends.tolist(), strict=True)}


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

    accounted: set[str] = set()  # rows some difference above already counts

    def note(name: str, mended_by_sync: bool, record_id: str | None = None) -> None:
        counts[name][0 if mended_by_sync and not settled else 1] += 1
        if record_id is not None:
            accounted.add(record_id)

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
                # No sync removes a row of a version it keeps.
                note("extra", False, record_id)
            elif row.text != indexed_text(*stored[:2]) or row.metadata != _metadata_json(
                    stored[1]):
                # An unrecorded version is read again.
                note("stale", key not in recorded, record_id)
        elif key in recorded and key in stored_keys:
            if of_this_version and row.text == indexed_text(*stored[:2]) and (
                    row.metadata == _metadata_json(stored[1])):
                found.lingering += 1  # a replaced version, until its chunks leave the store
            else:
                note("stale" if of_this_version else "extra", False, record_id)
        else:
            # A recorded version gone from the store is removed by a sync; a row of a version
            # never recorded stays for good.
            note("extra", key in recorded, record_id)
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
            note("withdrawn" if record_id in read.markers else "extra", noted is not None,
                 record_id)
        elif noted is None:
            # A row without its fingerprint: a sync writes it again.
            note("records", True, record_id)
        elif noted != stored_followup[2]:
            # A sync re-reads a response whose noted fingerprint differs.
            note("stale", True, record_id)
        elif row.text != indexed_text(*stored_followup[:2]) or row.metadata != _metadata_json(
                stored_followup[1]):
            note("stale", False, record_id)
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

    # Postings or lengths that disagree with the full-text index, of a row no difference
    # above counts already; those of rowids in neither table (a row lost from both) only
    # when nothing else calls for a rebuild, which mends them too.
    by_rowid = {row.rowid: record_id for record_id, row in index.rows.items()}
    for rowid in sorted(index.postings_rows):
        if by_rowid[rowid] not in accounted and by_rowid[rowid] not in fts_missing:
            note("fts_mismatch", False)
    if index.postings_orphans and not any(drift for _, drift in counts.values()):
        for _ in range(index.postings_orphans):
            note("fts_mismatch", False)

    for name, (behind, drift) in counts.items():
        setattr(found, name, behind + drift)
        found.behind += behind
        found.drift += drift
    return found
