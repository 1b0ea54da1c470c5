"""The write protocol: every document version and every round stored whole or not at all.

A document is written in three steps: 1. the chunks of the new version; 2. the manifest
entry (with a new generation) that makes them visible; 3. the old version's chunks removed.
Chunks are embedded and written a step of at most 512 at a time, across documents, so memory
holds one step's vectors whatever the size of the ingest; each document is committed as soon
as its last chunk is written.
A crash anywhere leaves the old version or the new one, never half of either: readers count
only chunks whose version the manifest names.

A questionnaire round is written in two steps: 1. one manifest write of every response's
link (the criterion it answers) with a new generation; 2. one upsert of the responses. A
response is visible exactly when its record exists; a link naming a record not written yet
(a crash between the steps) finds nothing, and the same ingest run again writes it."""

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
    commit_links,
    commit_manifest_entry,
    read_manifest,
)

# What the readers make of a file is part of its version: when they learn more (version 2:
# each chunk's section heading path), ingesting the unchanged file again rewrites its chunks.
READER_VERSION = 2
# Chunks embedded and written per step of a documents ingest (or the store's largest write,
# if smaller): only one step's vectors are ever held, whatever the size of the ingest.
WRITE_STEP = 512


def document_key(source: str, doc_type: str, round_number: int | None) -> str:
    """A document's identity: its name within its type and round. The same file name sent
    again as a follow-up document (or in another round) is new evidence beside the original,
    never a replacement of it."""
    return short_hash(f"{doc_type}|{round_number or ''}|{source}")


@dataclass
class _Pending:
    """A document version to write; its records are made when its turn comes."""

    doc: PreparedDocument
    doc_key: str
    version: str


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
            outcomes.append(DocumentOutcome(source=doc.source,
                                            status="replaced" if previous else "added",
                                            chunks=len(doc.chunks), pages=doc.pages))
            pending.append(_Pending(doc, doc_key, version))

        written = self._write_documents(vendor_id, pending, doc_type, round_number, progress)
        if existing:
            written_keys = {p.doc_key for p in pending}
            for doc in prepared:  # finish any clean-up an interrupted run left behind
                doc_key = document_key(doc.source, doc_type, round_number)
                if doc_key in committed and doc_key not in written_keys:
                    delete_stale(existing, doc_key, committed[doc_key]["version"])
        return DocumentIngestReport(vendor_id=vendor_id, type=doc_type,
                                    round_number=round_number, documents=outcomes,
                                    chunks_written=written)

    def write_step(self) -> int:
        """Chunks embedded and written at a time by a documents ingest."""
        return max(1, min(WRITE_STEP, self.store.max_batch_size()))

    def _write_documents(self, vendor_id: str, pending: Sequence[_Pending], doc_type: str,
                         round_number: int | None, progress: Progress | None) -> int:
        """Embed and write the documents' chunks in steps of `write_step()` (a step may hold
        the end of one document and the start of the next), and commit each document once
        its last chunk is written. The vendor is created only when the first step's vectors
        are ready, so an embedder failing in the first step leaves the store untouched."""
        total = sum(len(item.doc.chunks) for item in pending)
        step_size = self.write_step()
        vendor: VendorCollections | None = None
        step: list[StoredRecord] = []
        finished: list[_Pending] = []  # documents whose last chunk is in `step`
        written = 0

        def write_step() -> None:
            nonlocal vendor, written
            vectors = (self.embed([r.text for r in step], progress, done=written, total=total)
                       if step else None)
            if vendor is None:
                vendor = self.store.open_vendor(vendor_id, create=True,
                                                embedding_model=self.embedder.name)
            if step:
                self.store.upsert(vendor.chunks, step, vectors)  # 1. the new versions' chunks
            for item in finished:
                self._commit_document(vendor, item, doc_type, round_number)
            written += len(step)
            step.clear()
            finished.clear()

        for item in pending:
            records = document_records(vendor_id, item.doc, item.doc_key, item.version,
                                       doc_type, round_number)
            if not records:
                finished.append(item)
            for index, record in enumerate(records, start=1):
                step.append(record)
                if index == len(records):
                    finished.append(item)
                if len(step) == step_size:
                    write_step()
        if step or finished:
            write_step()
        return written

    def _commit_document(self, vendor: VendorCollections, item: _Pending, doc_type: str,
                         round_number: int | None) -> None:
        """Steps 2 and 3 of a document whose chunks are all written."""
        doc = item.doc
        manifest: dict[str, Any] = {
            "source": doc.source, "type": doc_type, "digest": item.version,
            "version": item.version, "file_sha256": doc.digest, "chunks": len(doc.chunks),
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
        """Store a whole round: its links with a new generation, then every response in one
        write (all of them, or none)."""
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
        # Each write is one call; a link write holds the generation record besides.
        if len(records) + 1 > self.store.max_batch_size():  # cannot happen at <= 100
            raise UserInputError("payload: too many responses to write in one batch.")
        commit_links(vendor, records)  # 1. the links, and a new generation
        self.store.upsert(vendor.chunks, records, vectors)  # 2. the responses, all or none
        return QuestionnaireIngestReport(indexed_count=len(records),
                                         round_number=payload.round_number,
                                         vendor_id=payload.vendor_id)

    # Shared --------------------------------------------------------------------------

    def embed(self, texts: Sequence[str], progress: Progress | None, *, done: int = 0,
              total: int | None = None) -> np.ndarray:
        """Every text's vector, embedded in steps so progress can be shown (as `done` more
        of `total`, when these texts are part of a larger ingest)."""
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        total = len(texts) if total is None else total
        step = max(self.settings.embed_batch_size * 4, 1)
        parts = []
        for start in range(0, len(texts), step):
            parts.append(self.embedder.embed(texts[start : start + step]))
            if progress:
                progress("embedding", done + min(start + step, len(texts)), total)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

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
