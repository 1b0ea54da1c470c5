"""The library's front door: ingest documents and rounds, report status, retrieve with a trace."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from core.config import MAX_QUESTION_CHARS, Settings
from core.context import format_context_xml, format_prompt
from core.embedding import Embedder, SentenceTransformerEmbedder
from core.errors import UserInputError
from core.hashing import criterion_hash
from core.ingest.documents import PreparedDocument, check_documents, prepare_document
from core.ingest.questionnaire import (
    check_batch_vendor_ids,
    load_payload_file,
    parse_payload,
    payload_records,
)
from core.models import (
    DOCUMENT_SOURCE_TYPE,
    FOLLOWUP_SOURCE_TYPE,
    FollowupHit,
    PayloadLimits,
    QuestionnairePayload,
    RerankerStatus,
    RetrievalTrace,
    StoredRecord,
)
from core.reports import (
    DocumentIngestReport,
    DocumentOutcome,
    QuestionnaireIngestReport,
    VendorStatus,
)
from core.rerank import Reranker, load_reranker
from core.stages import RetrievalEnv, Timings
from core.store import (
    CommittedWindow,
    EvidenceStore,
    VendorCollections,
    check_vendor_id,
    commit_manifest_entry,
    committed_versions,
    followup_link,
    get_all,
    is_committed,
    manifest_generation,
    read_manifest,
)
from core.strategies import DEFAULT_STRATEGY, Query, get_strategy

Progress = Callable[[str, int, int], None]
# A criterion is asked with the same words a follow-up links to: one limit for both.
MAX_CRITERION_CHARS = MAX_QUESTION_CHARS
# Reads that race a writer are repeated until they saw one committed state, at most this often.
CONSISTENT_READ_ATTEMPTS = 5


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def document_key(source: str, doc_type: str, round_number: int | None) -> str:
    """A document's identity: its name within its type and round. The same file name sent
    again as a follow-up document (or in another round) is new evidence beside the original,
    never a replacement of it."""
    return _sha16(f"{doc_type}|{round_number or ''}|{source}")


class Workbench:
    """One store, one embedder, one reranker; thread-safe for concurrent retrievals."""

    def __init__(self, settings: Settings | None = None, *, embedder: Embedder | None = None,
                 reranker: Reranker | None = None,
                 reranker_status: RerankerStatus | None = None) -> None:
        self.settings = settings or Settings()
        self.store = EvidenceStore(self.settings)
        self._embedder = embedder
        self._reranker = reranker
        self._reranker_status = reranker_status
        if reranker is not None and reranker_status is None:
            self._reranker_status = RerankerStatus(
                name=reranker.name, ran=True, reason="reranker supplied by the caller")
        self._lock = threading.Lock()
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        # Per vendor, read again only when the store says they changed: the committed
        # document versions (keyed by the manifest generation) and each follow-up's link.
        self._committed: dict[str, tuple[str, dict[str, str]]] = {}
        self._links: dict[str, dict[str, tuple[str | None, str]]] = {}

    # Models ------------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = SentenceTransformerEmbedder(
                    self.settings.embedding_model, batch_size=self.settings.embed_batch_size,
                    allow_downloads=self.settings.allow_model_downloads,
                    download_timeout_s=self.settings.model_download_timeout_s,
                )
            return self._embedder

    def reranker(self) -> tuple[Reranker | None, RerankerStatus]:
        """The reranker and what it is; loaded (or found missing) once."""
        with self._lock:
            if self._reranker_status is None:
                self._reranker, self._reranker_status = load_reranker(self.settings)
            return self._reranker, self._reranker_status

    def embed_query(self, text: str) -> np.ndarray:
        """The query embedding, cached: the same criterion is embedded once per process."""
        with self._lock:
            cached = self._query_cache.get(text)
            if cached is not None:
                self._query_cache.move_to_end(text)
                return cached
        vector = self.embedder.embed([text])[0]
        with self._lock:
            self._query_cache[text] = vector
            while len(self._query_cache) > 512:
                self._query_cache.popitem(last=False)
        return vector

    def forget_query_embeddings(self) -> None:
        """Empty the query-embedding cache (the benchmark times every query from cold)."""
        with self._lock:
            self._query_cache.clear()

    # Ingest: documents -------------------------------------------------------------------

    def ingest_documents(self, vendor_id: str, paths: Iterable[Path | str], *,
                         doc_type: str = "tc_files", round_number: int | None = None,
                         progress: Progress | None = None) -> DocumentIngestReport:
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

        existing = self._existing_vendor(vendor_id)
        committed = read_manifest(existing) if existing else {}
        outcomes: list[DocumentOutcome] = []
        to_write: list[tuple[PreparedDocument, str, str, list[StoredRecord]]] = []
        for doc in prepared:
            doc_key = document_key(doc.source, doc_type, round_number)
            version = _sha16(f"{doc.digest}|{s.chunk_size}|{s.chunk_overlap}|{doc_type}|"
                             f"{round_number}")
            previous = committed.get(doc_key)
            if previous and previous.get("version") == version:
                outcomes.append(DocumentOutcome(source=doc.source, status="unchanged",
                                                chunks=int(previous["chunks"]), pages=doc.pages))
                continue
            records = self._document_records(vendor_id, doc, doc_key, version, doc_type,
                                             round_number)
            status = "replaced" if previous else "added"
            outcomes.append(DocumentOutcome(source=doc.source, status=status,
                                            chunks=len(records), pages=doc.pages))
            to_write.append((doc, doc_key, version, records))

        texts = [r.text for _, _, _, records in to_write for r in records]
        embeddings = self._embed_all(texts, progress)
        written = 0
        if to_write:
            vendor = self.store.open_vendor(vendor_id, create=True,
                                            embedding_model=self.embedder.name)
            offset = 0
            for doc, doc_key, version, records in to_write:
                vectors = embeddings[offset : offset + len(records)]
                offset += len(records)
                self._commit_document(vendor, doc, doc_key, version, doc_type, round_number,
                                      records, vectors)
                written += len(records)
        if existing:
            for doc in prepared:  # finish any clean-up an interrupted run left behind
                doc_key = document_key(doc.source, doc_type, round_number)
                if doc_key in committed and all(doc_key != k for _, k, _, _ in to_write):
                    self._delete_stale(existing, doc_key, committed[doc_key]["version"])
        return DocumentIngestReport(vendor_id=vendor_id, type=doc_type, round_number=round_number,
                                    documents=outcomes, chunks_written=written)

    def _document_records(self, vendor_id: str, doc: PreparedDocument, doc_key: str,
                          version: str, doc_type: str, round_number: int | None
                          ) -> list[StoredRecord]:
        records = []
        for index, (text, page) in enumerate(doc.chunks):
            metadata: dict[str, Any] = {
                "source_type": DOCUMENT_SOURCE_TYPE,
                "type": doc_type,
                "source": doc.source,
                "vendor_id": vendor_id,
                "doc_key": doc_key,
                "doc_sha": version,
                "chunk_index": index,
            }
            if page is not None:
                metadata["page"] = page
            if round_number is not None:
                metadata["round_number"] = round_number
            records.append(StoredRecord(id=f"doc-{doc_key}-{version}-{index}", text=text,
                                        metadata=metadata))
        return records

    def _commit_document(self, vendor: VendorCollections, doc: PreparedDocument, doc_key: str,
                         version: str, doc_type: str, round_number: int | None,
                         records: Sequence[StoredRecord], vectors: np.ndarray) -> None:
        # 1. chunks of the new version; 2. the manifest entry that makes them visible;
        # 3. the old version's chunks removed. A crash anywhere leaves old or new, never half.
        self.store.upsert(vendor.chunks, records, vectors)
        manifest: dict[str, Any] = {
            "source": doc.source, "type": doc_type, "digest": version, "version": version,
            "file_sha256": doc.digest, "chunks": len(records),
            "ingested_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        if round_number is not None:
            manifest["round_number"] = round_number
        if doc.pages is not None:
            manifest["pages"] = doc.pages
        commit_manifest_entry(vendor, doc_key, manifest, doc.source)
        self._delete_stale(vendor, doc_key, version)

    def _delete_stale(self, vendor: VendorCollections, doc_key: str, version: str) -> None:
        vendor.chunks.delete(where={"$and": [{"doc_key": doc_key}, {"doc_sha": {"$ne": version}}]})

    def _embed_all(self, texts: Sequence[str], progress: Progress | None) -> np.ndarray:
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        step = max(self.settings.embed_batch_size * 4, 1)
        parts = []
        for start in range(0, len(texts), step):
            parts.append(self.embedder.embed(texts[start : start + step]))
            if progress:
                progress("embedding", min(start + step, len(texts)), len(texts))
        return np.concatenate(parts)

    def _existing_vendor(self, vendor_id: str) -> VendorCollections | None:
        """The vendor's collections if it exists; a case-only clash is refused before any
        embedding or write."""
        vendors = self.store.vendor_ids()
        if vendor_id in vendors:
            return self.store.open_vendor(vendor_id, embedding_model=self.embedder.name)
        self.store.refuse_case_clash(vendor_id, vendors)
        return None


    # Ingest: questionnaire rounds --------------------------------------------------------

    def ingest_questionnaire(self, payload: QuestionnairePayload | dict[str, Any],
                             *, progress: Progress | None = None) -> QuestionnaireIngestReport:
        """Store a whole round in one write: every response, or none."""
        if not isinstance(payload, QuestionnairePayload):
            payload = parse_payload(payload, limits=PayloadLimits.from_settings(self.settings))
        elif len(payload.responses) > self.settings.max_responses_per_round:
            raise UserInputError(
                f"payload: responses holds {len(payload.responses)} entries; at most "
                f"{self.settings.max_responses_per_round} are allowed in one round.")
        self._existing_vendor(payload.vendor_id)
        records = payload_records(payload)
        vectors = self._embed_all([r.text for r in records], progress)
        vendor = self.store.open_vendor(payload.vendor_id, create=True,
                                        embedding_model=self.embedder.name)
        if len(records) > self.store.max_batch_size():  # cannot happen at <= 100 responses
            raise UserInputError("payload: too many responses to write in one batch.")
        self.store.upsert(vendor.chunks, records, vectors)
        return QuestionnaireIngestReport(indexed_count=len(records),
                                         round_number=payload.round_number,
                                         vendor_id=payload.vendor_id)

    def ingest_questionnaires(self, payloads: Sequence[QuestionnairePayload], *,
                              progress: Progress | None = None
                              ) -> Iterator[QuestionnaireIngestReport]:
        """Several rounds: every vendor id of the batch is checked before the first round is
        written, so a refusal never leaves half of the batch applied; then one report per
        round as it is stored."""
        check_batch_vendor_ids((p.vendor_id for p in payloads), self.store, self.embedder.name)
        for payload in payloads:
            yield self.ingest_questionnaire(payload, progress=progress)

    def load_questionnaires(self, files: Iterable[Path | str]) -> list[QuestionnairePayload]:
        """Validate every file before any is written."""
        limits = PayloadLimits.from_settings(self.settings)
        return [load_payload_file(Path(f), limits=limits)
                for f in files]

    # Status ------------------------------------------------------------------------------

    def vendor_ids(self) -> list[str]:
        return self.store.vendor_ids()

    def status(self, vendor_id: str | None = None) -> list[VendorStatus]:
        """What the store holds, per vendor; only completed documents are counted."""
        if vendor_id is not None:
            check_vendor_id(vendor_id)
        vendors = [vendor_id] if vendor_id is not None else self.store.vendor_ids()
        return [self._vendor_status(self.store.open_vendor(v)) for v in vendors]

    def _vendor_status(self, vendor: VendorCollections) -> VendorStatus:
        # Manifest, chunks, manifest again: an ingest committing in between would count a
        # document whose chunks were read before (or after) it changed.
        manifest = read_manifest(vendor)
        for _ in range(CONSISTENT_READ_ATTEMPTS):
            records = get_all(vendor.chunks, include=("metadatas",))["metadatas"]
            again = read_manifest(vendor)
            if again == manifest:
                break
            manifest = again
        versions = committed_versions(manifest)
        by_type: Counter[str] = Counter()
        rounds: set[int] = set()
        chunks = followups = incomplete = 0
        for meta in records:
            if meta.get("source_type") == FOLLOWUP_SOURCE_TYPE:
                followups += 1
                rounds.add(int(meta["round_number"]))
                by_type[str(meta["type"])] += 1
            elif is_committed(meta, versions):
                chunks += 1
                by_type[str(meta["type"])] += 1
            else:
                incomplete += 1
        return VendorStatus(
            vendor_id=vendor.vendor_id, documents=len(manifest), chunks=chunks,
            followup_responses=followups, rounds=sorted(rounds),
            by_type=dict(sorted(by_type.items())), incomplete_chunks=incomplete,
        )

    def documents(self, vendor_id: str) -> list[dict[str, Any]]:
        """The vendor's committed documents (the manifest), sorted by source."""
        manifest = read_manifest(self.store.open_vendor(vendor_id))
        return sorted(manifest.values(), key=lambda m: str(m.get("source")))

    def browse_chunks(self, vendor_id: str, *, contains: str | None = None,
                      doc_type: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """Stored chunks and follow-ups of one vendor, optionally by text and type; chunks of
        an unfinished document ingest are left out, as retrieval leaves them out."""
        vendor = self.store.open_vendor(vendor_id)
        versions = committed_versions(read_manifest(vendor))
        where = {"type": doc_type} if doc_type else None
        where_document = {"$contains": contains} if contains else None
        rows: list[dict[str, Any]] = []
        offset = 0
        while len(rows) < limit:
            found = vendor.chunks.get(where=where, where_document=where_document, limit=limit,
                                      offset=offset, include=["documents", "metadatas"])
            rows.extend({"id": i, "text": t, **m} for i, t, m in
                        zip(found["ids"], found["documents"], found["metadatas"], strict=True)
                        if is_committed(m, versions))
            if len(found["ids"]) < limit:
                break
            offset += limit
        return rows[:limit]

    def linked_followups(self, vendor_id: str, criterion: str) -> list[FollowupHit]:
        """Every follow-up linked to the criterion by hash, whatever any strategy kept."""
        from core.stages import assign_tiers, candidate_from_record, followup_hit

        criterion = _check_criterion(criterion)
        chash = criterion_hash(criterion)
        vendor = self.store.open_vendor(vendor_id)
        found = get_all(vendor.chunks, where={"criterion_question_hash": chash},
                        include=("documents", "metadatas"))
        hits = [followup_hit(candidate_from_record(i, t, m), criterion, chash, ["hash"])
                for i, t, m in zip(found["ids"], found["documents"], found["metadatas"],
                                   strict=True)]
        hits = assign_tiers(hits, [], criterion, self.settings.fuzzy_match_threshold)
        return sorted(hits, key=lambda h: (h.round_number, h.timestamp))

    def count_tokens(self, text: str) -> int:
        return self.embedder.count_tokens(text)

    # Retrieve ----------------------------------------------------------------------------

    def retrieve(self, vendor_id: str, criterion: str,
                 strategy: str = DEFAULT_STRATEGY) -> RetrievalTrace:
        """Run one strategy for one criterion of one vendor; every stage lands in the trace."""
        chosen = get_strategy(strategy)
        criterion = _check_criterion(criterion)
        started = time.perf_counter()
        timings = Timings()
        vendor = self.store.open_vendor(vendor_id, embedding_model=self.embedder.name)
        reranker, reranker_status = self.reranker()
        with timings.stage("load_model"):  # ~0 once loaded; kept apart from query time
            self.embedder.warm_up()
        with timings.stage("embed_query"):
            query = Query(text=criterion, criterion_hash=criterion_hash(criterion),
                          embedding=self.embed_query(criterion))
        # A document replaced while the strategy runs would leave the trace with chunks of
        # neither version: run again on the new manifest until one manifest held throughout.
        attempts = 0
        while True:
            attempts += 1
            with timings.stage("manifest"):
                generation, committed = self._committed_versions(vendor)
            env = RetrievalEnv(settings=self.settings, vendor=vendor, embedder=self.embedder,
                               reranker=reranker, reranker_status=reranker_status,
                               embed_query=self.embed_query, _committed=committed,
                               followup_links=lambda: self._followup_links(vendor))
            env.vendor = replace(vendor, chunks=CommittedWindow(vendor.chunks, env.is_committed))
            result = chosen.run(env, query, timings)
            with timings.stage("manifest"):
                if generation is None:
                    consistent = committed_versions(read_manifest(vendor)) == committed
                else:
                    consistent = manifest_generation(vendor) == generation
            if consistent or attempts == CONSISTENT_READ_ATTEMPTS:
                break
        if attempts > 1:
            env.notes.insert(0, f"The vendor's documents changed during retrieval; it ran "
                                f"{attempts} times" + (" to read one consistent state."
                                if consistent else " and still saw them change."))
        if not reranker_status.ran:
            env.notes.insert(0, f"No reranker ran: {reranker_status.reason}.")
        with timings.stage("format"):
            context = format_context_xml(result.evidence, result.followups)
            prompt = format_prompt(criterion, result.evidence, result.followups)
        timings.ms["total"] = (time.perf_counter() - started) * 1000.0
        return RetrievalTrace(
            vendor_id=vendor_id, criterion=criterion, criterion_hash=query.criterion_hash,
            strategy=chosen.name, reranker=reranker_status,
            embedding_model=self.embedder.name, constants=self.settings.seed_constants(),
            context=context, prompt=prompt, followups=result.followups,
            evidence=result.evidence, first_stage=result.first_stage,
            hash_path=result.hash_path, semantic_path=result.semantic_path,
            reranked=result.reranked, dropped_followups=result.dropped_followups,
            notes=env.notes, timings_ms={k: round(v, 3) for k, v in timings.ms.items()},
        )

    def _committed_versions(self, vendor: VendorCollections
                            ) -> tuple[str | None, dict[str, str]]:
        """(manifest generation, doc_key -> committed version); the manifest itself is read
        only when its generation changed since the last read."""
        generation = manifest_generation(vendor)
        with self._lock:
            cached = self._committed.get(vendor.vendor_id)
        if generation is not None and cached is not None and cached[0] == generation:
            return cached
        versions = committed_versions(read_manifest(vendor))
        if generation is not None:
            with self._lock:
                self._committed[vendor.vendor_id] = (generation, versions)
        return generation, versions

    def _followup_links(self, vendor: VendorCollections) -> dict[str, tuple[str | None, str]]:
        """Follow-up id -> (criterion hash, linked criterion text) for every stored response.

        A response's id is made from its criterion and question, so what it links to never
        changes: only ids not seen before are read, and one id-only scan finds them."""
        ids = get_all(vendor.chunks, where={"source_type": FOLLOWUP_SOURCE_TYPE},
                      include=())["ids"]
        with self._lock:
            known = self._links.get(vendor.vendor_id, {})
        new = [i for i in ids if i not in known]
        found: dict[str, tuple[str | None, str]] = {}
        batch = self.store.max_batch_size()
        for start in range(0, len(new), batch):
            page = vendor.chunks.get(ids=new[start : start + batch], include=["metadatas"])
            for record_id, meta in zip(page["ids"], page["metadatas"], strict=True):
                if meta is not None:
                    found[record_id] = followup_link(meta)
        links = {i: known.get(i) or found[i] for i in ids if i in known or i in found}
        with self._lock:
            self._links[vendor.vendor_id] = links
        return links


def _check_criterion(criterion: object) -> str:
    if not isinstance(criterion, str):
        raise UserInputError(
            f"The criterion must be text, not {type(criterion).__name__}.")
    if not criterion.strip():
        raise UserInputError("The criterion is empty; give the criterion question to retrieve for.")
    try:
        criterion.encode("utf-8")
    except UnicodeEncodeError:
        raise UserInputError(
            "The criterion holds a character that is not valid Unicode text (a lone "
            "surrogate).") from None
    if "\x00" in criterion:
        raise UserInputError("The criterion contains a NUL byte.")
    if len(criterion) > MAX_CRITERION_CHARS:
        raise UserInputError(
            f"The criterion is {len(criterion)} characters long; at most {MAX_CRITERION_CHARS} "
            "are allowed.")
    return criterion.strip()
