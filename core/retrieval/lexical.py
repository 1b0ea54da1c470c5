"""A BM25 index of one vendor's committed evidence, in SQLite FTS5, beside the vectors.

ChromaDB 1.5 has no BM25 outside Chroma Cloud, so the lexical side lives here: one SQLite
file per vendor, derived from the store and never a second source of truth. `sync` brings it
to the committed state a caller read from the manifest, in one transaction; queries return
only what that caller's manifest names.

FTS5 was chosen over tantivy and bm25s for transactional incremental updates, several
readers and writers across processes (WAL and a busy timeout), and no new dependency.
Measured here (2 cores; 5,000 generated chunks of 80 words with common English words among
them, 500 follow-ups; top 100): the SQL of a criterion's query, with the join to the
metadata and the committed-version filter, takes 3.5 ms (median), a whole `nearest` call 7 ms;
the bare MATCH 1.1 ms with stop words dropped against 4.9 ms with them kept (nearly every
chunk holds "the"). The first sync of those 5,500 records takes 0.5 s; a sync with nothing
to do 8-10 ms with 100 follow-ups and 30-36 ms with 500, nearly all of it ChromaDB reading
the follow-ups (see below).

A caller that read the manifest generation passes it: a sync finds the generation the
index last settled at in the file and, when it is the same, reads nothing from the store (one
SQLite read). Every document commit and every round renews the generation (a round's write of
its links does), so nothing the index holds can change without it. A sync records the
generation only once the index holds exactly the versions the caller named and every response
as the links at that generation fingerprint it: a sync that ran between a round's link write
and its responses' write (or after a process died there) does not settle, and the next one
reads the store again.

What one full sync reads:

- the committed versions (doc_key -> version) the caller passes, read from the manifest
  (the runner re-reads it only when its generation changed), and the versions recorded in
  the index; only versions missing from the index are fetched, by their doc_key;
- every follow-up response (id, text, metadata) in one metadata lookup, compared with the
  recorded fingerprints: a round sent again with edited answers keeps its ids, so ids alone
  would miss the change, and ChromaDB offers no cheaper sign that a record was rewritten
  (when anything is to change, they are read once more under the write lock);
- for each recorded version the caller's manifest no longer names, whether the store still
  holds a chunk of it (a one-record lookup). Only a version whose chunks are gone is removed:
  a reader that read the manifest a moment earlier may still name it, and a version a newer
  manifest replaced leaves the store in the writer's last step. Until then its rows stay,
  and a query never returns them to a caller whose manifest does not name them.

A chunk of an unfinished ingest (a version the manifest does not name yet) is never indexed."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.config import Settings
from core.errors import StoreError
from core.models import DOCUMENT_SOURCE_TYPE, FOLLOWUP_SOURCE_TYPE
from core.retrieval.source import Neighbour, Query, StoredChunk
from core.retrieval.source import Where as WhereInput
from core.store import VendorStore, Where, record_fingerprint
from core.store.records import version_key as _version_key

# The layout of one index file; a file of another layout is emptied and rebuilt (derived).
SCHEMA_VERSION = 1
# A sync holds the write lock while it reads new chunks from the store; other writers wait.
BUSY_TIMEOUT_S = 120.0
# Document versions per lookup when new versions are read from the store.
VERSIONS_PER_READ = 500
# Words that carry no evidence; kept only when a query has nothing else. FTS5 scores every
# row that holds any query term, so one "the" makes a query several times slower.
STOP_WORDS = frozenset(
    "a an and are as at be been but by can do does did for from had has have how i if in "
    "into is it its of on or our so than that the their them then there these they this "
    "those to was we were what when where which who why will with would you your".split()
)
# unicode61's word characters: letters and digits ("_" separates, as do "-", "'" and ".").
_WORD = re.compile(r"[^\W_]+")
_METADATA_KEY = re.compile(r"[A-Za-z0-9_]+")

_SCHEMA = """
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
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_text USING fts5(
    text, tokenize = 'unicode61 remove_diacritics 2');
"""
_TABLES = ("meta", "versions", "followups", "chunks", "chunk_text")


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


def match_expression(text: str) -> str | None:
    """The FTS5 query for user text: every word quoted (so `AES-256`, `what's`, `NEAR`, `*` or
    a stray quote are plain words), a word joined by punctuation also as a phrase (so
    `CVE-2024-3094` counts most where it is written whole), all OR-ed; None when no word."""
    terms: dict[str, str] = {}
    fallback: dict[str, str] = {}
    for token in text.split():
        parts = _WORD.findall(token)
        if len(parts) > 1:
            phrase = " ".join(parts)
            terms.setdefault(phrase.casefold(), f'"{phrase}"')
        for part in parts:
            quoted = f'"{part}"'
            fallback.setdefault(part.casefold(), quoted)
            if len(part) > 1 and part.casefold() not in STOP_WORDS:
                terms.setdefault(part.casefold(), quoted)
    chosen = terms or fallback
    return " OR ".join(chosen.values()) if chosen else None


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


class LexicalIndex:
    """One vendor's BM25 index at one committed state (the versions a caller read from the
    manifest), as a candidate source. Safe to use from several threads and processes at once;
    each call opens its own connection."""

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
                recorded = _recorded_versions(db)
                in_sync = (_meta(db, "collection_id") == collection_id and wanted <= recorded
                           and _recorded_followups(db) == {i: fingerprint for i, (
                               fingerprint, _, _) in followups.items()})
            finally:
                db.execute("COMMIT")
            if in_sync and not self._gone(recorded - wanted):
                report = SyncReport()
            else:
                with _immediate(db):
                    report = self._apply(db, collection_id, wanted)
            if self._generation is not None:
                self._settle(db, collection_id, wanted)
        self._synced = True
        return report

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
            with _immediate(db):
                _create_tables(db)
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
        with _immediate(db):
            indexed = _recorded_followups(db)
            if (_meta(db, "collection_id") == collection_id
                    and _recorded_versions(db) == wanted
                    and all(indexed.get(i) == fingerprint
                            for i, fingerprint in expected.items())):
                db.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)",
                           (self._generation,))

    def _apply(self, db: sqlite3.Connection, collection_id: str,
               wanted: set[tuple[str, str]]) -> SyncReport:
        """The sync's writes, under the write lock. The index and the follow-ups are read
        again: another process may have synced since the first look, and writing follow-ups
        read before it did would put older answers back."""
        rebuilt = _meta(db, "collection_id") != collection_id
        if rebuilt:  # another store (a new server on a reused port, a store made afresh)
            for table in ("versions", "followups", "chunks", "chunk_text"):
                db.execute(f"DELETE FROM {table}")
            db.execute("DELETE FROM meta WHERE key = 'generation'")
            db.execute("INSERT OR REPLACE INTO meta VALUES ('collection_id', ?)",
                       (collection_id,))
        recorded = _recorded_versions(db)
        added = removed = 0
        gone = self._gone(recorded - wanted)
        for doc_key, version in gone:
            removed += _delete_rows(db, "version_key = ?", (_version_key(doc_key, version),))
            db.execute("DELETE FROM versions WHERE doc_key = ? AND version = ?",
                       (doc_key, version))
        new_versions = wanted - recorded
        for chunk in self._read_versions(new_versions):
            key = _version_key(chunk.metadata["doc_key"], chunk.metadata["doc_sha"])
            removed += _delete_rows(db, "id = ?", (chunk.id,))
            _insert(db, chunk, key)
            added += 1
        db.executemany("INSERT OR IGNORE INTO versions VALUES (?, ?)", sorted(new_versions))

        followups = self._read_followups()
        known = _recorded_followups(db)
        stale = [i for i, fingerprint in known.items()
                 if followups.get(i, (None,))[0] != fingerprint]
        for record_id in stale:
            removed += _delete_rows(db, "id = ?", (record_id,))
        db.executemany("DELETE FROM followups WHERE id = ?", [(i,) for i in stale])
        fresh = [i for i in followups if known.get(i) != followups[i][0]]
        for record_id in fresh:
            fingerprint, text, metadata = followups[record_id]
            # A row whose fingerprint record was lost would make the insert collide, and
            # every later sync with it.
            removed += _delete_rows(db, "id = ?", (record_id,))
            _insert(db, StoredChunk(record_id, text, metadata), None)
            db.execute("INSERT INTO followups VALUES (?, ?)", (record_id, fingerprint))
            added += 1
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
            return IndexedState(versions=frozenset(_recorded_versions(db)),
                                followup_ids=frozenset(_recorded_followups(db)), chunks=count)

    # Search -----------------------------------------------------------------------------

    def nearest(self, query: Query, n: int, *, where: WhereInput | None = None) -> list[Neighbour]:
        """The `n` best chunks by BM25 among this state's committed chunks and every
        follow-up; score = -bm25() (higher is better), ties in id order. `where` takes
        equality on metadata keys (`{"source_type": ...}`, `{"criterion_question_hash": h}`,
        several in `$and`); any other operator is refused with a ValueError."""
        conditions, parameters = _where_sql(where)
        expression = match_expression(query.text)
        if expression is None or n <= 0:
            return []
        if not self._synced:
            self.sync()
        committed = {_version_key(k, v) for k, v in self._versions.items()}
        with self._connection() as db:
            if conditions:
                rows = self._filtered(db, expression, committed, conditions, parameters, n)
            else:
                rows = self._best(db, expression, committed, n)
        return [Neighbour(StoredChunk(record_id, text, json.loads(metadata)), -float(rank),
                          True)
                for record_id, text, metadata, rank in rows]

    @staticmethod
    def _best(db: sqlite3.Connection, expression: str, committed: set[str], n: int
              ) -> list[tuple[str, str, str, float]]:
        """The n best rows in two steps: FTS5 ranks the matches alone (one bm25() per match,
        nothing joined), then only the best few are read and checked against the caller's
        versions. The window starts at twice n, as wide as FTS5 ranks at about the same cost:
        chunks written from common templates often tie, and ties go by id, which FTS5 does
        not order by. It widens while the n-th row ties with the last one read, or while rows
        it holds are not in the caller's state."""
        window = 2 * n + 1
        while True:
            ranked = db.execute(
                "SELECT rowid, bm25(chunk_text) AS score FROM chunk_text "
                "WHERE chunk_text MATCH ? ORDER BY score LIMIT ?", (expression, window)
            ).fetchall()
            rank_of = dict(ranked)
            found = db.execute(
                "SELECT rowid, id, version_key FROM chunks "
                "WHERE rowid IN (SELECT value FROM json_each(?))",
                (json.dumps(list(rank_of)),)).fetchall()
            best = sorted(((rank_of[rowid], record_id, rowid)
                           for rowid, record_id, version_key in found
                           if version_key is None or version_key in committed))[:n]
            exhausted = len(ranked) < window
            if exhausted or (len(best) == n and best[-1][0] < ranked[-1][1]):
                break
            window *= 2
        content = {rowid: (text, metadata) for rowid, text, metadata in db.execute(
            "SELECT c.rowid, t.text, c.metadata "
            "FROM chunks AS c JOIN chunk_text AS t ON t.rowid = c.rowid "
            "WHERE c.rowid IN (SELECT value FROM json_each(?))",
            (json.dumps([rowid for _, _, rowid in best]),))}
        return [(record_id, *content[rowid], rank) for rank, record_id, rowid in best
                if rowid in content]

    @staticmethod
    def _filtered(db: sqlite3.Connection, expression: str, committed: set[str],
                  conditions: list[str], parameters: list[Any], n: int
                  ) -> list[tuple[str, str, str, float]]:
        """The n best rows that also meet metadata conditions, in one query."""
        sql = (
            "SELECT c.id, t.text, c.metadata, bm25(chunk_text) AS rank "
            "FROM chunk_text AS t JOIN chunks AS c ON c.rowid = t.rowid "
            "WHERE chunk_text MATCH ? "
            "AND (c.version_key IS NULL "
            "     OR c.version_key IN (SELECT value FROM json_each(?)))"
            + "".join(f" AND {condition}" for condition in conditions)
            + " ORDER BY rank, c.id LIMIT ?"
        )
        return db.execute(sql, (expression, json.dumps(sorted(committed)), *parameters, n)
                          ).fetchall()

    # The file ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"The lexical index {self.path} cannot be opened: {exc}") from exc
        try:
            _prepare(db)
            yield db
        except sqlite3.Error as exc:
            raise StoreError(f"The lexical index {self.path} failed: {exc}") from exc
        finally:
            db.close()


def _prepare(db: sqlite3.Connection) -> None:
    """WAL (readers never wait for a writer) and the current schema; a file of another schema
    is emptied, since everything in it can be read again from the store."""
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    if _schema_version(db) == SCHEMA_VERSION:
        return
    with _immediate(db):
        if _schema_version(db) != SCHEMA_VERSION:
            _create_tables(db)


@contextlib.contextmanager
def _immediate(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once (other writers wait), rolled back on any error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _create_tables(db: sqlite3.Connection) -> None:
    """The tables dropped and made afresh, inside the caller's transaction."""
    for table in _TABLES:
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
    value = _meta(db, "schema_version")
    return int(value) if value is not None and value.isdigit() else None


def _meta(db: sqlite3.Connection, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def _recorded_versions(db: sqlite3.Connection) -> set[tuple[str, str]]:
    return set(db.execute("SELECT doc_key, version FROM versions").fetchall())


def _recorded_followups(db: sqlite3.Connection) -> dict[str, str]:
    return dict(db.execute("SELECT id, fingerprint FROM followups").fetchall())


def _insert(db: sqlite3.Connection, chunk: StoredChunk, version_key: str | None) -> None:
    cursor = db.execute("INSERT INTO chunks (id, version_key, metadata) VALUES (?, ?, ?)",
                        (chunk.id, version_key, json.dumps(chunk.metadata, sort_keys=True)))
    db.execute("INSERT INTO chunk_text (rowid, text) VALUES (?, ?)",
               (cursor.lastrowid, chunk.text))


def _delete_rows(db: sqlite3.Connection, condition: str, parameters: Sequence[Any]) -> int:
    rowids = [r for (r,) in db.execute(f"SELECT rowid FROM chunks WHERE {condition}",
                                        parameters).fetchall()]
    for rowid in rowids:
        db.execute("DELETE FROM chunk_text WHERE rowid = ?", (rowid,))
        db.execute("DELETE FROM chunks WHERE rowid = ?", (rowid,))
    return len(rowids)


def _where_sql(where: WhereInput | None) -> tuple[list[str], list[Any]]:
    """SQL conditions for a metadata filter of equalities (the store's `Where`, or its
    mapping form)."""
    try:
        parsed = Where.of(where)
    except ValueError as exc:
        raise ValueError(f"where: the lexical index takes only equality filters on a metadata "
                         f"key, not {json.dumps(where, default=str)} ({exc})") from None
    conditions, parameters = [], []
    for condition in parsed.conditions if parsed else ():
        key, value = condition.key, condition.value
        if condition.op != "eq" or not _METADATA_KEY.fullmatch(key):
            shown = json.dumps(where, default=str) if not isinstance(where, Where) else (
                repr(condition))
            raise ValueError(f"where: the lexical index takes only equality filters on a "
                             f"metadata key, not {shown}")
        conditions.append(f"json_extract(c.metadata, '$.\"{key}\"') = ?")
        parameters.append(value)
    return conditions, parameters
