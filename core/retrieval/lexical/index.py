"""One vendor's index at one committed state: the sync that brings the file to the store's
committed state in one transaction, the search over it, and the connection calls share."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.config import Settings
from core.errors import StoreError
from core.models import DOCUMENT_SOURCE_TYPE, FOLLOWUP_SOURCE_TYPE
from core.retrieval.lexical.connections import IDLE
from core.retrieval.lexical.postings import Changes, write_postings
from core.retrieval.lexical.ranking import (
    best_by_fts5,
    best_by_postings,
    best_filtered,
    of_state,
    where_sql,
)
from core.retrieval.lexical.schema import (
    BUSY_TIMEOUT_S,
    create_tables,
    immediate,
    index_path,
    meta,
    prepare,
    recorded_followups,
    recorded_versions,
)
from core.retrieval.lexical.terms import indexed_text, match_expression, shown_text
from core.retrieval.source import Neighbour, Query, StoredChunk
from core.retrieval.source import Where as WhereInput
from core.store import VendorStore, Where, record_fingerprint
from core.store.records import chunk_record_version, version_of_key
from core.store.records import version_key as _version_key

# Document versions per lookup when new versions are read from the store.
VERSIONS_PER_READ = 500


@dataclass(frozen=True)
class SyncReport:
    """What one sync changed in the index."""

    chunks_added: int = 0
    chunks_removed: int = 0
    versions_added: int = 0
    versions_removed: int = 0
    followups_added: int = 0
    followups_removed: int = 0
    rebuilt: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.chunks_added or self.chunks_removed or self.versions_added
                    or self.versions_removed or self.followups_added
                    or self.followups_removed or self.rebuilt)


@dataclass(frozen=True)
class IndexedState:
    """What the index holds: document versions (doc_key, version) and follow-up ids."""

    versions: frozenset[tuple[str, str]]
    followup_ids: frozenset[str]
    chunks: int


class VersionKeys(Collection[str]):
    """Document versions as the index keys its chunk rows (`version_key`), answered from the
    versions themselves: a retrieval checks a few hundred rows, and building the key of
    every version of a store of thousands of documents cost more than all its checks."""

    def __init__(self, versions: Mapping[str, str]) -> None:
        self._versions = versions

    def __contains__(self, key: object) -> bool:
        named = version_of_key(key) if isinstance(key, str) else None
        return named is not None and self._versions.get(named[0]) == named[1]

    def __iter__(self) -> Iterator[str]:
        return (_version_key(k, v) for k, v in self._versions.items())

    def __len__(self) -> int:
        return len(self._versions)


class LexicalIndex:
    """One vendor's BM25 index at one committed state (the versions a caller read from the
    manifest), as a candidate source. Safe to use from several threads and processes at once.
    Calls one after another share one connection to the index file (a retrieval's sync check,
    search and record reads open it once, not three times); a call made while another
    thread holds it takes its own. Connections are kept open between retrievals
    (`connections`); `close()` gives the shared one back."""

    name = "lexical"

    def __init__(self, path: Path, vendor: VendorStore, versions: Mapping[str, str], *,
                 generation: str | None = None,
                 expected_followups: Callable[[], Mapping[str, str | None]] | None = None,
                 page_size: int = 5000) -> None:
        """`generation`: the manifest generation `versions` were read at (None: every sync
        reads the store). `expected_followups`: follow-up id -> fingerprint, as the links at
        that generation record them; a sync settles at the generation only when the index
        holds every one of them. None for an answer a replaced round withdraws (its link is a
        tombstone): the index settles only once it no longer holds that answer, which is when
        the round's responses' write has turned its record into a marker (markers are never
        read: they are not follow-up responses)."""
        self.path = path
        self._vendor = vendor
        self._versions = dict(versions)
        self._generation = generation
        self._expected_followups = expected_followups
        self._page_size = page_size
        self._synced = False
        self._kept: sqlite3.Connection | None = None
        self._holding = threading.Lock()

    @functools.cached_property
    def _committed(self) -> VersionKeys:
        """This state's versions as the index keys its chunk rows (a follow-up has none)."""
        return VersionKeys(self._versions)

    @classmethod
    def for_vendor(cls, settings: Settings, vendor: VendorStore,
                   versions: Mapping[str, str], *, generation: str | None = None,
                   expected_followups: Callable[[], Mapping[str, str | None]] | None = None
                   ) -> LexicalIndex:
        """The vendor's index at these committed versions (not yet synced)."""
        return cls(index_path(settings, vendor.vendor_id), vendor, versions,
                   generation=generation, expected_followups=expected_followups)

    # Sync -------------------------------------------------------------------------------

    def sync(self) -> SyncReport:
        """Bring the index to the store's committed state, in one transaction. At the
        generation it last settled at, it reads one value of the index file and nothing
        else; otherwise, with nothing to do, it reads the follow-ups and the recorded state
        and writes nothing but the generation it settled at."""
        collection_id = self._vendor.collection_id
        with self._connection() as db:
            if self._generation is not None and self._settled_at(db) == (
                    collection_id, self._generation):
                self._synced = True
                return SyncReport()
        followups = self._read_followups()
        wanted = {(k, v) for k, v in self._versions.items()}
        with self._connection() as db:
            db.execute("BEGIN")  # one snapshot for the first look
            try:
                recorded = recorded_versions(db)
                in_sync = (meta(db, "collection_id") == collection_id and wanted <= recorded
                           and recorded_followups(db) == {i: fingerprint for i, (
                               fingerprint, _, _) in followups.items()})
            finally:
                db.execute("COMMIT")
            if in_sync and not self._gone(recorded - wanted):
                report = SyncReport()
            else:
                with immediate(db):
                    report = self._apply(db, collection_id, wanted)
            if self._generation is not None:
                self._settle(db, collection_id, wanted)
        self._synced = True
        return report

    def settled(self) -> bool:
        """Whether the index file already holds the store's state at the caller's
        generation (a sync would write nothing): one value of the file read, and nothing
        made or written when it is not there."""
        if self._generation is None or not self.path.is_file():
            return False
        try:
            with self._connection() as db:
                settled = self._settled_at(db) == (self._vendor.collection_id, self._generation)
        except (StoreError, sqlite3.Error):
            return False
        self._synced = self._synced or settled
        return settled

    def rebuild(self) -> SyncReport:
        """Make the index afresh from the store's committed state, in one transaction: a
        reader sees the old rows or the new ones, never an empty index. The index is derived,
        so a rebuild is always safe. A sync trusts the index's own records of what it holds
        (the versions and follow-up fingerprints); rows that disagree with those records (lost,
        altered, or of no recorded version) are mended only by a rebuild, which `evidence
        check` (core/retrieval/check.py) runs when it finds them. The tables are dropped and
        made again rather than emptied: a damaged full-text index cannot be emptied row by row."""
        collection_id = self._vendor.collection_id
        wanted = {(k, v) for k, v in self._versions.items()}
        with self._connection() as db:
            with immediate(db):
                create_tables(db)
                db.execute("INSERT INTO meta VALUES ('collection_id', ?)", (collection_id,))
                report = self._apply(db, collection_id, wanted)
            if self._generation is not None:
                self._settle(db, collection_id, wanted)
        self._synced = True
        return SyncReport(chunks_added=report.chunks_added, versions_added=report.versions_added,
                          followups_added=report.followups_added, rebuilt=True)

    @staticmethod
    def _settled_at(db: sqlite3.Connection) -> tuple[str | None, str | None]:
        """(collection id, manifest generation) the index last settled at."""
        rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN "
                               "('collection_id', 'generation')").fetchall())
        return rows.get("collection_id"), rows.get("generation")

    def _settle(self, db: sqlite3.Connection, collection_id: str,
                wanted: set[tuple[str, str]]) -> None:
        """Record the caller's generation if the index now holds exactly its versions (no
        replaced version waiting for its chunks to leave the store) and every response as
        its link fingerprints it; otherwise leave the record as it is."""
        expected = dict(self._expected_followups()) if self._expected_followups else {}
        with immediate(db):
            indexed = recorded_followups(db)
            if (meta(db, "collection_id") == collection_id
                    and recorded_versions(db) == wanted
                    and all(indexed.get(i) == fingerprint
                            for i, fingerprint in expected.items())):
                db.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)",
                           (self._generation,))

    def _apply(self, db: sqlite3.Connection, collection_id: str,
               wanted: set[tuple[str, str]]) -> SyncReport:
        """The sync's writes, under the write lock. The index and the follow-ups are read
        again: another process may have synced since the first look, and writing follow-ups
        read before it did would put older answers back."""
        rebuilt = meta(db, "collection_id") != collection_id
        if rebuilt:  # another store (a new server on a reused port, a store made afresh)
            for table in ("versions", "followups", "chunks", "chunk_text", "postings",
                          "lengths"):
                db.execute(f"DELETE FROM {table}")
            db.execute("DELETE FROM meta WHERE key = 'generation'")
            db.execute("INSERT OR REPLACE INTO meta VALUES ('collection_id', ?)",
                       (collection_id,))
        changes = Changes(empty=db.execute("SELECT 1 FROM chunk_text LIMIT 1").fetchone()
                          is None)
        recorded = recorded_versions(db)
        added = removed = 0
        gone = self._gone(recorded - wanted)
        for doc_key, version in gone:
            removed += _delete_rows(db, "version_key = ?", (_version_key(doc_key, version),),
                                    changes)
            db.execute("DELETE FROM versions WHERE doc_key = ? AND version = ?",
                       (doc_key, version))
        new_versions = wanted - recorded
        for chunk in self._read_versions(new_versions):
            key = _version_key(chunk.metadata["doc_key"], chunk.metadata["doc_sha"])
            removed += _delete_rows(db, "id = ?", (chunk.id,), changes)
            changes.add(*_insert(db, chunk, key))
            added += 1
        db.executemany("INSERT OR IGNORE INTO versions VALUES (?, ?)", sorted(new_versions))

        followups = self._read_followups()
        known = recorded_followups(db)
        stale = [i for i, fingerprint in known.items()
                 if followups.get(i, (None,))[0] != fingerprint]
        for record_id in stale:
            removed += _delete_rows(db, "id = ?", (record_id,), changes)
        db.executemany("DELETE FROM followups WHERE id = ?", [(i,) for i in stale])
        fresh = [i for i in followups if known.get(i) != followups[i][0]]
        for record_id in fresh:
            fingerprint, text, metadata = followups[record_id]
            # A row whose fingerprint record was lost would make the insert collide, and
            # every later sync with it.
            removed += _delete_rows(db, "id = ?", (record_id,), changes)
            changes.add(*_insert(db, StoredChunk(record_id, text, metadata), None))
            db.execute("INSERT INTO followups VALUES (?, ?)", (record_id, fingerprint))
            added += 1
        write_postings(db, changes)
        if rebuilt or changes.removed or changes.added:
            # The lengths changed: a process that kept what it worked out of them must not
            # take it for this state.
            db.execute("INSERT OR REPLACE INTO meta VALUES ('postings_state', ?)",
                       (os.urandom(16).hex(),))
        return SyncReport(chunks_added=added, chunks_removed=removed,
                          versions_added=len(new_versions), versions_removed=len(gone),
                          followups_added=len(fresh),
                          followups_removed=len(set(stale) - set(fresh)), rebuilt=rebuilt)

    def _read_followups(self) -> dict[str, tuple[str, str, dict[str, Any]]]:
        """follow-up id -> (fingerprint, text, metadata), for every stored response."""
        return {c.id: (record_fingerprint(c.text, c.metadata), c.text, c.metadata)
                for c in self._vendor.records(Where.eq(source_type=FOLLOWUP_SOURCE_TYPE),
                                              page_size=self._page_size)}

    def _read_versions(self, versions: set[tuple[str, str]]) -> Iterator[StoredChunk]:
        """The chunks of these document versions, read by doc_key and version; chunks of
        other versions of the same documents (an unfinished ingest's, an old one's) are left
        out, so a clean-up deleting them cannot shift the pages of this read."""
        wanted = sorted(versions)
        for start in range(0, len(wanted), VERSIONS_PER_READ):
            part = wanted[start : start + VERSIONS_PER_READ]
            where = (Where.eq(source_type=DOCUMENT_SOURCE_TYPE)
                     & Where.is_in("doc_key", sorted({k for k, _ in part}))
                     & Where.is_in("doc_sha", sorted({v for _, v in part})))
            for chunk in self._vendor.records(where, page_size=self._page_size):
                if (chunk.metadata.get("doc_key"), chunk.metadata.get("doc_sha")) in versions:
                    yield chunk

    def _gone(self, versions: set[tuple[str, str]]) -> set[tuple[str, str]]:
        """The versions of which the store holds no chunk any more."""
        return {(doc_key, version) for doc_key, version in versions
                if not self._vendor.holds_any(Where.eq(doc_key=doc_key, doc_sha=version))}

    def indexed(self) -> IndexedState:
        """What the index file holds now, whatever state any caller named."""
        with self._connection() as db:
            count = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
            return IndexedState(versions=frozenset(recorded_versions(db)),
                                followup_ids=frozenset(recorded_followups(db)), chunks=count)

    # Search -----------------------------------------------------------------------------

    def nearest(self, query: Query, n: int, *, where: WhereInput | None = None) -> list[Neighbour]:
        """The `n` best chunks by BM25 among this state's committed chunks and every
        follow-up; score = -bm25() (higher is better), ties in id order. `where` takes
        equality on metadata keys (`{"source_type": ...}`, `{"criterion_question_hash": h}`,
        several in `$and`); any other operator is refused with a ValueError."""
        conditions, parameters = where_sql(where)
        expression = match_expression(query.text)
        if expression is None or n <= 0:
            return []
        if not self._synced:
            self.sync()
        committed = self._committed
        with self._connection() as db:
            if conditions:
                rows = best_filtered(db, expression, committed, conditions, parameters, n)
            else:
                rows = best_by_postings(db, str(self.path), expression, committed, n)
                if rows is None:
                    rows = best_by_fts5(db, expression, committed, n)
        return [Neighbour(StoredChunk(record_id, text, json.loads(metadata)), -float(rank),
                          True)
                for record_id, text, metadata, rank in rows]

    def ranked_ids(self, query: Query, n: int) -> list[tuple[str, float]]:
        """(id, score) of the `n` best, unfiltered, as `nearest` ranks and scores them, with
        no record read."""
        expression = match_expression(query.text)
        if expression is None or n <= 0:
            return []
        if not self._synced:
            self.sync()
        committed = self._committed
        with self._connection() as db:
            ranked = best_by_postings(db, str(self.path), expression, committed, n,
                                      content=False)
            if ranked is None:
                ranked = best_by_fts5(db, expression, committed, n, content=False)
        return [(record_id, -float(rank)) for record_id, rank in ranked]

    def committed_ids(self, ids: Sequence[str]) -> set[str]:
        """Those of these ids this state holds as committed, no record read. A chunk's id
        names its document version (`chunk_record_id`): one of a version this state commits
        is held once the index is synced to it, and only the other ids are looked up."""
        if not ids:
            return set()
        if not self._synced:
            self.sync()
        held = {record_id for record_id in ids if self._of_a_committed_version(record_id)}
        rest = [record_id for record_id in ids if record_id not in held]
        if not rest:
            return held
        committed = self._committed
        with self._connection() as db:
            rows = db.execute("SELECT id, version_key FROM chunks "
                              "WHERE id IN (SELECT value FROM json_each(?))",
                              (json.dumps(rest),)).fetchall()
        return held | {record_id for record_id, version_key in rows
                       if of_state(version_key, committed)}

    def _of_a_committed_version(self, record_id: str) -> bool:
        """Whether the id is a chunk's of a document version this state commits."""
        named = chunk_record_version(record_id)
        return named is not None and self._versions.get(named[0]) == named[1]

    def committed_records(self, ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The rows of these ids that this state holds as committed (a chunk of a committed
        version, or a follow-up), as the sync copied them from the store: id -> record. An id
        missing from the answer is not in this state's index."""
        if not ids:
            return {}
        if not self._synced:
            self.sync()
        committed = self._committed
        with self._connection() as db:
            rows = db.execute(
                "SELECT c.id, t.text, c.metadata, c.version_key "
                "FROM chunks AS c JOIN chunk_text AS t ON t.rowid = c.rowid "
                "WHERE c.id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(ids)),)).fetchall()
        return {record_id: StoredChunk(record_id, shown_text(text), json.loads(metadata))
                for record_id, text, metadata, version_key in rows
                if of_state(version_key, committed)}

    # The file ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """The shared connection when no other thread holds it, else one of this call's own
        (given back to the process's idle connections when the call ends). A call that fails
        closes the connection it used: no transaction outlives it."""
        shared = self._holding.acquire(blocking=False)
        try:
            db = self._kept if shared and self._kept is not None else self._open()
            if shared:
                self._kept = db
            try:
                yield db
            except BaseException as exc:
                db.close()
                if shared:
                    self._kept = None
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"The lexical index {self.path} failed: {exc}") from exc
                raise
            if not shared:
                IDLE.give(self.path, db)
        finally:
            if shared:
                self._holding.release()

    def _open(self) -> sqlite3.Connection:
        """An idle connection to the file, else a new one."""
        kept = IDLE.take(self.path)
        if kept is not None:
            return kept
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                 check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"The lexical index {self.path} cannot be opened: {exc}") from exc
        try:
            prepare(db)
        except sqlite3.Error as exc:
            db.close()
            raise StoreError(f"The lexical index {self.path} failed: {exc}") from exc
        return db

    def close(self) -> None:
        """Be done with the shared connection: it goes back to the process's idle
        connections, outside any transaction, for the next search of this file."""
        with self._holding:
            if self._kept is not None:
                IDLE.give(self.path, self._kept)
                self._kept = None


def _insert(db: sqlite3.Connection, chunk: StoredChunk, version_key: str | None
            ) -> tuple[int, str]:
    """The chunk's rows; its rowid and the text indexed (see `indexed_text`)."""
    cursor = db.execute("INSERT INTO chunks (id, version_key, metadata) VALUES (?, ?, ?)",
                        (chunk.id, version_key, json.dumps(chunk.metadata, sort_keys=True)))
    text = indexed_text(chunk.text, chunk.metadata)
    db.execute("INSERT INTO chunk_text (rowid, text) VALUES (?, ?)", (cursor.lastrowid, text))
    return cursor.lastrowid, text


def _delete_rows(db: sqlite3.Connection, condition: str, parameters: Sequence[Any],
                 changes: Changes) -> int:
    rows = db.execute(f"SELECT c.rowid, t.text FROM chunks AS c LEFT JOIN chunk_text AS t "
                      f"ON t.rowid = c.rowid WHERE {condition}", parameters).fetchall()
    for rowid, text in rows:
        db.execute("DELETE FROM chunk_text WHERE rowid = ?", (rowid,))
        db.execute("DELETE FROM chunks WHERE rowid = ?", (rowid,))
        changes.remove(rowid, text)
    return len(rows)
