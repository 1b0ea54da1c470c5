"""`evidence check`: whether a vendor's lexical index agrees with its store, and what an
interrupted write left in the store; by default both are mended where that is safe.

The lexical index (core/retrieval/lexical.py) is derived from the store. At the store's
committed state it must hold every chunk of every document version the manifest names, with
the stored text and metadata, and nothing of a version the manifest does not name, except a
replaced version whose chunks have not left the store yet (it may linger until they do, and
no query returns it); every stored follow-up response, with its stored text and the
fingerprint its link gives; no answer a replaced round withdrew and no response the store no
longer holds; and its rows table and its full-text table must hold the same rows.

Each difference is one of two kinds:

- `behind`: the index's own records (the versions and follow-up fingerprints it noted) say it
  does not hold that yet, or holds the old state, so the next sync (every hybrid search
  runs one) mends it by itself. A process killed while syncing leaves this at most: the sync
  is one SQLite transaction, and an interrupted one is rolled back.
- `drift`: the rows disagree with what the index records (rows lost or altered under a
  record that claims them, rows of a version it never recorded, full-text rows without their
  row), or the index says it settled at the store's current generation, so no search will
  look again. A sync trusts the records and never mends the first kind; a rebuild does.

The store is checked for what it shows cheaply, from the one read of the vendor's records
and manifest the index comparison needs anyway: chunks of document versions the manifest does
not name (`incomplete_chunks` in `evidence status`), the markers and tombstones of a replaced
round whose last steps did not run, links naming no stored response (a round killed between
its link write and its responses' write), links whose response is not the one they
fingerprint, and responses without a link.

Repair (the default; `--dry-run` only reports) runs under the store's write lock
(`EvidenceStore.write_lock`), held by every ingest from its first read of the manifest to its
last delete, so no ingest is half-way while it runs:

- chunks of versions the manifest does not name are deleted: no ingest is running, so they
  are an abandoned version's (the ingest that wrote them was killed before its commit) or a
  replaced one's (killed before its delete, the writer's step 3). No reader counts either;
  the same ingest run again writes the abandoned version again, whole;
- the markers of withdrawn answers are deleted, then each tombstone whose answer's record is
  gone or a marker: the replacement's own steps 3 and 4, which change nothing a reader shows;
- the lexical index is synced, then, if anything still differs, rebuilt in one transaction,
  then settled at the store's generation.

What only the round's own files can complete is reported, not touched: links naming no
response or another version of it, a tombstone over a response that is still visible (a
replacement killed before its commit), a response without a link. Each names the round and
the command that completes it (`evidence ingest questionnaire` with the round's files
again); until then the check exits 1."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from core.errors import StoreError
from core.models import FOLLOWUP_SOURCE_TYPE
from core.retrieval.lexical import (
    _TABLES,
    BUSY_TIMEOUT_S,
    SCHEMA_VERSION,
    LexicalIndex,
    _version_key,
    index_path,
)
from core.store import (
    CONSISTENT_READ_ATTEMPTS,
    KIND_KEY,
    LINK_KIND,
    MANIFEST_GENERATION_ID,
    WITHDRAWN_KEY,
    WITHDRAWN_SOURCE_TYPE,
    VendorCollections,
    get_all,
    link_record_id,
    manifest_generation,
    record_fingerprint,
)

if TYPE_CHECKING:
    from core.workbench import Workbench

# The lexical counts that are differences (lingering rows are allowed).
DIFFERENCES = ("missing", "extra", "stale", "withdrawn", "fts_mismatch", "records")
# The store counts that are leftovers of an interrupted write.
LEFTOVERS = ("leftover_chunks", "withdrawn_markers", "tombstones", "links_without_response",
             "links_not_as_stored", "responses_without_link", "unfinished_replacements")
# Of those, what a repair completes under the write lock.
REPAIRABLE = ("leftover_chunks", "withdrawn_markers", "tombstones")


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


class StoreFindings(BaseModel):
    """Leftovers of interrupted writes, as one read of the store shows them."""

    generation: str | None = None
    leftover_chunks: int = Field(0, description="chunks of versions the manifest does not "
                                                "name (status: incomplete_chunks)")
    leftover_documents: list[str] = Field(default_factory=list)
    withdrawn_markers: int = 0
    tombstones: int = Field(0, description="links of withdrawn answers whose record is gone")
    links_without_response: int = 0
    links_not_as_stored: int = Field(0, description="links whose stored response is not the "
                                                    "one they fingerprint")
    responses_without_link: int = 0
    unfinished_replacements: int = Field(0, description="tombstones over a response still "
                                                        "shown: a replacement not committed")
    rounds_to_ingest_again: list[int] = Field(default_factory=list)

    @property
    def leftovers(self) -> int:
        return sum(getattr(self, name) for name in LEFTOVERS)

    @property
    def unrepairable(self) -> int:
        return sum(getattr(self, name) for name in LEFTOVERS if name not in REPAIRABLE)


class Repairs(BaseModel):
    """What the check changed."""

    lexical: str | None = Field(None, description="'synced' or 'rebuilt', None if untouched")
    leftover_chunks_deleted: int = 0
    markers_deleted: int = 0
    tombstones_deleted: int = 0


class CheckReport(BaseModel):
    """`evidence check`'s JSON line."""

    vendor_id: str
    ok: bool
    dry_run: bool
    lexical: LexicalFindings
    store: StoreFindings
    repaired: Repairs
    remaining: dict[str, int] = Field(
        default_factory=dict, description="what still differs after the repair (with "
        "--dry-run: what a repair would still leave), by the keys above")
    to_complete: list[str] = Field(default_factory=list,
                                   description="one sentence per thing left, with the command")

    def text(self) -> str:
        """The report for people."""
        lex, store = self.lexical, self.store
        state = "consistent" if self.ok else "NOT consistent"
        lines = [f"Vendor {self.vendor_id}: {state}"
                 + (" (nothing changed: --dry-run)." if self.dry_run else ".")]
        if lex.exists:
            lines.append(
                f"Lexical index {lex.path}: {lex.rows} rows, "
                f"{'settled' if lex.settled else 'not settled'} at the store's generation; "
                f"missing {lex.missing}, extra {lex.extra}, stale {lex.stale}, withdrawn "
                f"{lex.withdrawn}, full-text mismatches {lex.fts_mismatch}, records "
                f"{lex.records}; lingering {lex.lingering}; behind the store {lex.behind}, "
                f"drift {lex.drift}.")
        else:
            lines.append(f"Lexical index {lex.path}: not built yet (the first hybrid search "
                         "builds it).")
        lines.append(
            f"Store: leftover chunks {store.leftover_chunks}, withdrawn markers "
            f"{store.withdrawn_markers}, tombstones {store.tombstones}, links naming no "
            f"response {store.links_without_response}, links not as stored "
            f"{store.links_not_as_stored}, responses without a link "
            f"{store.responses_without_link}, unfinished replacements "
            f"{store.unfinished_replacements}.")
        done = self.repaired
        repairs = [f"the lexical index {done.lexical}" if done.lexical else "",
                   _count(done.leftover_chunks_deleted, "leftover chunk", "deleted"),
                   _count(done.markers_deleted, "withdrawn answer's marker", "deleted"),
                   _count(done.tombstones_deleted, "tombstone", "deleted")]
        if not self.dry_run:
            lines.append("Repaired: " + ("; ".join(r for r in repairs if r) or "nothing") + ".")
        lines += [f"To do: {sentence}" for sentence in self.to_complete]
        return "\n".join(lines)


def _count(n: int, what: str, done: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'} {done}" if n else ""


# The store ---------------------------------------------------------------------------------

@dataclass
class StoreRead:
    """One consistent read of a vendor's records and manifest."""

    generation: str | None
    versions: dict[str, str]  # doc_key -> committed version
    chunks: dict[str, tuple[str, dict[str, Any]]]  # document chunk id -> text, metadata
    followups: dict[str, tuple[str, dict[str, Any], str]]  # id -> text, metadata, fingerprint
    markers: dict[str, dict[str, Any]]  # withdrawn answers' markers
    links: dict[str, dict[str, Any]]  # follow-up id -> link (or tombstone)
    chunk_versions: dict[str, str] = field(default_factory=dict)  # chunk id -> version key

    def committed_keys(self) -> set[str]:
        return {_version_key(k, v) for k, v in self.versions.items()}


def read_store(vendor: VendorCollections) -> StoreRead:
    """The manifest and every record, read until the manifest held still around the read of
    the records (at most CONSISTENT_READ_ATTEMPTS times, as status reads)."""
    for _ in range(CONSISTENT_READ_ATTEMPTS):
        generation = manifest_generation(vendor)
        manifest = get_all(vendor.manifest, include=("metadatas",))
        records = get_all(vendor.chunks, include=("documents", "metadatas"))
        if generation is None:
            held = get_all(vendor.manifest, include=("metadatas",)) == manifest
        else:
            held = manifest_generation(vendor) == generation
        if held:
            break
    versions: dict[str, str] = {}
    links: dict[str, dict[str, Any]] = {}
    for record_id, meta in zip(manifest["ids"], manifest["metadatas"], strict=True):
        if record_id == MANIFEST_GENERATION_ID:
            continue
        if meta.get(KIND_KEY) == LINK_KIND:
            links[str(meta["followup_id"])] = dict(meta)
        elif KIND_KEY not in meta:
            versions[record_id] = str(meta["version"])
    read = StoreRead(generation=generation, versions=versions, chunks={}, followups={},
                     markers={}, links=links)
    for record_id, text, meta in zip(records["ids"], records["documents"],
                                     records["metadatas"], strict=True):
        meta = dict(meta)
        kind = meta.get("source_type")
        if kind == FOLLOWUP_SOURCE_TYPE:
            read.followups[record_id] = (text, meta, record_fingerprint(text, meta))
        elif kind == WITHDRAWN_SOURCE_TYPE:
            read.markers[record_id] = meta
        elif "doc_key" in meta and "doc_sha" in meta:
            read.chunks[record_id] = (text, meta)
            read.chunk_versions[record_id] = _version_key(str(meta["doc_key"]),
                                                          str(meta["doc_sha"]))
    return read


@dataclass
class StorePlan:
    """What a repair may delete, and what only the round's files complete."""

    findings: StoreFindings
    leftover_ids: list[str]
    marker_ids: list[str]
    tombstone_ids: list[str]  # follow-up ids whose tombstone may go
    unfinished: dict[str, list[int]]  # sentence kind -> rounds


def store_findings(vendor_id: str, read: StoreRead) -> StorePlan:
    committed = read.committed_keys()
    leftover = sorted(i for i, key in read.chunk_versions.items() if key not in committed)
    tombstones = {i: m for i, m in read.links.items() if m.get(WITHDRAWN_KEY)}
    finished = sorted(i for i in tombstones if i not in read.followups)
    still_shown = sorted(i for i in tombstones if i in read.followups)
    live = {i: m for i, m in read.links.items() if not m.get(WITHDRAWN_KEY)}
    no_response = sorted(i for i in live if i not in read.followups)
    not_as_stored = sorted(i for i, m in live.items() if i in read.followups
                           and str(m.get("fingerprint") or "") != read.followups[i][2])
    unlinked = sorted(i for i in read.followups if i not in read.links)

    def rounds(ids: Iterable[str], source: dict[str, dict[str, Any]]) -> list[int]:
        return sorted({int(source[i]["round_number"]) for i in ids
                       if source[i].get("round_number") is not None})

    responses = {i: meta for i, (_, meta, _) in read.followups.items()}
    unfinished = {
        "links_without_response": rounds(no_response, read.links),
        "links_not_as_stored": rounds(not_as_stored, read.links),
        "unfinished_replacements": rounds(still_shown, read.links),
        "responses_without_link": rounds(unlinked, responses),
    }
    findings = StoreFindings(
        generation=read.generation, leftover_chunks=len(leftover),
        leftover_documents=sorted({str(read.chunks[i][1].get("source")) for i in leftover}),
        withdrawn_markers=len(read.markers), tombstones=len(finished),
        links_without_response=len(no_response), links_not_as_stored=len(not_as_stored),
        responses_without_link=len(unlinked), unfinished_replacements=len(still_shown),
        rounds_to_ingest_again=sorted({n for found in unfinished.values() for n in found}))
    return StorePlan(findings=findings, leftover_ids=leftover, marker_ids=sorted(read.markers),
                     tombstone_ids=finished, unfinished=unfinished)


def repair_store(workbench: Workbench, vendor: VendorCollections, plan: StorePlan,
                 repairs: Repairs) -> None:
    """Delete what the plan allows, in the writer's order: leftover chunks, then markers,
    then the tombstones whose answer's record is gone. Called under the write lock."""
    batch = workbench.store.max_batch_size()
    for start in range(0, len(plan.leftover_ids), batch):
        vendor.chunks.delete(ids=plan.leftover_ids[start : start + batch])
    repairs.leftover_chunks_deleted = len(plan.leftover_ids)
    for start in range(0, len(plan.marker_ids), batch):
        vendor.chunks.delete(ids=plan.marker_ids[start : start + batch],
                             where={"source_type": WITHDRAWN_SOURCE_TYPE})
    repairs.markers_deleted = len(plan.marker_ids)
    links = [link_record_id(i) for i in plan.tombstone_ids]
    for start in range(0, len(links), batch):
        vendor.manifest.delete(ids=links[start : start + batch], where={WITHDRAWN_KEY: True})
    repairs.tombstones_deleted = len(links)


# The lexical index -------------------------------------------------------------------------

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


# The check ---------------------------------------------------------------------------------

def check_vendor(workbench: Workbench, vendor_id: str, *, repair: bool = True) -> CheckReport:
    """Compare the vendor's lexical index and store; with `repair`, under the store's write
    lock, mend what is safe to mend (see the module's docstring) and compare again."""
    vendor = workbench.store.open_vendor(vendor_id)
    path = index_path(workbench.settings, vendor.vendor_id)
    collection_id = str(vendor.chunks.id)
    repairs = Repairs()
    if not repair:
        read = read_store(vendor)
        plan = store_findings(vendor.vendor_id, read)
        lexical = compare_index(path, read_index(path), read, collection_id)
        remaining = _remaining(lexical, plan.findings, after_repair=False)
        return _report(vendor.vendor_id, lexical, plan, repairs, remaining, dry_run=True)
    with workbench.store.write_lock():
        read = read_store(vendor)
        plan = store_findings(vendor.vendor_id, read)
        lexical = compare_index(path, read_index(path), read, collection_id)
        if plan.leftover_ids or plan.marker_ids or plan.tombstone_ids:
            repair_store(workbench, vendor, plan, repairs)
            read = read_store(vendor)
        after_plan = store_findings(vendor.vendor_id, read)
        index = read_index(path)
        now = compare_index(path, index, read, collection_id)
        if index is not None and (now.differences or now.lingering or not now.settled):
            repairs.lexical = _repair_index(workbench, vendor, read, path, collection_id, now)
            now = compare_index(path, read_index(path), read, collection_id)
        remaining = _remaining(now, after_plan.findings, after_repair=True)
    return _report(vendor.vendor_id, lexical, plan, repairs, remaining, dry_run=False,
                   after=after_plan.findings)


def _repair_index(workbench: Workbench, vendor: VendorCollections, read: StoreRead,
                  path: Any, collection_id: str, found: LexicalFindings) -> str | None:
    """Sync the index in full (its own records against the store) and, if its rows still
    differ, rebuild it; then settle it at the store's generation as a search would."""
    done: str | None = None
    if found.differences or found.lingering:
        index = LexicalIndex.for_vendor(workbench.settings, vendor, read.versions)
        try:
            if index.sync().changed:
                done = "synced"
        except StoreError:  # a damaged file the sync cannot write: the rebuild drops it
            pass
        if compare_index(path, read_index(path), read, collection_id).differences:
            index.rebuild()
            done = "rebuilt"
    workbench.runner.lexical(vendor, read.versions, read.generation)
    return done


def _remaining(lexical: LexicalFindings, store: StoreFindings, *, after_repair: bool
               ) -> dict[str, int]:
    """What still differs: after a repair, every lexical difference and every store leftover;
    with --dry-run, the drift (a sync mends the rest) and every store leftover."""
    remaining = ({name: getattr(lexical, name) for name in DIFFERENCES} if after_repair
                 else {"drift": lexical.drift})
    remaining.update({name: getattr(store, name) for name in LEFTOVERS})
    return {name: n for name, n in remaining.items() if n}


def _report(vendor_id: str, lexical: LexicalFindings, plan: StorePlan, repairs: Repairs,
            remaining: dict[str, int], *, dry_run: bool,
            after: StoreFindings | None = None) -> CheckReport:
    store = plan.findings
    left = after or store
    to_complete: list[str] = []
    if dry_run and store.leftover_chunks:
        to_complete.append(
            f"{store.leftover_chunks} chunk(s) of {', '.join(store.leftover_documents)} belong "
            "to versions the manifest does not name; `evidence check --vendor "
            f"{vendor_id}` deletes them (ingesting the file again writes its version whole).")
    if dry_run and (store.withdrawn_markers or store.tombstones):
        to_complete.append(
            f"A replaced round left {store.withdrawn_markers} marker(s) and "
            f"{store.tombstones} tombstone(s) of withdrawn answers; `evidence check --vendor "
            f"{vendor_id}` deletes them, as the replacement's last steps would.")
    what = {
        "links_without_response": "link(s) name no stored response",
        "links_not_as_stored": "link(s) name a response stored otherwise than they record",
        "unfinished_replacements": "answer(s) are withdrawn by a replacement that did not "
                                   "commit",
        "responses_without_link": "response(s) have no link",
    }
    for kind, sentence in what.items():
        rounds = plan.unfinished[kind] if getattr(left, kind) else []
        if rounds:
            shown = ", ".join(map(str, rounds))
            to_complete.append(
                f"In round(s) {shown} {getattr(left, kind)} {sentence}; run `evidence ingest "
                f"questionnaire` again with the file(s) of round(s) {shown} of vendor "
                f"'{vendor_id}' (with --replace if it was a replacement).")
    if dry_run and lexical.drift:
        to_complete.append(
            f"The lexical index disagrees with its own records in {lexical.drift} place(s); "
            f"`evidence check --vendor {vendor_id}` rebuilds it from the store.")
    if not dry_run and any(name in remaining for name in DIFFERENCES):
        to_complete.append(
            f"The lexical index still differs from the store after its rebuild; delete "
            f"{lexical.path} (it is derived from the store) and run `evidence check --vendor "
            f"{vendor_id}` again.")
    return CheckReport(vendor_id=vendor_id, ok=not remaining, dry_run=dry_run,
                       lexical=lexical, store=store, repaired=repairs, remaining=remaining,
                       to_complete=to_complete)
