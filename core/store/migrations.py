"""Named, ordered store migrations: each step upgrades one vendor's collections by one schema
version, in place.

Both collections of a vendor record the schema version they were last upgraded to. Opening a
vendor whose version is older than `SCHEMA_VERSION` runs every step it has not
had, in order. ChromaDB has no transaction across collections, so each step is written to be
run again safely, and a version is recorded only after its step completed: manifest first,
chunks last. A process killed anywhere leaves the older version recorded, and the next open
runs the same step again and finishes it. A store of a version with no path to this one (a
newer program's, or one that recorded none) is refused and left untouched."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.hashing import canonical_criterion_hash
from core.models import FOLLOWUP_SOURCE_TYPE, StoredRecord
from core.store import writes
from core.store.bindings import persist_at_every_write
from core.store.filters import Where
from core.store.protocol import commit_links
from core.store.records import MANIFEST_GENERATION_ID, link_metadata, new_generation
from core.store.scoping import SCOPED_SINCE
from core.store.vendor import VendorStore
from core.timeline.reading import read_facts
from core.timeline.series import FACTS_KEY, facts_entry

# The schema this program writes; the steps below upgrade older stores to it in place.
SCHEMA_VERSION = 7
# The first version a store recorded; older stores recorded none and cannot be told apart.
FIRST_SCHEMA_VERSION = 1
# Records rewritten per call; well under any ChromaDB client's maximum batch size.
UPDATE_BATCH = 500


@dataclass(frozen=True)
class Migration:
    """One step: the version a vendor's collections have once `upgrade` ran on them."""

    version: int
    name: str
    upgrade: Callable[[VendorStore], None]


def _record_manifest_generation(vendor: VendorStore) -> None:
    """A manifest last written before generations were recorded gets one, so a reader can
    tell in one small read whether the manifest changed since it last read it."""
    if any(record_id == MANIFEST_GENERATION_ID for record_id, _ in vendor.manifest_records()):
        return
    vendor.write_manifest([(MANIFEST_GENERATION_ID, new_generation())])


def _record_canonical_criterion_hash(vendor: VendorStore) -> None:
    """Every follow-up linked to a criterion gets `criterion_canonical_hash` beside its
    `criterion_question_hash`, so a metadata filter finds the answers to a criterion pasted
    with other typography. A record that already carries the right value is left alone.

    ChromaDB 1.5's `update` merges the given keys into the stored metadata; the whole
    metadata is written all the same, so a version that replaces it keeps every key."""
    ids: list[str] = []
    metadatas: list[dict[str, Any]] = []
    for found in vendor.records(Where.eq(source_type=FOLLOWUP_SOURCE_TYPE), text=False):
        record_id, metadata = found.id, found.metadata
        linked = metadata.get("original_criterion_question_text")
        if not linked:
            continue
        canonical = canonical_criterion_hash(str(linked))
        if metadata.get("criterion_canonical_hash") != canonical:
            ids.append(record_id)
            metadatas.append({**metadata, "criterion_canonical_hash": canonical})
    for start in range(0, len(ids), UPDATE_BATCH):
        vendor.update_chunk_metadata(ids[start : start + UPDATE_BATCH],
                                     metadatas[start : start + UPDATE_BATCH])


def _record_followup_links(vendor: VendorStore) -> None:
    """Every stored follow-up gets its link record in the manifest (what criterion it answers
    and the fingerprint of the response), as rounds written since write it before their
    responses, so readers find the links without listing the chunk collection. Written in
    batches, each with a new generation; a link that already says the same is left alone."""
    existing = vendor.links()
    missing = []
    for found in vendor.records(Where.eq(source_type=FOLLOWUP_SOURCE_TYPE)):
        record = StoredRecord(id=found.id, text=found.text, metadata=found.metadata)
        if existing.get(found.id) != link_metadata(record):
            missing.append(record)
    for start in range(0, len(missing), UPDATE_BATCH):
        commit_links(vendor, missing[start : start + UPDATE_BATCH])


def _persist_vector_indexes(vendor: VendorStore) -> None:
    """Both collections persist their vector index at every write, and persist it now: an
    index ChromaDB evicts from its cache is reloaded from its files, which miss whatever was
    written since the last persist (core/store/bindings.py)."""
    persist_at_every_write(vendor.manifest)
    persist_at_every_write(vendor.chunks)


def _record_scoped_filter_keys(vendor: VendorStore) -> None:
    """Every record of both collections gets the scoped copies of its filtered keys
    (core/store/scoping.py), which records written since carry from the start; filters use
    them once this step is recorded. A record that already carries them is left alone."""
    vendor.record_scoped_keys(batch=UPDATE_BATCH)


def _record_document_facts(vendor: VendorStore) -> None:
    """Every document entry gets what its document states of itself (its kind, title, issuer
    and dates, core/timeline/reading.py), read from its stored chunks, as an ingest reads them
    from the file; an entry that has them is left alone. Written in batches, each with a new
    generation."""
    missing = []
    for doc_key, entry in vendor.documents().items():
        if entry.get(FACTS_KEY):
            continue
        chunks = vendor.records(Where.eq(doc_key=doc_key) & Where.eq(doc_sha=str(entry["version"])))
        chunks.sort(key=lambda c: int(c.metadata.get("chunk_index", 0)))
        pages: dict[int, list[str]] = {}
        headings: list[str] = []
        for chunk in chunks:
            pages.setdefault(int(chunk.metadata.get("page") or 0), []).append(chunk.text)
            section = str(chunk.metadata.get("section") or "")
            if section:
                heading = section.split(" > ")[-1]
                if heading not in headings:
                    headings.append(heading)
        facts = read_facts(["\n".join(texts) for _, texts in sorted(pages.items())],
                           source=str(entry.get("source", "")), headings=headings)
        missing.append((doc_key, {**entry, **facts_entry(facts)}))
    for start in range(0, len(missing), UPDATE_BATCH):
        vendor.write_manifest([*missing[start : start + UPDATE_BATCH],
                               (MANIFEST_GENERATION_ID, new_generation())])


MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, "record_manifest_generation", _record_manifest_generation),
    Migration(3, "record_canonical_criterion_hash", _record_canonical_criterion_hash),
    Migration(4, "record_followup_links", _record_followup_links),
    Migration(5, "persist_vector_indexes", _persist_vector_indexes),
    Migration(SCOPED_SINCE, "record_scoped_filter_keys", _record_scoped_filter_keys),
    Migration(7, "record_document_facts", _record_document_facts),
)


def recorded_version(collection: Any) -> object:
    """The schema version a collection records (None when it records none)."""
    return (collection.metadata or {}).get("schema_version")


def can_upgrade(version: object) -> bool:
    """True for a recorded version older than this program's that the steps lead from."""
    return (isinstance(version, int) and not isinstance(version, bool)
            and FIRST_SCHEMA_VERSION <= version < SCHEMA_VERSION)


def upgrade(vendor: VendorStore) -> list[str]:
    """Run every step the vendor has not had, in order; the names of those that ran (none for
    a vendor at this version, or at one no step leads from)."""
    if not any(can_upgrade(recorded_version(c)) for c in (vendor.chunks, vendor.manifest)):
        return []
    versions = [recorded_version(vendor.manifest), recorded_version(vendor.chunks)]
    current = min(v for v in versions if isinstance(v, int))
    ran = []
    for migration in MIGRATIONS:
        if migration.version <= current:
            continue
        migration.upgrade(vendor)
        for collection in (vendor.manifest, vendor.chunks):
            if recorded_version(collection) != migration.version:
                metadata = dict(collection.metadata or {})
                metadata["schema_version"] = migration.version
                writes.apply(collection, "modify", metadata=metadata)
        ran.append(migration.name)
    return ran
