"""A BM25 index of one vendor's committed evidence, in SQLite FTS5, beside the vectors.

ChromaDB 1.5 has no BM25 outside Chroma Cloud, so the lexical side lives here: one SQLite
file per vendor, derived from the store and never a second source of truth. `sync` brings it
to the committed state a caller read from the manifest, in one transaction; queries return
only what that caller's manifest names.

FTS5 was chosen over tantivy and bm25s for transactional incremental updates, several
readers and writers across processes (WAL and a busy timeout), and no new dependency.
Measured here with FTS5 ranking (2 cores; 5,000 generated chunks of 80 words with common
English words among them, 500 follow-ups; top 100): the SQL of a criterion's query, with the
join to the metadata and the committed-version filter, takes 3.5 ms (median), a whole
`nearest` call 7 ms; the bare MATCH 1.1 ms with stop words dropped against 4.9 ms with them
kept (nearly every chunk holds "the"). The first sync of those 5,500 records takes 0.5 s; a
sync with nothing to do 8-10 ms with 100 follow-ups and 30-36 ms with 500, nearly all of it
ChromaDB reading the follow-ups (see below).

FTS5 alone did not scale with a vendor's chunks: it calls bm25() on every row that matches,
reading each row's size, and criteria share words with nearly every chunk (the OR of a
criterion's 8-12 words matches about 90% of the rows). With 100,000 generated policy
paragraphs the bare ranked MATCH took 117-148 ms (median; 14-21 ms with 10,000). So the index
also keeps postings of its own, in the same file and written by the same transaction as
chunk_text, so they follow the store as the rows do and a killed sync leaves both as they
were: per term and block of 4,096 rowids, one row of `postings` with the rowids within the
block, the term's frequency in each and its token offsets (numpy arrays as blobs: 16 bits a
rowid, 8, 16 or 32 a count); per block, each row's length in tokens (`lengths`). Their terms
are FTS5's own, never a second tokenizer's: a first sync into an empty table reads them from
the full-text index (an fts5vocab `instance` table); later syncs put the texts they add and
remove into a scratch FTS5 table with the same tokenizer and read them there; a query's
phrases are tokenised the same way. A query then reads the blocks of its terms only and
computes bm25() with numpy over the rows holding them, in fts5Bm25Function's order of
operations and in doubles: N and the average length from the lengths, idf = log((N - hits +
0.5) / (hits + 0.5)) (1e-6 where not above 0), idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b *
D / avgdl)) per phrase, summed in the query's order from 0.0 and negated. The scores are
FTS5's to the bit, so the rows, their order and their ties are the same as FTS5's; a phrase of
several tokens ("AES 256") is matched on the offsets. Only the best few rows are then read, as
before. A row added after a block's last rewrites that block of each of its terms; a row
removed, the blocks of its terms that held it.

FTS5 still ranks queries with metadata filters (the hybrid first stage passes none) and
any query the postings cannot answer: a phrase with no token, or a table whose row and
token counts in FTS5's own record differ from the lengths (the full-text table changed
behind the postings; `evidence check` reports postings that differ from the full-text index
and its rebuild mends them). A process keeps, per index state, each row's part of the
denominator and the phrases' parts of the score; every transaction that changes the
postings draws a new token for the state, so nothing kept is taken for another.

Measured here (2 cores with other work running, a load of 2.5-4; 100,000 generated policy
paragraphs of about 120 tokens, one in ten a follow-up; top 100 of 100 criteria and generated
questions, a connection per query as `nearest` opens one): FTS5 ranking 123-149 ms (median),
the postings 8.5 ms, 10.2 ms with no phrase's part kept from earlier queries; with 10,000
paragraphs 16-20 ms against 3.9-4.2 ms. The first sync of 100,000 chunks spends 5.8-7.6 s on
postings besides 4-4.5 s on the rows (ChromaDB's read of the records comes on top of both); a
sync adding 8 answers spends 30-45 ms on them, one replacing a 20-chunk document 150-185 ms
(its rows' terms' blocks are rewritten where they were). The file holds 198 MB for 100,000
chunks against 129 MB without postings.

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
import functools
import itertools
import json
import math
import operator
import os
import re
import sqlite3
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from core.config import Settings
from core.errors import StoreError
from core.models import DOCUMENT_SOURCE_TYPE, FOLLOWUP_SOURCE_TYPE
from core.retrieval.source import Neighbour, Query, StoredChunk
from core.retrieval.source import Where as WhereInput
from core.store import VendorStore, Where, record_fingerprint
from core.store.records import version_key as _version_key

# The layout of one index file; a file of another layout is emptied and rebuilt (derived).
SCHEMA_VERSION = 2
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
# One quoted phrase of the expression `match_expression` builds (its words hold no quote).
_PHRASE = re.compile(r'"([^"]*)"')
# The full-text table's tokenizer; the postings take their terms from FTS5 itself.
TOKENIZE = "unicode61 remove_diacritics 2"
# Rows per block of postings and lengths: a row's block is rowid >> BLOCK_BITS, its place in
# the block (stored as 16 bits) rowid & _IN_BLOCK.
BLOCK_BITS = 12
_IN_BLOCK = (1 << BLOCK_BITS) - 1
# The constants of FTS5's bm25() (SQLite's fts5_aux.c), and its least IDF.
_K1 = 1.2
_B = 0.75
_LEAST_IDF = 1e-6
# Bytes of phrases' parts of the score kept per process (`_Parts`).
_PARTS_BYTES = 64 << 20
# Phrases whose tokens are kept per process (the tokens of a phrase never change).
_TOKENS_KEPT = 20_000

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
_TABLES = ("meta", "versions", "followups", "chunks", "chunk_text", "postings", "lengths")


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
    manifest), as a candidate source. Safe to use from several threads and processes at once.
    Calls one after another share one connection to the index file (a retrieval's sync check,
    search and record reads open it once, not three times, about 0.4 ms each); a call made
    while another thread holds it opens its own. `close()` closes the shared one."""

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
    def _committed(self) -> set[str]:
        """This state's versions as the index keys its chunk rows (a follow-up has none)."""
        return {_version_key(k, v) for k, v in self._versions.items()}

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
            for table in ("versions", "followups", "chunks", "chunk_text", "postings",
                          "lengths"):
                db.execute(f"DELETE FROM {table}")
            db.execute("DELETE FROM meta WHERE key = 'generation'")
            db.execute("INSERT OR REPLACE INTO meta VALUES ('collection_id', ?)",
                       (collection_id,))
        changes = _Changes(empty=db.execute("SELECT 1 FROM chunk_text LIMIT 1").fetchone()
                           is None)
        recorded = _recorded_versions(db)
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
            changes.add(_insert(db, chunk, key), chunk.text)
            added += 1
        db.executemany("INSERT OR IGNORE INTO versions VALUES (?, ?)", sorted(new_versions))

        followups = self._read_followups()
        known = _recorded_followups(db)
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
            changes.add(_insert(db, StoredChunk(record_id, text, metadata), None), text)
            db.execute("INSERT INTO followups VALUES (?, ?)", (record_id, fingerprint))
            added += 1
        _write_postings(db, changes)
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
        committed = self._committed
        with self._connection() as db:
            if conditions:
                rows = self._filtered(db, expression, committed, conditions, parameters, n)
            else:
                rows = self._ranked(db, str(self.path), expression, committed, n)
                if rows is None:
                    rows = self._best(db, expression, committed, n)
        return [Neighbour(StoredChunk(record_id, text, json.loads(metadata)), -float(rank),
                          True)
                for record_id, text, metadata, rank in rows]

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
        return {record_id: StoredChunk(record_id, text, json.loads(metadata))
                for record_id, text, metadata, version_key in rows
                if _of_state(version_key, committed)}

    @staticmethod
    def _ranked(db: sqlite3.Connection, path: str, expression: str, committed: set[str],
                n: int) -> list[tuple[str, str, str, float]] | None:
        """The n best rows as `_best` finds them (the same rows, order and scores), with
        bm25() computed from the postings over the query's terms alone (`_bm25`), and only
        the best few read and checked against the caller's versions: the window of `_best`,
        widened on the same terms. None when the postings cannot answer: `_best` does."""
        phrases = _phrases(expression)
        if phrases is None:
            return None
        with _snapshot(db):
            scored = _bm25(db, path, phrases)
            if scored is None:
                return None
            matched, rank = scored
            window = n + n // 4 + 1  # ties and rows of other versions widen it
            while True:
                exhausted = len(matched) <= window
                chosen = (np.arange(len(matched)) if exhausted
                          else np.argpartition(rank, window - 1)[:window])
                if not len(chosen):
                    return []
                rank_of = dict(zip(matched[chosen].tolist(), rank[chosen].tolist(),
                                   strict=True))
                best = _committed_best(db, rank_of, committed, n)
                if exhausted or (len(best) == n and best[-1][0] < max(rank_of.values())):
                    break
                window *= 2
            return _with_content(db, best)

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
            best = _committed_best(db, rank_of, committed, n)
            exhausted = len(ranked) < window
            if exhausted or (len(best) == n and best[-1][0] < ranked[-1][1]):
                break
            window *= 2
        return _with_content(db, best)

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
        """The shared connection when no other thread holds it, else one of this call's own.
        A call that fails closes the connection it used: no transaction outlives it."""
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
                db.close()
        finally:
            if shared:
                self._holding.release()

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                 check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"The lexical index {self.path} cannot be opened: {exc}") from exc
        try:
            _prepare(db)
        except sqlite3.Error as exc:
            db.close()
            raise StoreError(f"The lexical index {self.path} failed: {exc}") from exc
        return db

    def close(self) -> None:
        """Close the shared connection (a later call opens another)."""
        with self._holding:
            if self._kept is not None:
                self._kept.close()
                self._kept = None


def _of_state(version_key: str | None, committed: set[str]) -> bool:
    """Whether a row belongs to the state searched: a follow-up (it has no version key) or a
    chunk of one of the state's committed versions."""
    return version_key is None or version_key in committed


def _committed_best(db: sqlite3.Connection, rank_of: dict[int, float], committed: set[str],
                    n: int) -> list[tuple[float, str, int]]:
    """(rank, id, rowid) of the n best ranked rows that are follow-ups or of the caller's
    committed versions, in rank and id order."""
    found = db.execute(
        "SELECT rowid, id, version_key FROM chunks "
        "WHERE rowid IN (SELECT value FROM json_each(?))",
        (json.dumps(list(rank_of)),)).fetchall()
    return sorted(((rank_of[rowid], record_id, rowid)
                   for rowid, record_id, version_key in found
                   if _of_state(version_key, committed)))[:n]


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


def _insert(db: sqlite3.Connection, chunk: StoredChunk, version_key: str | None) -> int:
    """The chunk's rows; its rowid."""
    cursor = db.execute("INSERT INTO chunks (id, version_key, metadata) VALUES (?, ?, ?)",
                        (chunk.id, version_key, json.dumps(chunk.metadata, sort_keys=True)))
    db.execute("INSERT INTO chunk_text (rowid, text) VALUES (?, ?)",
               (cursor.lastrowid, chunk.text))
    return cursor.lastrowid


def _delete_rows(db: sqlite3.Connection, condition: str, parameters: Sequence[Any],
                 changes: _Changes) -> int:
    rows = db.execute(f"SELECT c.rowid, t.text FROM chunks AS c LEFT JOIN chunk_text AS t "
                      f"ON t.rowid = c.rowid WHERE {condition}", parameters).fetchall()
    for rowid, text in rows:
        db.execute("DELETE FROM chunk_text WHERE rowid = ?", (rowid,))
        db.execute("DELETE FROM chunks WHERE rowid = ?", (rowid,))
        changes.remove(rowid, text)
    return len(rows)


def _with_content(db: sqlite3.Connection, best: list[tuple[float, str, int]]
                  ) -> list[tuple[str, str, str, float]]:
    """(id, text, metadata, rank) of the chosen rows (rank, id, rowid), in their order."""
    content = {rowid: (text, metadata) for rowid, text, metadata in db.execute(
        "SELECT c.rowid, t.text, c.metadata "
        "FROM chunks AS c JOIN chunk_text AS t ON t.rowid = c.rowid "
        "WHERE c.rowid IN (SELECT value FROM json_each(?))",
        (json.dumps([rowid for _, _, rowid in best]),))}
    return [(record_id, *content[rowid], rank) for rank, record_id, rowid in best
            if rowid in content]


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


# Postings ---------------------------------------------------------------------------------------

class _Postings(NamedTuple):
    """One term's postings in rowid order: the rows holding it, its frequency in each, and
    each row's token offsets of it (tf of them per row, concatenated; None where not read).
    `ends`: where each row's offsets end in `positions` (None where not worked out)."""

    rowids: np.ndarray
    tfs: np.ndarray
    positions: np.ndarray | None = None
    ends: np.ndarray | None = None


_NO_ROWS = np.zeros(0, dtype=np.int64)


@dataclass
class _Changes:
    """The rows one transaction removed (with their text as it was before it) and added (with
    the text it wrote), for their postings. `empty`: the full-text table held no row when
    the transaction began."""

    empty: bool = False
    removed: dict[int, str | None] = field(default_factory=dict)
    added: dict[int, str] = field(default_factory=dict)

    def remove(self, rowid: int, text: str | None) -> None:
        if rowid in self.added:  # written by this transaction: it never had postings
            del self.added[rowid]
        else:
            self.removed.setdefault(rowid, text)

    def add(self, rowid: int, text: str) -> None:
        self.added[rowid] = text


def _write_postings(db: sqlite3.Connection, changes: _Changes) -> None:
    """The postings and lengths of the rows a transaction removed and added, written in that
    transaction. A removed row's terms are its text's, tokenised by FTS5; only the blocks of
    those terms that hold it are rewritten, and of an added row's terms the blocks that take
    its rowid. Into a table that held no row, the new rows' terms are read from the
    full-text index itself, with no second tokenising."""
    if not changes.removed and not changes.added:
        return
    if changes.empty:
        db.execute("DELETE FROM postings")
        db.execute("DELETE FROM lengths")
        db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_instances "
                   "USING fts5vocab(main, chunk_text, instance)")
        new = _instances(db, "temp.chunk_instances")
    else:
        new = _tokenised(changes.added)
    changed_in = _by_block(np.array(sorted(set(changes.removed) | set(changes.added)),
                                    dtype=np.int64))
    touched: dict[int, set[str]] = defaultdict(set)  # block -> terms
    old = _tokenised({r: t for r, t in changes.removed.items() if t is not None})
    for term, postings in (*old.items(), *new.items()):
        for block in np.unique(postings.rowids >> BLOCK_BITS).tolist():
            touched[block].add(term)

    writes: list[tuple[str, int, bytes, bytes, bytes]] = []
    deletes: list[tuple[str, int]] = []
    for block, terms in sorted(touched.items()):
        stored = {} if changes.empty else {
            term: (rowids, tfs, positions) for term, rowids, tfs, positions in db.execute(
                "SELECT term, rowids, tfs, positions FROM postings WHERE block = ? "
                "AND term IN (SELECT value FROM json_each(?))",
                (block, json.dumps(sorted(terms))))}
        changed = changed_in.get(block, _NO_ROWS)
        for term in sorted(terms):
            part = _in_block(new.get(term), block)
            held = stored.get(term)
            blobs = None if held is None else _appended(held, block, changed, part)
            if blobs is None:
                merged = _merged(None if held is None else _unpacked(block, *held), changed,
                                 part)
                if len(merged.rowids):
                    blobs = (_pack_rowids(merged.rowids), _pack_counts(merged.tfs),
                             _pack_counts(merged.positions))
            if blobs is not None:
                writes.append((term, block, *blobs))
            elif held is not None:
                deletes.append((term, block))
    db.executemany("DELETE FROM postings WHERE term = ? AND block = ?", deletes)
    db.executemany("INSERT OR REPLACE INTO postings VALUES (?, ?, ?, ?, ?)", writes)

    # A row's length is its number of tokens: the sum of its terms' frequencies.
    added = np.array(sorted(changes.added), dtype=np.int64)
    counts = np.zeros(len(added), dtype=np.int64)
    for postings in new.values():
        counts += np.bincount(np.searchsorted(added, postings.rowids), weights=postings.tfs,
                              minlength=len(added)).astype(np.int64)
    lengths = _Postings(added, counts)
    for block, in_block in changed_in.items():
        row = None if changes.empty else db.execute(
            "SELECT rowids, lengths FROM lengths WHERE block = ?", (block,)).fetchone()
        held = None if row is None else _unpacked(block, row[0], row[1])
        merged = _merged(held, in_block, _in_block(lengths, block))
        if len(merged.rowids):
            db.execute("INSERT OR REPLACE INTO lengths VALUES (?, ?, ?)",
                       (block, _pack_rowids(merged.rowids), _pack_counts(merged.tfs)))
        elif row is not None:
            db.execute("DELETE FROM lengths WHERE block = ?", (block,))


def _in_block(new: _Postings | None, block: int) -> _Postings | None:
    """The rows of one block of postings that cover every block (their `ends` known when
    they have offsets)."""
    if new is None:
        return None
    low, high = np.searchsorted(new.rowids, [block << BLOCK_BITS, (block + 1) << BLOCK_BITS])
    if low == high:
        return None
    positions = None
    if new.positions is not None:
        start = int(new.ends[low - 1]) if low else 0
        positions = new.positions[start:int(new.ends[high - 1])]
    return _Postings(new.rowids[low:high], new.tfs[low:high], positions)


def _appended(held: tuple[bytes, bytes, bytes], block: int, changed: np.ndarray,
              new: _Postings | None) -> tuple[bytes, bytes, bytes] | None:
    """A stored block's blobs with new rows after its last one added to their ends, without
    reading the block back: what packing the merged block gives, since the widths of its
    counts and offsets already hold the new ones. None when that is not so (no new rows, a
    changed row not after the block's last, a value needing a wider type)."""
    rowids, tfs, positions = held
    last = (block << BLOCK_BITS) + int.from_bytes(rowids[-2:], "little")
    if new is None or int(new.rowids[0]) <= last or (len(changed) and int(changed[0]) <= last):
        return None
    tf_type = _COUNT_TYPES[len(tfs) // (len(rowids) // 2)]
    position_type = _COUNT_TYPES[len(positions) // int(
        np.frombuffer(tfs, dtype=tf_type).sum(dtype=np.int64))]
    if (int(new.tfs.max()) > np.iinfo(tf_type).max
            or int(new.positions.max()) > np.iinfo(position_type).max):
        return None
    return (rowids + _pack_rowids(new.rowids), tfs + new.tfs.astype(tf_type).tobytes(),
            positions + new.positions.astype(position_type).tobytes())


def _merged(held: _Postings | None, changed: np.ndarray, new: _Postings | None
            ) -> _Postings:
    """One block with the changed rows taken out and the block's new rows put in, in rowid
    order."""
    parts = []
    if held is not None and (not len(changed) or changed[0] > held.rowids[-1]
                             or changed[-1] < held.rowids[0]):
        parts.append(held)  # no changed row among them (rows added after the block's last)
    elif held is not None:
        keep = ~np.isin(held.rowids, changed, assume_unique=True)
        parts.append(_Postings(held.rowids[keep], held.tfs[keep],
                               None if held.positions is None
                               else held.positions[np.repeat(keep, held.tfs)]))
    if new is not None:
        parts.append(new)
    if not parts:
        return _Postings(_NO_ROWS, _NO_ROWS, _NO_ROWS)
    rowids = np.concatenate([part.rowids for part in parts]).astype(np.int64)
    tfs = np.concatenate([part.tfs for part in parts]).astype(np.int64)
    positions = (None if parts[0].positions is None
                 else np.concatenate([part.positions for part in parts]).astype(np.int64))
    if len(rowids) > 1 and bool((rowids[1:] < rowids[:-1]).any()):
        if positions is not None:  # each row's offsets move with it, in their order
            positions = positions[np.argsort(np.repeat(rowids, tfs), kind="stable")]
        order = np.argsort(rowids, kind="stable")
        rowids, tfs = rowids[order], tfs[order]
    return _Postings(rowids, tfs, positions)


def _by_block(rowids: np.ndarray) -> dict[int, np.ndarray]:
    """Sorted rowids split by block."""
    if not len(rowids):
        return {}
    blocks = rowids >> BLOCK_BITS
    starts = np.flatnonzero(np.concatenate(([True], blocks[1:] != blocks[:-1])))
    return {int(blocks[start]): part
            for start, part in zip(starts, np.split(rowids, starts[1:]), strict=True)}


def _instances(db: sqlite3.Connection, vocab: str) -> dict[str, _Postings]:
    """term -> postings (with offsets) of every row of the full-text table behind `vocab`,
    an fts5vocab table of type `instance` (one row per token, in term, rowid and offset
    order). Each term's tokens come as one string of (rowid << 32 | offset), so that SQLite,
    not Python, steps through them."""
    found = {}
    for term, packed in db.execute(
            f"SELECT term, group_concat((doc << 32) | offset) FROM {vocab} GROUP BY term"):
        keys = np.fromstring(packed, dtype=np.int64, sep=",")
        if len(keys) > 1 and bool((keys[1:] < keys[:-1]).any()):
            keys.sort()
        found[term] = _runs(keys)
    return found


def _runs(keys: np.ndarray) -> _Postings:
    """Postings from sorted (rowid << 32 | offset) keys, one per token."""
    rows = keys >> 32
    starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
    ends = np.append(starts[1:], len(keys))
    return _Postings(rows[starts], ends - starts, (keys & 0xFFFFFFFF).astype(np.uint32), ends)


def _tokenised(texts: Mapping[int, str]) -> dict[str, _Postings]:
    """term -> postings (with offsets) of these texts (rowid -> text), as the full-text table
    tokenises them: they are put into a scratch FTS5 table with the same tokenizer."""
    if not texts:
        return {}
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    try:
        scratch.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize = '{TOKENIZE}')")
        scratch.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        scratch.execute("BEGIN")
        scratch.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", texts.items())
        return _instances(scratch, "v")
    finally:
        scratch.close()


def _pack_rowids(rowids: np.ndarray) -> bytes:
    """A block's sorted rowids, by their place in the block (16 bits each)."""
    return (rowids & _IN_BLOCK).astype("<u2").tobytes()


def _pack_counts(counts: np.ndarray) -> bytes:
    """Frequencies, lengths or offsets: 8, 16 or 32 bits each, the fewest that hold the
    largest (the width is the blob's length over the number of values)."""
    largest = int(counts.max()) if len(counts) else 0
    dtype = "u1" if largest <= 0xFF else "<u2" if largest <= 0xFFFF else "<u4"
    return counts.astype(dtype).tobytes()


_COUNT_TYPES = {1: "u1", 2: "<u2", 4: "<u4"}


def _unpacked(block: int, rowids: bytes, tfs: bytes, positions: bytes | None = None
              ) -> _Postings:
    """One stored block (postings, or lengths with `tfs` the lengths)."""
    return _decoded([block], [rowids], [tfs], None if positions is None else [positions])


def _decoded(blocks: list[int], rowids: list[bytes], counts: list[bytes],
             positions: list[bytes] | None) -> _Postings:
    """Stored blocks of one term (or of the lengths), in block order, as one postings, with
    numpy reading the blobs of a kind joined rather than block by block."""
    sizes = np.array([len(blob) // 2 for blob in rowids], dtype=np.int64)
    every = (np.frombuffer(b"".join(rowids), dtype="<u2").astype(np.int64)
             + np.repeat(np.array(blocks, dtype=np.int64) << BLOCK_BITS, sizes))
    tfs = _joined_counts(counts, sizes.tolist())
    held = None
    if positions is not None:
        ends = np.cumsum(tfs, dtype=np.int64)
        bounds = np.concatenate(([0], ends[np.cumsum(sizes) - 1]))
        held = _joined_counts(positions, np.diff(bounds).tolist())
    return _Postings(every, tfs, held)


def _joined_counts(blobs: list[bytes], sizes: list[int]) -> np.ndarray:
    """Blocks of counts (8, 16 or 32 bits each) as one array."""
    widths = {len(blob) // size for blob, size in zip(blobs, sizes, strict=True)}
    if len(widths) == 1:
        return np.frombuffer(b"".join(blobs), dtype=_COUNT_TYPES[widths.pop()])
    return np.concatenate([
        np.frombuffer(blob, dtype=_COUNT_TYPES[len(blob) // size]).astype(np.int64)
        for blob, size in zip(blobs, sizes, strict=True)])


class _QueryTokens:
    """A phrase of a query as FTS5 tokenises it, from a scratch FTS5 table with the full-text
    table's tokenizer (one per process), remembered per phrase."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pid = 0
        self._known: dict[str, tuple[str, ...]] = {}

    def __call__(self, phrase: str) -> tuple[str, ...]:
        known = self._known.get(phrase)
        if known is not None:
            return known
        with self._lock:
            if self._db is None or self._pid != os.getpid():  # a forked child makes its own
                self._db = sqlite3.connect(":memory:", isolation_level=None,
                                           check_same_thread=False)
                self._db.execute(
                    f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize = '{TOKENIZE}')")
                self._db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
                self._pid = os.getpid()
            self._db.execute("BEGIN")
            try:
                self._db.execute("INSERT INTO t (rowid, text) VALUES (1, ?)", (phrase,))
                tokens = tuple(term for (term,) in self._db.execute(
                    "SELECT term FROM v ORDER BY offset"))
            finally:
                self._db.execute("ROLLBACK")
            if len(self._known) >= _TOKENS_KEPT:
                self._known.clear()
            self._known[phrase] = tokens
        return tokens


_query_tokens = _QueryTokens()


def _phrases(expression: str) -> list[str] | None:
    """The quoted phrases of an expression `match_expression` built, in order; None for any
    other expression."""
    phrases = _PHRASE.findall(expression)
    return phrases if " OR ".join(f'"{p}"' for p in phrases) == expression else None


@contextlib.contextmanager
def _snapshot(db: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every read inside it sees the same committed state."""
    db.execute("BEGIN")
    try:
        yield
    finally:
        if db.in_transaction:
            db.execute("COMMIT")


def _bm25(db: sqlite3.Connection, path: str, phrases: list[str]
          ) -> tuple[np.ndarray, np.ndarray] | None:
    """(rowids, bm25()) of every row matching any of the phrases, as FTS5's bm25() gives them
    for the OR of the phrases: per phrase, idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * D
    / avgdl)) with tf its instances in the row, D the row's tokens, avgdl the table's tokens
    over its rows and idf log((N - hits + 0.5) / (hits + 0.5)) (1e-6 where not above 0),
    summed in the query's order from 0.0 and negated, each operation in FTS5's order and in
    doubles, so that the values are FTS5's to the bit. None when the postings cannot answer
    (a phrase with no token, postings or lengths missing rows)."""
    tokens = [_query_tokens(phrase) for phrase in phrases]
    if not all(tokens):
        return None
    state = _row_state(db, path)
    if state is None:  # no lengths: an empty table matches nothing, any other is FTS5's
        if db.execute("SELECT 1 FROM chunk_text LIMIT 1").fetchone() is None:
            return _NO_ROWS, np.zeros(0)
        return None
    if _fts5_totals(db) != (state.rows, state.tokens):  # changed behind the postings' back
        return None
    parts = {t: _PARTS.get((path, state.token, t)) for t in tokens} if state.token else {}
    missing = [t for t in dict.fromkeys(tokens) if parts.get(t) is None]
    singles = _read_postings(db, sorted({t[0] for t in missing if len(t) == 1}),
                             positions=False)
    within = _read_postings(db, sorted({t for ts in missing if len(ts) > 1 for t in ts}),
                            positions=True)
    for phrase_tokens in missing:
        if len(phrase_tokens) == 1:
            found = singles.get(phrase_tokens[0])
        elif all(t in within for t in phrase_tokens):
            found = _phrase_postings([within[t] for t in phrase_tokens])
        else:
            found = None
        if found is not None and len(found.rowids) and int(found.rowids[-1]) >= len(state.norm):
            return None  # postings of a row the lengths do not hold
        parts[phrase_tokens] = part = _part(found, state)
        if state.token:
            _PARTS.put((path, state.token, phrase_tokens), part)

    # Every part is above 0 (idf >= 1e-6, tf >= 1): a row is matched where its sum is not 0.
    score, summed = _workspace(len(state.norm))
    for phrase_tokens in tokens:
        rowids, part = parts[phrase_tokens]
        total = summed[:len(rowids)]  # score += part, in a buffer the thread keeps
        np.take(score, rowids, out=total)
        np.add(total, part, out=total)
        score[rowids] = total
    matched = np.flatnonzero(score)
    return matched, -score[matched]


def _part(found: _Postings | None, state: _RowState) -> tuple[np.ndarray, np.ndarray]:
    """(rowids, idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * D / avgdl))) of a phrase's
    rows, in fts5Bm25Function's order of operations."""
    if found is None or not len(found.rowids):
        return _NO_ROWS, np.zeros(0)
    hits = len(found.rowids)
    idf = math.log((state.rows - hits + 0.5) / (hits + 0.5))
    if idf <= 0.0:
        idf = _LEAST_IDF
    denominator = np.take(state.norm, found.rowids)
    tf = found.tfs.astype(np.float64)
    np.add(tf, denominator, out=denominator)
    np.multiply(tf, _K1 + 1.0, out=tf)
    np.divide(tf, denominator, out=tf)
    np.multiply(tf, idf, out=tf)
    return found.rowids, tf


class _Parts:
    """Phrases' parts of the score (`_part`) by (file, state token, phrase tokens), kept up to
    a number of bytes in all, the least recently used dropped first. A token names one
    content of the postings and lengths (every transaction that changes them draws a new
    one), and a part depends on nothing else."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._held: OrderedDict[tuple[str, str, tuple[str, ...]],
                                tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, tuple[str, ...]]
            ) -> tuple[np.ndarray, np.ndarray] | None:
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                self._held.move_to_end(key)
            return held

    def put(self, key: tuple[str, str, tuple[str, ...]],
            part: tuple[np.ndarray, np.ndarray]) -> None:
        size = part[0].nbytes + part[1].nbytes
        if size > self._limit:
            return
        with self._lock:
            if key in self._held:
                return
            self._held[key] = part
            self._bytes += size
            while self._bytes > self._limit:
                _, (rowids, dropped) = self._held.popitem(last=False)
                self._bytes -= rowids.nbytes + dropped.nbytes


_PARTS = _Parts(_PARTS_BYTES)


_WORK = threading.local()


def _workspace(size: int) -> tuple[np.ndarray, np.ndarray]:
    """This thread's score array (zeroed) and a work array, each of `size` doubles: fresh
    arrays of this size cost more than the arithmetic on them."""
    held = getattr(_WORK, "arrays", None)
    if held is None or len(held[0]) < size:
        held = _WORK.arrays = (np.empty(size + size // 4), np.empty(size + size // 4))
    score = held[0][:size]
    score.fill(0.0)
    return score, held[1]


def _phrase_postings(parts: list[_Postings]) -> _Postings:
    """The postings of a phrase from its tokens' (with offsets): its instances in a row are
    the offsets at which its first token stands and each next token one further on."""
    def keys(postings: _Postings) -> np.ndarray:
        return ((np.repeat(postings.rowids, postings.tfs) << 32)
                | postings.positions.astype(np.int64))

    starts = keys(parts[0])
    for step, part in enumerate(parts[1:], start=1):
        if not len(starts):
            break
        following = keys(part)
        wanted = starts + step
        at = np.minimum(np.searchsorted(following, wanted), max(len(following) - 1, 0))
        starts = starts[following[at] == wanted] if len(following) else starts[:0]
    if not len(starts):
        return _Postings(_NO_ROWS, _NO_ROWS)
    phrase = _runs(starts)
    return _Postings(phrase.rowids, phrase.tfs)


class _RowState(NamedTuple):
    """What bm25() needs of every row, worked out once per state of the lengths: k1 * (1 - b +
    b * D / avgdl) indexed by rowid (as fts5Bm25Function computes it for a row of D tokens),
    the number of rows and their tokens in all, and the state's token (None: not kept)."""

    norm: np.ndarray
    rows: int
    tokens: int
    token: str | None


# Row states of the last few index states read in this process, by (file, state token): a
# token is drawn afresh by every transaction that changes the lengths, so one names one
# content of the lengths table.
_ROW_STATES: dict[tuple[str, str], _RowState] = {}
_ROW_STATES_KEPT = 8
_ROW_STATES_LOCK = threading.Lock()


def _row_state(db: sqlite3.Connection, path: str) -> _RowState | None:
    """The row state of the lengths the snapshot holds; None when they hold no row."""
    token = _meta(db, "postings_state")
    key = (path, token) if token is not None else None
    if key is not None:
        with _ROW_STATES_LOCK:
            known = _ROW_STATES.get(key)
        if known is not None:
            return known
    lengths = _read_blocks(db.execute(
        "SELECT 'lengths', block, rowids, lengths FROM lengths ORDER BY block"),
        positions=False).get("lengths")
    if lengths is None:
        return None
    total = int(lengths.tfs.sum(dtype=np.int64))
    dense = np.zeros(int(lengths.rowids[-1]) + 1)
    dense[lengths.rowids] = lengths.tfs
    avgdl = float(total) / float(len(lengths.rowids))
    with np.errstate(divide="ignore", invalid="ignore"):  # no token at all: nothing matches
        state = _RowState(_K1 * ((1 - _B) + _B * dense / avgdl), len(lengths.rowids), total,
                          token)
    if key is not None:
        with _ROW_STATES_LOCK:
            if len(_ROW_STATES) >= _ROW_STATES_KEPT:
                del _ROW_STATES[next(iter(_ROW_STATES))]
            _ROW_STATES[key] = state
    return state


def _read_postings(db: sqlite3.Connection, terms: list[str], *, positions: bool
                   ) -> dict[str, _Postings]:
    """term -> postings, in rowid order, of these terms (with offsets if `positions`)."""
    if not terms:
        return {}
    columns = "rowids, tfs, positions" if positions else "rowids, tfs"
    return _read_blocks(db.execute(
        f"SELECT term, block, {columns} FROM postings "
        "WHERE term IN (SELECT value FROM json_each(?)) ORDER BY term, block",
        (json.dumps(terms),)), positions=positions)


def _read_blocks(rows: Iterable[tuple[Any, ...]], *, positions: bool) -> dict[str, _Postings]:
    """Stored blocks (term, block, rowids, counts[, offsets]) in term and block order, as one
    postings per term."""
    found = {}
    for term, group in itertools.groupby(rows, key=operator.itemgetter(0)):
        parts = list(group)
        found[term] = _decoded([part[1] for part in parts], [part[2] for part in parts],
                               [part[3] for part in parts],
                               [part[4] for part in parts] if positions else None)
    return found


def _fts5_totals(db: sqlite3.Connection) -> tuple[int, int]:
    """(rows, tokens) of the full-text table as FTS5 keeps them for bm25(): its averages
    record (rowid 1 of chunk_text_data: the number of rows, then each column's tokens, as
    SQLite varints)."""
    row = db.execute("SELECT block FROM chunk_text_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0, 0
    values, at = [], 0
    while len(values) < 2 and at < len(row[0]):
        value, at = _varint(row[0], at)
        values.append(value)
    return (values[0], values[1]) if len(values) == 2 else (values[0], 0)


def _varint(blob: bytes, at: int) -> tuple[int, int]:
    """The SQLite varint at `at` (7 bits a byte, high bit set on all but the last; a ninth
    byte gives 8), and where the next one starts."""
    value = 0
    for i in range(9):
        byte = blob[at + i]
        if i == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    raise AssertionError("unreachable")
