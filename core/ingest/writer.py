"""The write protocol: every document version and every round stored whole or not at all.

A document is written in three steps: 1. the chunks of the new version; 2. the manifest
entry (with a new generation) that makes them visible; 3. the old version's chunks removed.
A crash anywhere leaves the old version or the new one, never half of either: readers count
only chunks whose version the manifest names. A questionnaire round is one upsert."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from core.config import Settings
from core.embedding import Embedder
from core.errors import UserInputError
from core.hashing import short_hash
from core.ingest.documents import PreparedDocument, check_documents, prepare_document
from core.ingest.questionnaire import parse_payload, payload_records
from core.models import (
    DOCUMENT_SOURCE_TYPE,
    PayloadLimits,
    QuestionnairePayload,
    StoredRecord,
)
from core.reports import DocumentIngestReport, DocumentOutcome, Progress, QuestionnaireIngestReport
from core.store import (
    EvidenceStore,
    VendorCollections,
    check_vendor_id,
    commit_manifest_entry,
    read_manifest,
)

# What the readers make of a file is part of its version: when they learn more (version 2:
# each chunk's section heading path), ingesting the unchanged file again rewrites its chunks.
READER_VERSION = 2


def document_key(source: str, doc_type: str, round_number: int | None) -> str:
    """A document's identity: its name within its type and round. The same file name sent
    again as a follow-up document (or in another round) is new evidence beside the original,
    never a replacement of it."""
    return short_hash(f"{doc_type}|{round_number or ''}|{source}")


@dataclass
class _Pending:
    doc: PreparedDocument
    doc_key: str
    version: str
    records: list[StoredRecord]


class EvidenceWriter:
    """Writes documents and rounds into the store with the embedder the store was built with."""

    def __init__(self, settings: Settings, store: EvidenceStore,
                 embedder: Callable[[], Embedder]) -> None:
        self.settings = settings
        self.store = store
        self._embedder = embedder  # loaded on first use: a refusal needs no model

    @property
    def embedder(self) -> Embedder:
        return self._embedder()

    # Documents -----------------------------------------------------------------------

    def documents(self, vendor_id: str, paths: Iterable[Path | str], *, doc_type: str,
                  round_number: int | None, progress: Progress | None = None
                  ) -> DocumentIngestReport:
        """Validate every file first, then write each document completely or not at all."""
        check_vendor_id(vendor_id)
        if isinstance(paths, str | Path):  # one path, not the characters of one
            paths = [paths]
        s = self.settings
        # Type, round, every file found and its size: all refused before any file is read.
        files = check_documents([Path(p) for p in paths], doc_type=doc_type,
                                round_number=round_number, max_bytes=s.max_document_bytes)
        prepared = []
        for i, doc in enumerate(files, start=1):
            prepared.append(prepare_document(doc, s.chunk_size, s.chunk_overlap,
                                             max_bytes=s.max_document_bytes))
            if progress:
                progress("reading", i, len(files))

        existing = self.existing_vendor(vendor_id)
        committed = read_manifest(existing) if existing else {}
        outcomes: list[DocumentOutcome] = []
        pending: list[_Pending] = []
        for doc in prepared:
            doc_key = document_key(doc.source, doc_type, round_number)
            version = short_hash(f"{doc.digest}|{s.chunk_size}|{s.chunk_overlap}|{doc_type}|"
                                 f"{round_number}|{READER_VERSION}")
            previous = committed.get(doc_key)
            if previous and previous.get("version") == version:
                outcomes.append(DocumentOutcome(source=doc.source, status="unchanged",
                                                chunks=int(previous["chunks"]), pages=doc.pages))
                continue
            records = document_records(vendor_id, doc, doc_key, version, doc_type,
                                       round_number)
            outcomes.append(DocumentOutcome(source=doc.source,
                                            status="replaced" if previous else "added",
                                            chunks=len(records), pages=doc.pages))
            pending.append(_Pending(doc, doc_key, version, records))

        embeddings = self.embed([r.text for p in pending for r in p.records], progress)
        written = 0
        if pending:
            vendor = self.store.open_vendor(vendor_id, create=True,
                                            embedding_model=self.embedder.name)
            offset = 0
            for item in pending:
                vectors = embeddings[offset : offset + len(item.records)]
                offset += len(item.records)
                self._commit_document(vendor, item, doc_type, round_number, vectors)
                written += len(item.records)
        if existing:
            written_keys = {p.doc_key for p in pending}
            for doc in prepared:  # finish any clean-up an interrupted run left behind
                doc_key = document_key(doc.source, doc_type, round_number)
                if doc_key in committed and doc_key not in written_keys:
                    delete_stale(existing, doc_key, committed[doc_key]["version"])
        return DocumentIngestReport(vendor_id=vendor_id, type=doc_type,
                                    round_number=round_number, documents=outcomes,
                                    chunks_written=written)

    def _commit_document(self, vendor: VendorCollections, item: _Pending, doc_type: str,
                         round_number: int | None, vectors: np.ndarray) -> None:
        doc = item.doc
        self.store.upsert(vendor.chunks, item.records, vectors)  # 1. the new version
        manifest: dict[str, Any] = {
            "source": doc.source, "type": doc_type, "digest": item.version,
            "version": item.version, "file_sha256": doc.digest, "chunks": len(item.records),
            "ingested_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        if round_number is not None:
            manifest["round_number"] = round_number
        if doc.pages is not None:
            manifest["pages"] = doc.pages
        commit_manifest_entry(vendor, item.doc_key, manifest, doc.source)  # 2. visible
        delete_stale(vendor, item.doc_key, item.version)  # 3. the old version gone

    # Questionnaire rounds ------------------------------------------------------------

    def round(self, payload: QuestionnairePayload | dict[str, Any], *,
              progress: Progress | None = None) -> QuestionnaireIngestReport:
        """Store a whole round in one write: every response, or none."""
        if not isinstance(payload, QuestionnairePayload):
            payload = parse_payload(payload, limits=PayloadLimits.from_settings(self.settings))
        elif len(payload.responses) > self.settings.max_responses_per_round:
            raise UserInputError(
                f"payload: responses holds {len(payload.responses)} entries; at most "
                f"{self.settings.max_responses_per_round} are allowed in one round.")
        self.existing_vendor(payload.vendor_id)
        records = payload_records(payload)
        vectors = self.embed([r.text for r in records], progress)
        vendor = self.store.open_vendor(payload.vendor_id, create=True,
                                        embedding_model=self.embedder.name)
        if len(records) > self.store.max_batch_size():  # cannot happen at <= 100 responses
            raise UserInputError("payload: too many responses to write in one batch.")
        self.store.upsert(vendor.chunks, records, vectors)
        return QuestionnaireIngestReport(indexed_count=len(records),
                                         round_number=payload.round_number,
                                         vendor_id=payload.vendor_id)

    # Shared --------------------------------------------------------------------------

    def embed(self, texts: Sequence[str], progress: Progress | None) -> np.ndarray:
        """Every text's vector, embedded in steps so progress can be shown."""
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        step = max(self.settings.embed_batch_size * 4, 1)
        parts = []
        for start in range(0, len(texts), step):
            parts.append(self.embedder.embed(texts[start : start + step]))
            if progress:
                progress("embedding", min(start + step, len(texts)), len(texts))
        return np.concatenate(parts)

    def existing_vendor(self, vendor_id: str) -> VendorCollections | None:
        """The vendor's collections if it exists; a case-only clash is refused before any
        embedding or write."""
        vendors = self.store.vendor_ids()
        if vendor_id in vendors:
            return self.store.open_vendor(vendor_id, embedding_model=self.embedder.name)
        self.store.refuse_case_clash(vendor_id, vendors)
        return None


def document_records(vendor_id: str, doc: PreparedDocument, doc_key: str, version: str,
                     doc_type: str, round_number: int | None) -> list[StoredRecord]:
    """One record per chunk of a document version, with the metadata retrieval reads: the
    PDF page and the section (heading path) where the document has them."""
    records = []
    for index, chunk in enumerate(doc.chunks):
        metadata: dict[str, Any] = {
            "source_type": DOCUMENT_SOURCE_TYPE,
            "type": doc_type,
            "source": doc.source,
            "vendor_id": vendor_id,
            "doc_key": doc_key,
            "doc_sha": version,
            "chunk_index": index,
        }
        if chunk.page is not None:
            metadata["page"] = chunk.page
        if chunk.section:
            metadata["section"] = chunk.section
        if round_number is not None:
            metadata["round_number"] = round_number
        records.append(StoredRecord(id=f"doc-{doc_key}-{version}-{index}", text=chunk.text,
                                    metadata=metadata))
    return records


def delete_stale(vendor: VendorCollections, doc_key: str, version: str) -> None:
    """Remove every chunk of the document that is not of this version."""
    vendor.chunks.delete(where={"$and": [{"doc_key": doc_key}, {"doc_sha": {"$ne": version}}]})
