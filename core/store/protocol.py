"""The steps of the write protocol, each written once: the writer (`core.ingest.writer`) runs
them in order, `evidence check` runs the clean-up steps an interrupted write left undone, and
the migrations write links as rounds do.

A document: its chunks (`VendorStore.write_chunks`), the replaced version's chunks copied
under its archive's key (`archive_chunks`), then `commit_document` (its manifest entry, the
archive's, and a new generation, one write), then `delete_stale` (every other version's chunks
under its own key).
A round: `commit_links` (links, tombstones and a new generation, one write), then the
responses and markers in one chunk write, then `delete_withdrawn` (markers, then tombstones).
Readers that must see one committed state use `consistent_read`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from core.models import FOLLOWUP_SOURCE_TYPE, StoredRecord
from core.store.filters import Where
from core.store.records import (
    MANIFEST_GENERATION_ID,
    WITHDRAWN_KEY,
    WITHDRAWN_SOURCE_TYPE,
    link_metadata,
    link_record_id,
    new_generation,
    record_fingerprint,
)
from core.store.vendor import VendorStore
from core.timeline.series import ARCHIVED_OF_KEY

# Reads that race a writer are repeated until they saw one committed state, at most this often.
CONSISTENT_READ_ATTEMPTS = 5
T = TypeVar("T")


def commit_document(vendor: VendorStore, entries: Sequence[tuple[str, dict[str, Any]]]
                    ) -> None:
    """Make a document version visible (with the archive of the version it replaces, when it
    keeps one): the entries and a new generation, in one write."""
    vendor.write_manifest([*entries, (MANIFEST_GENERATION_ID, new_generation())])


def commit_record(vendor: VendorStore, record_id: str, metadata: dict[str, Any] | None
                  ) -> None:
    """Write one manifest record of a reviewer's (or remove it: `metadata` None) and a new
    generation, so every reader sees the change at once."""
    if metadata is None:
        vendor.delete_manifest([record_id])
        vendor.write_manifest([(MANIFEST_GENERATION_ID, new_generation())])
        return
    vendor.write_manifest([(record_id, metadata), (MANIFEST_GENERATION_ID, new_generation())])


def archive_chunks(vendor: VendorStore, doc_key: str, archived_key: str, version: str) -> None:
    """Copy a document version's chunks (text, metadata and vector) under the key of its
    archive, where they stay once a new version of the file replaces it. Nothing shows the
    copies until a manifest entry names the archive; copying again writes the same records."""
    where = Where.eq(doc_key=doc_key) & Where.eq(doc_sha=version)
    chunks = vendor.records(where)
    if not chunks:
        return
    vectors = vendor.vectors([c.id for c in chunks])
    vendor.write_chunks(
        [StoredRecord(id=f"doc-{archived_key}-{version}-{c.metadata.get('chunk_index', i)}",
                      text=c.text, metadata={**c.metadata, "doc_key": archived_key})
         for i, c in enumerate(chunks)], vectors)


def drop_archives(vendor: VendorStore, doc_key: str, version: str) -> None:
    """Remove the archives of a file that hold the version it now has again (the file sent
    back as it was): the version is the file's own, not an earlier one. Their entries go
    first, then their chunks."""
    archives = [key for key, meta in vendor.documents().items()
                if meta.get(ARCHIVED_OF_KEY) == doc_key and str(meta.get("version")) == version]
    if not archives:
        return
    vendor.delete_manifest(archives)
    for key in archives:
        vendor.delete_chunks(where=Where.eq(doc_key=key))


def delete_stale(vendor: VendorStore, doc_key: str, version: str) -> None:
    """Remove every chunk of the document that is not of this version."""
    vendor.delete_chunks(where=Where.eq(doc_key=doc_key) & Where.ne("doc_sha", version))


def commit_links(vendor: VendorStore, records: Sequence[StoredRecord],
                 tombstones: Sequence[dict[str, Any]] = ()) -> None:
    """Write the links of these follow-ups (and the tombstones of the answers a replaced round
    withdraws, see `withdrawn_link`) and a new generation, in one manifest write.

    A round's links go in before its responses: a link naming a response not written yet (the
    process killed between the two writes) finds no record when a reader fetches it, and the
    same ingest run again writes the responses. The new generation tells every reader that
    the links changed, so none needs to list the chunk collection to find out."""
    vendor.write_manifest([
        *((link_record_id(r.id), link_metadata(r)) for r in records),
        *((link_record_id(str(t["followup_id"])), t) for t in tombstones),
        (MANIFEST_GENERATION_ID, new_generation())])


def delete_withdrawn(vendor: VendorStore, marker_ids: Sequence[str],
                     tombstone_ids: Sequence[str]) -> None:
    """The last two steps of a replaced round: the withdrawn answers' markers (only records
    that are markers), then their tombstones (only links that are tombstones). Neither
    changes what a reader shows."""
    vendor.delete_chunks(marker_ids, where=Where.eq(source_type=WITHDRAWN_SOURCE_TYPE))
    vendor.delete_manifest([link_record_id(i) for i in tombstone_ids],
                           where=Where.eq(**{WITHDRAWN_KEY: True}))


def stored_round(vendor: VendorStore, round_number: int
                 ) -> tuple[dict[str, tuple[str, dict[str, Any]]], dict[str, dict[str, Any]]]:
    """(follow-up id -> (fingerprint, metadata) of each response and marker of the round,
    follow-up id -> metadata of each of its links and tombstones)."""
    where = (Where.eq(round_number=round_number)
             & Where.is_in("source_type", [FOLLOWUP_SOURCE_TYPE, WITHDRAWN_SOURCE_TYPE]))
    stored = {c.id: (record_fingerprint(c.text, c.metadata), c.metadata)
              for c in vendor.records(where)}
    return stored, vendor.links(Where.eq(round_number=round_number))


def consistent_read(vendor: VendorStore, read: Callable[[], T]) -> tuple[str | None, T]:
    """`read()` and the manifest generation it saw, repeated until the manifest held still
    around it (at most CONSISTENT_READ_ATTEMPTS times). A store without a generation record
    is compared by its whole manifest instead."""
    for _ in range(CONSISTENT_READ_ATTEMPTS):
        generation = vendor.generation()
        manifest = vendor.manifest_records() if generation is None else None
        value = read()
        held = (vendor.manifest_records() == manifest if generation is None
                else vendor.generation() == generation)
        if held:
            break
    return generation, value
