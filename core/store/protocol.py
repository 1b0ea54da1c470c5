"""The steps of the write protocol, each written once: the writer (`core.ingest.writer`) runs
them in order, `evidence check` runs the clean-up steps an interrupted write left undone, and
the migrations write links as rounds do.

A document: its chunks (`VendorStore.write_chunks`), then `commit_document` (its manifest
entry and a new generation, one write), then `delete_stale` (every other version's chunks).
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

# Reads that race a writer are repeated until they saw one committed state, at most this often.
CONSISTENT_READ_ATTEMPTS = 5
T = TypeVar("T")


def commit_document(vendor: VendorStore, doc_key: str, entry: dict[str, Any]) -> None:
    """Make a document version visible: its entry and a new generation, in one write."""
    vendor.write_manifest([(doc_key, entry), (MANIFEST_GENERATION_ID, new_generation())])


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
