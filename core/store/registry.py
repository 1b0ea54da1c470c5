"""The store's register of vendors: one small record per vendor, so that listing the vendors,
their counts and the state every view is cached under is one read, whatever their number.

Without it, listing vendors lists every collection of the store (several per vendor), and a
vendor's counts read the metadata of every record it holds: at a thousand vendors a status of
all of them took minutes. The register is derived from the vendors' own collections, never
the other way round, and it is kept exact by the write lock:

- a writer holding the lock marks a vendor *pending* before its first write to it, and
  records the vendor's counts and manifest generation, read back from the committed store,
  after its last (`EvidenceStore.write_lock`);
- a writer killed in between leaves the vendor pending; a reader reads a pending vendor from
  its collections, as it would without a register, until a writer records it again
  (`evidence check` does);
- a store written before the register existed has none, or an incomplete one: readers list the
  collections as before, and the next writer registers every vendor first, then marks the
  register complete.

Vendor ids that differ only in case are refused (`refuse_case_clash`); the register keeps each
id's folded form, so that check is one lookup too."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.models import FOLLOWUP_SOURCE_TYPE
from core.reports import VendorStatus
from core.store import writes
from core.store.bindings import PERSISTED_AT_EVERY_WRITE
from core.store.filters import Where
from core.store.migrations import SCHEMA_VERSION
from core.store.protocol import consistent_read
from core.store.records import committed_versions, is_committed
from core.store.vendor import VendorStore, get_all
from core.timeline.series import ARCHIVED_OF_KEY

REGISTRY_COLLECTION = "workbench__vendors"
REGISTRY_VERSION = 1
_COMPLETE = "complete"


@dataclass(frozen=True)
class Registered:
    """A vendor as the register holds it: pending, or its counts at one generation."""

    vendor_id: str
    pending: bool
    generation: str | None = None
    status: VendorStatus | None = None


def read_vendor_status(vendor: VendorStore) -> tuple[str | None, VendorStatus]:
    """One vendor's counts, read from one committed state of its store, and the manifest
    generation of that state (None for a store that records none).

    A committed document version's chunks are all written before the manifest names it and
    deleted only once it names another, so its entry's chunk count is the number of its
    records: the counts read the manifest, the follow-ups' metadata and the number of records,
    not the metadata of every chunk (at 100,000 chunks that read took seconds at every ingest).
    A store whose entries do not all record their chunk count is counted record by record."""
    # Read while the manifest held: an ingest committing in between would count a document
    # whose chunks were read before (or after) it changed.
    generation, (manifest, followups, total) = consistent_read(vendor, lambda: (
        vendor.documents(),
        [c.metadata for c in vendor.records(Where.eq(source_type=FOLLOWUP_SOURCE_TYPE),
                                            text=False)],
        vendor.count_chunks()))
    if not all(_chunk_count(meta) is not None and "type" in meta for meta in manifest.values()):
        return status_record_by_record(vendor)
    chunk_types: Counter[str] = Counter()
    archived = 0
    for meta in manifest.values():
        if meta.get(ARCHIVED_OF_KEY):
            archived += _chunk_count(meta) or 0
        elif count := _chunk_count(meta):
            chunk_types[str(meta["type"])] += count
    chunks = sum(chunk_types.values())
    return generation, _status(vendor.vendor_id, manifest, followups, chunk_types,
                               incomplete=max(0, total - len(followups) - chunks - archived))


def _chunk_count(entry: dict[str, Any]) -> int | None:
    count = entry.get("chunks")
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def status_record_by_record(vendor: VendorStore) -> tuple[str | None, VendorStatus]:
    """The counts from every record's metadata."""
    generation, (manifest, records) = consistent_read(vendor, lambda: (
        vendor.documents(), [c.metadata for c in vendor.records(text=False)]))
    versions = committed_versions(manifest)
    archives = {key for key, meta in manifest.items() if meta.get(ARCHIVED_OF_KEY)}
    followups = [m for m in records if m.get("source_type") == FOLLOWUP_SOURCE_TYPE]
    others = [m for m in records if m.get("source_type") != FOLLOWUP_SOURCE_TYPE]
    committed = [m for m in others if is_committed(m, versions)]
    chunk_types = Counter(str(m["type"]) for m in committed if m.get("doc_key") not in archives)
    return generation, _status(vendor.vendor_id, manifest, followups, chunk_types,
                               incomplete=len(others) - len(committed))


def _status(vendor_id: str, manifest: dict[str, dict[str, Any]],
            followups: Sequence[dict[str, Any]], chunk_types: Counter[str], *,
            incomplete: int) -> VendorStatus:
    """The counts of a vendor holding these documents (a file's earlier versions, kept as
    superseded, counted apart), follow-ups' metadata and committed chunks by type."""
    by_type = Counter(str(m["type"]) for m in followups) + chunk_types
    earlier = sum(1 for meta in manifest.values() if meta.get(ARCHIVED_OF_KEY))
    return VendorStatus(
        vendor_id=vendor_id, documents=len(manifest) - earlier, earlier_versions=earlier,
        chunks=sum(chunk_types.values()),
        followup_responses=len(followups),
        rounds=sorted({int(m["round_number"]) for m in followups}),
        by_type=dict(sorted(by_type.items())), incomplete_chunks=incomplete,
    )


def _folded(vendor_id: str) -> str:
    return vendor_id.lower()


def _pending_metadata(vendor_id: str) -> dict[str, Any]:
    return {"vendor_id": vendor_id, "folded": _folded(vendor_id), "pending": True}


def _recorded_metadata(generation: str | None, status: VendorStatus) -> dict[str, Any]:
    return {"vendor_id": status.vendor_id, "folded": _folded(status.vendor_id),
            "pending": generation is None, "generation": generation or "",
            "schema_version": SCHEMA_VERSION, "status": status.model_dump_json()}


def _entry(metadata: dict[str, Any]) -> Registered:
    """The entry; one recorded by a program of another schema version counts as pending, so
    readers open that vendor, which refuses (or upgrades) it as without a register."""
    vendor_id = str(metadata["vendor_id"])
    if (metadata.get("pending") or not metadata.get("status")
            or metadata.get("schema_version") != SCHEMA_VERSION):
        return Registered(vendor_id, pending=True)
    return Registered(vendor_id, pending=False, generation=str(metadata["generation"]),
                      status=VendorStatus.model_validate(json.loads(str(metadata["status"]))))


class VendorRegistry:
    """The register's collection, read and written (writes only under the write lock)."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection

    @classmethod
    def find(cls, client: Any) -> VendorRegistry | None:
        """The store's register when it is complete; None for a store without one."""
        from chromadb.errors import NotFoundError

        try:
            collection = client.get_collection(REGISTRY_COLLECTION, embedding_function=None)
        except NotFoundError:
            return None
        if not (collection.metadata or {}).get(_COMPLETE):
            return None
        return cls(collection)

    @classmethod
    def build(cls, client: Any, vendors: Sequence[VendorStore]) -> VendorRegistry:
        """Make the register (under the write lock): every vendor recorded, then marked
        complete. Run again after an interruption, it records them again."""
        collection = writes.create(
            client, REGISTRY_COLLECTION, embedding_function=None,
            metadata={"registry_version": REGISTRY_VERSION, _COMPLETE: False},
            configuration={"hnsw": PERSISTED_AT_EVERY_WRITE})
        registry = cls(collection)
        registry.record(read_vendor_status(v) for v in vendors)
        writes.apply(collection, "modify",
                     metadata={"registry_version": REGISTRY_VERSION, _COMPLETE: True})
        return registry

    def entries(self) -> dict[str, Registered]:
        """Every registered vendor, by id."""
        found = get_all(self._collection, include=("metadatas",))
        return {entry.vendor_id: entry
                for entry in (_entry(m) for m in found["metadatas"] if m)}

    def same_but_case(self, vendor_id: str) -> list[str]:
        """Registered vendor ids equal to this one but for case."""
        found = self._collection.get(where={"folded": _folded(vendor_id)},
                                     include=["metadatas"])
        return [str(m["vendor_id"]) for m in found["metadatas"] or [] if m]

    def mark_pending(self, vendor_id: str) -> None:
        writes.apply(self._collection, "upsert", ids=[vendor_id],
                     metadatas=[_pending_metadata(vendor_id)], embeddings=[[1.0]])

    def record(self, statuses: Iterable[tuple[str | None, VendorStatus]]) -> None:
        """Record each vendor's counts at its generation, a batch at a time."""
        batch: list[tuple[str | None, VendorStatus]] = []
        for item in statuses:
            batch.append(item)
            if len(batch) == 500:
                self._record(batch)
                batch = []
        if batch:
            self._record(batch)

    def _record(self, batch: Sequence[tuple[str | None, VendorStatus]]) -> None:
        writes.apply(self._collection, "upsert",
                     ids=[status.vendor_id for _, status in batch],
                     metadatas=[_recorded_metadata(g, s) for g, s in batch],
                     embeddings=[[1.0]] * len(batch))
