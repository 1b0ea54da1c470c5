"""What an interrupted write left in a vendor's store, from one consistent read of its records
and manifest: chunks of document versions the manifest does not name (`incomplete_chunks` in
`evidence status`), the markers and tombstones of a replaced round whose last steps did not
run, links naming no stored response (a round killed between its link write and its
responses' write), links whose response is not the one they fingerprint, and responses
without a link. `repair_store` runs the clean-up steps of the write protocol that are safe
under the write lock; what only the round's own files can complete is left to them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from core.models import FOLLOWUP_SOURCE_TYPE
from core.store.protocol import consistent_read, delete_withdrawn
from core.store.records import (
    KIND_KEY,
    LINK_KIND,
    MANIFEST_GENERATION_ID,
    WITHDRAWN_KEY,
    WITHDRAWN_SOURCE_TYPE,
    record_fingerprint,
    version_key,
)
from core.store.vendor import VendorStore

# The store counts that are leftovers of an interrupted write.
LEFTOVERS = ("leftover_chunks", "withdrawn_markers", "tombstones", "links_without_response",
             "links_not_as_stored", "responses_without_link", "unfinished_replacements")
# Of those, what a repair completes under the write lock.
REPAIRABLE = ("leftover_chunks", "withdrawn_markers", "tombstones")


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
        return {version_key(k, v) for k, v in self.versions.items()}


def read_store(vendor: VendorStore) -> StoreRead:
    """The manifest and every record, read while the manifest held still around the read of
    the records (see `consistent_read`)."""
    generation, (manifest, records) = consistent_read(
        vendor, lambda: (vendor.manifest_records(), vendor.records()))
    versions: dict[str, str] = {}
    links: dict[str, dict[str, Any]] = {}
    for record_id, meta in manifest:
        if record_id == MANIFEST_GENERATION_ID:
            continue
        if meta.get(KIND_KEY) == LINK_KIND:
            links[str(meta["followup_id"])] = dict(meta)
        elif KIND_KEY not in meta:
            versions[record_id] = str(meta["version"])
    read = StoreRead(generation=generation, versions=versions, chunks={}, followups={},
                     markers={}, links=links)
    for record in records:
        record_id, text, meta = record.id, record.text, record.metadata
        kind = meta.get("source_type")
        if kind == FOLLOWUP_SOURCE_TYPE:
            read.followups[record_id] = (text, meta, record_fingerprint(text, meta))
        elif kind == WITHDRAWN_SOURCE_TYPE:
            read.markers[record_id] = meta
        elif "doc_key" in meta and "doc_sha" in meta:
            read.chunks[record_id] = (text, meta)
            read.chunk_versions[record_id] = version_key(str(meta["doc_key"]),
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


def repair_store(vendor: VendorStore, plan: StorePlan) -> tuple[int, int, int]:
    """Delete what the plan allows, in the writer's order: leftover chunks, then markers,
    then the tombstones whose answer's record is gone; the three counts. Called under the
    write lock."""
    vendor.delete_chunks(plan.leftover_ids)
    delete_withdrawn(vendor, plan.marker_ids, plan.tombstone_ids)
    return len(plan.leftover_ids), len(plan.marker_ids), len(plan.tombstone_ids)
