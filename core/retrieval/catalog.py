"""What the store holds, for people: vendor status, documents, stored chunks, and every
follow-up linked to a criterion (conversations are `core.review.conversation.store`'s).
Only committed evidence is counted or shown."""

from __future__ import annotations

from typing import Any

import numpy as np

from core.config import Settings
from core.hashing import criterion_hash
from core.models import FollowupHit, by_round
from core.reports import VendorStatus
from core.retrieval.links import AnswerIndex
from core.retrieval.source import Query
from core.retrieval.stages import candidate_from_chunk
from core.retrieval.tiers import Supersession, assign_tiers, followup_hit
from core.retrieval.versions import read_timeline
from core.store import (
    WITHDRAWN_KEY,
    EvidenceStore,
    VendorEvidence,
    VendorStore,
    Where,
    check_vendor_id,
    committed_versions,
    followup_link,
    is_committed,
)
from core.store.registry import read_vendor_status
from core.timeline.series import ARCHIVED_OF_KEY, DocumentVersion

# Records read at a time by a search of the chunks by their text.
CONTAINS_PAGE = 2_000


class Catalog:
    """Read-only views of the store; opening a vendor that does not exist is refused."""

    def __init__(self, settings: Settings, store: EvidenceStore) -> None:
        self.settings = settings
        self.store = store

    def status(self, vendor_id: str | None = None) -> list[VendorStatus]:
        """What the store holds, per vendor; only completed documents are counted."""
        if vendor_id is not None:
            check_vendor_id(vendor_id)
            return [vendor_status(self.store.open_vendor(vendor_id))]
        registered = self.store.registered()
        if registered is None:
            return [vendor_status(self.store.open_vendor(v)) for v in self.store.vendor_ids()]
        # The register's counts; a vendor a writer has not recorded yet is read itself.
        return [entry.status if entry.status is not None
                else vendor_status(self.store.open_vendor(name))
                for name, entry in sorted(registered.items())]

    def documents(self, vendor_id: str) -> list[dict[str, Any]]:
        """The vendor's committed documents (the manifest), sorted by source; a file's earlier
        versions, kept as superseded, are `document_versions`'."""
        manifest = self.store.open_vendor(vendor_id).documents()
        return sorted((m for m in manifest.values() if not m.get(ARCHIVED_OF_KEY)),
                      key=lambda m: str(m.get("source")))

    def versions_by_key(self, vendor_id: str) -> dict[str, DocumentVersion]:
        """doc_key -> every document version of the vendor, with its standing today."""
        return read_timeline(self.settings, self.store.open_vendor(vendor_id))

    def document_versions(self, vendor_id: str) -> list[DocumentVersion]:
        """Every document version the vendor's store holds, current and superseded, with
        its series and standing: series by series, each newest first."""
        versions = self.versions_by_key(vendor_id).values()
        newest = {v.series: v.date for v in versions if v.current}
        return sorted(versions, reverse=True, key=lambda v: (
            newest[v.series], v.series, v.earlier_versions))

    def browse_chunks(self, vendor_id: str, *, contains: str | None = None,
                      doc_type: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """Stored chunks and follow-ups of one vendor, optionally by text and type; chunks of
        an unfinished document ingest are left out, as retrieval leaves them out."""
        vendor = self.store.open_vendor(vendor_id)
        versions = committed_versions(vendor.documents())
        where = Where.eq(type=doc_type) if doc_type else None
        rows: list[dict[str, Any]] = []
        offset = 0
        # A search by text reads wider pages: the text is matched as each page is read.
        page = max(limit, CONTAINS_PAGE) if contains else limit
        while len(rows) < limit:
            found, read = vendor.page(where, contains=contains, limit=page, offset=offset)
            rows.extend({"id": c.id, "text": c.text, **c.metadata} for c in found
                        if is_committed(c.metadata, versions))
            if read < page:
                break
            offset += read
        return rows[:limit]

    def answered_criteria(self, vendor_id: str) -> list[str]:
        """The criteria the vendor's questionnaire rounds answer (each answer's linked
        criterion, once each whatever its typography), in the order of the rounds."""
        links = self.store.open_vendor(vendor_id).links()
        found: dict[str, str] = {}
        for meta in sorted(links.values(), key=lambda m: int(m.get("round_number") or 0)):
            text = str(meta.get("original_criterion_question_text") or "").strip()
            link = followup_link(meta)
            if text and link.canonical_hash and not meta.get(WITHDRAWN_KEY):
                found.setdefault(link.canonical_hash, text)
        return list(found.values())

    def linked_followups(self, vendor_id: str, criterion: str) -> list[FollowupHit]:
        """Every follow-up linked to the criterion by hash (its canonical hash, so a criterion
        pasted with other typography counts), whatever any strategy kept, in round order."""
        # Nothing is searched: the query carries the criterion's hashes only.
        query = Query(text=criterion, criterion_hash=criterion_hash(criterion),
                      embedding=np.zeros(0, dtype=np.float32))
        vendor = self.store.open_vendor(vendor_id)
        records = VendorEvidence(vendor, lambda meta: True)
        chunks = records.by_metadata(Where.eq(criterion_canonical_hash=query.canonical_hash))
        hits = [followup_hit(candidate_from_chunk(chunk), query, ["hash"]) for chunk in chunks]
        links = {i: followup_link(meta) for i, meta in vendor.links().items()}
        answers = Supersession(AnswerIndex(links), records.by_ids)
        return by_round(answers.mark_hits(assign_tiers(hits, [], criterion, self.settings),
                                          query) or [])


def vendor_status(vendor: VendorStore) -> VendorStatus:
    """One vendor's counts, read from one committed state of its store."""
    return read_vendor_status(vendor)[1]
