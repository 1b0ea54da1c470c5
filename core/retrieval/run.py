"""One strategy run on one committed state of a vendor's store, turned into a trace."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime

import numpy as np

from core.config import Settings
from core.controls.mappings import ControlLink
from core.encoders.rerank import Reranker
from core.models import RerankerStatus
from core.retrieval.fusion import HybridSearch, IndexedVectorSearch
from core.retrieval.lexical import LexicalIndex
from core.retrieval.links import FollowupLinks, LinkedResponses, Links
from core.retrieval.source import CandidateSource, Query, RecordReader, StoredChunk
from core.retrieval.stages import RetrievalEnv, Timings
from core.retrieval.strategies import Strategy
from core.retrieval.strategies.base import StrategyResult
from core.retrieval.tiers import Supersession
from core.retrieval.versions import DocumentVersions, ManifestState, read_timeline
from core.store import (
    CONSISTENT_READ_ATTEMPTS,
    EvidenceStore,
    VendorEvidence,
    VendorStore,
    Where,
    chunk_record_id,
    committed_versions,
    is_committed,
)
from core.timeline.series import DocumentVersion


def mark_later_answers(env: RetrievalEnv, query: Query, result: StrategyResult
                       ) -> StrategyResult:
    """The result with the criterion's current answer and, on every follow-up it holds
    (tiered, dropped or an excerpt), the later answer to its criterion (see Supersession)."""
    answers = Supersession.of(env)
    return replace(
        result,
        current_answer=answers.current(query),
        evidence=answers.mark_candidates(result.evidence, query),
        followups=answers.mark_hits(result.followups, query) or [],
        first_stage=answers.mark_candidates(result.first_stage, query),
        reranked=answers.mark_candidates(result.reranked, query),
        hash_path=answers.mark_hits(result.hash_path, query),
        semantic_path=answers.mark_hits(result.semantic_path, query),
        dropped_followups=[d.model_copy(update={"followup": hit}) for d, hit in zip(
            result.dropped_followups,
            answers.mark_hits([d.followup for d in result.dropped_followups], query) or [],
            strict=True)])


def mark_versions(env: RetrievalEnv, result: StrategyResult) -> StrategyResult:
    """The result with every document excerpt's standing (its date, its series, whether it
    is current or stale) and, for a superseded document, its series' current version."""
    versions = DocumentVersions.of(env)
    return replace(result, evidence=versions.mark(result.evidence),
                   first_stage=versions.mark(result.first_stage),
                   reranked=versions.mark(result.reranked))


class StrategyRunner:
    """Runs strategies against the store; per vendor it keeps, until the store says they
    changed, the committed document versions and each follow-up's link (both keyed by the
    manifest generation, which every document commit and every round renews). Safe to share
    between threads."""

    def __init__(self, settings: Settings, store: EvidenceStore) -> None:
        self.settings = settings
        self.store = store
        self.links = FollowupLinks()
        self.responses = LinkedResponses()
        self._lock = threading.Lock()
        self._committed: dict[str, tuple[str, dict[str, str]]] = {}
        self._warmed: dict[str, str] = {}  # vendor -> generation its linked records were read at
        # vendor -> (generation, day, its document versions): standing changes with the day.
        self._timelines: dict[str, tuple[str, date, dict[str, DocumentVersion]]] = {}
        # vendor -> (generation, doc_key -> a version's committed chunks and their vectors),
        # read for the current versions a retrieval brings in beside a superseded one
        self._version_chunks: dict[str, tuple[str, dict[str, tuple[list[StoredChunk],
                                                                    np.ndarray]]]] = {}
        # vendor -> (generation, its documents and series corrections), read with its versions
        self._manifests: dict[str, tuple[str, ManifestState]] = {}
        # The controls a criterion is mapped to (set by the workbench); None: none.
        self.criterion_controls: Callable[[Query, bool], tuple[ControlLink, ...]] | None = None

    def evidence(self, vendor: VendorStore, versions: dict[str, str]) -> VendorEvidence:
        """The vendor's chunks as a candidate source and record reader at these versions."""
        return VendorEvidence(vendor, lambda meta: is_committed(meta, versions),
                              batch_size=vendor.batch_size())

    def read_links(self, vendor: VendorStore, generation: str | None) -> Links:
        """Every follow-up's link at this manifest generation (kept until it changes)."""
        return self.links.read(vendor, generation).links

    def read_linked(self, vendor: VendorStore, generation: str | None,
                    records: RecordReader, ids: Sequence[str]) -> list[StoredChunk]:
        """Linked follow-ups' records with their vectors, in the order of `ids`. At a new
        generation every linked record not kept as its link fingerprints it is read in one
        go (all of them the first time, then a new round's); after that, only a record its
        link names but the store did not hold yet is read again."""
        fingerprints = self.links.read(vendor, generation).fingerprints
        with self._lock:
            warm = generation is not None and self._warmed.get(vendor.vendor_id) != generation
            if warm:
                self._warmed[vendor.vendor_id] = generation
        if warm:  # once per generation: a retrieval on an unchanged store reads none
            self.responses.warm(vendor.vendor_id, records, fingerprints)
        return self.responses.fetch(vendor.vendor_id, records, ids, fingerprints)

    def document_versions(self, vendor: VendorStore, generation: str | None
                          ) -> dict[str, DocumentVersion]:
        """The vendor's document versions at this manifest generation (kept until it, or
        the day, changes)."""
        today = datetime.now(UTC).date()
        with self._lock:
            kept = self._timelines.get(vendor.vendor_id)
            read = self._manifests.get(vendor.vendor_id)
        if generation is not None and kept is not None and kept[:2] == (generation, today):
            return kept[2]
        manifest = (read[1] if generation is not None and read is not None
                    and read[0] == generation else ManifestState.read(vendor))
        versions = read_timeline(self.settings, manifest, today)
        if generation is not None:
            with self._lock:
                self._timelines[vendor.vendor_id] = (generation, today, versions)
        return versions

    def version_chunks(self, vendor: VendorStore, generation: str | None,
                       evidence: VendorEvidence, doc_key: str
                       ) -> tuple[list[StoredChunk], np.ndarray]:
        """One document version's committed chunks with their vectors (a row each), kept
        until the manifest generation changes."""
        with self._lock:
            kept = self._version_chunks.get(vendor.vendor_id)
            if kept is not None and generation is not None and kept[0] == generation \
                    and doc_key in kept[1]:
                return kept[1][doc_key]
        chunks = self._committed_chunks(vendor, generation, evidence, doc_key)
        read = (chunks, np.asarray([c.embedding for c in chunks], dtype=np.float32))
        if generation is not None:
            with self._lock:
                kept = self._version_chunks.get(vendor.vendor_id)
                if kept is None or kept[0] != generation:
                    kept = (generation, {})
                    self._version_chunks[vendor.vendor_id] = kept
                kept[1][doc_key] = read
        return read

    def _committed_chunks(self, vendor: VendorStore, generation: str | None,
                          evidence: VendorEvidence, doc_key: str) -> list[StoredChunk]:
        """A document version's committed chunks with their vectors: by their ids where the
        manifest read at this generation gives the version and its number of chunks (a
        lookup by id), else by a metadata filter."""
        with self._lock:
            committed = self._committed.get(vendor.vendor_id)
            manifest = self._manifests.get(vendor.vendor_id)
        version = committed[1].get(doc_key) if committed and committed[0] == generation else None
        entry = (manifest[1].documents.get(doc_key, {})
                 if manifest and manifest[0] == generation else {})
        if version is not None and isinstance(entry.get("chunks"), int):
            ids = [chunk_record_id(doc_key, version, i) for i in range(entry["chunks"])]
            chunks = [c for c in evidence.by_ids(ids, embeddings=True)
                      if c.metadata.get("doc_key") == doc_key and evidence.is_committed(c.metadata)]
            if len(chunks) == len(ids):
                return chunks
        return [c for c in evidence.by_ids(evidence.ids(Where.eq(doc_key=doc_key)),
                                           embeddings=True)
                if evidence.is_committed(c.metadata)]

    def env(self, vendor: VendorStore, generation: str | None, evidence: VendorEvidence,
            search: CandidateSource, reranker: Reranker | None,
            reranker_status: RerankerStatus) -> RetrievalEnv:
        """What a strategy is given for the vendor at the committed versions `evidence` reads
        (read at this manifest generation): its first stage, records, reranker, and links."""
        env = RetrievalEnv(
            settings=self.settings, vendor_id=vendor.vendor_id, search=search,
            records=evidence, reranker=reranker, reranker_status=reranker_status,
            read_links=lambda: self.read_links(vendor, generation),
            read_linked=lambda ids: self.read_linked(vendor, generation, evidence, ids),
            read_answers=lambda: self.links.read(vendor, generation).answers,
            read_versions=lambda: self.document_versions(vendor, generation),
            read_version_chunks=lambda doc_key: self.version_chunks(
                vendor, generation, evidence, doc_key),
            read_controls=self.criterion_controls)
        env.standing = lambda metadata: DocumentVersions.of(env).fields_for(metadata)
        return env

    def store_state(self, vendor_id: str | None, embedding_model: str) -> str | None:
        """A value that changes whenever what readers see of the vendor (of every vendor,
        without one) changes, for caching views of it; None while a round is between its
        link write and its responses' write (or for a store without generations), when a
        view read now may change without a new generation, so nothing should be cached."""
        if vendor_id is not None:
            if not self.store.holds(vendor_id):
                return f"{vendor_id}:absent"
            state = self.settled_state(self.store.open_vendor(
                vendor_id, embedding_model=embedding_model))
            return None if state is None else f"{vendor_id}:{state}"
        # Every vendor: the register's generations, one read whatever their number; a vendor
        # a writer has not recorded yet is read itself.
        registered = self.store.registered()
        pending = (self.store.vendor_ids() if registered is None
                   else [v for v, entry in registered.items() if entry.pending])
        parts = [] if registered is None else [
            f"{v}:{entry.generation}" for v, entry in registered.items() if not entry.pending]
        for name in pending:
            state = self.settled_state(self.store.open_vendor(name,
                                                              embedding_model=embedding_model))
            if state is None:
                return None
            parts.append(f"{name}:{state}")
        parts.sort()
        return "|".join(parts)

    def settled_state(self, vendor: VendorStore) -> str | None:
        """The vendor's manifest generation, when every linked response is in the store as
        its link fingerprints it and the generation held while that was read; else None."""
        generation = vendor.generation()
        if generation is None:
            return None
        fingerprints = self.links.read(vendor, generation).fingerprints
        records = self.evidence(vendor, {})
        self.responses.warm(vendor.vendor_id, records, fingerprints)
        if not self.responses.holds(vendor.vendor_id, fingerprints):
            return None
        return generation if vendor.generation() == generation else None

    def lexical(self, vendor: VendorStore, versions: dict[str, str],
                generation: str | None = None) -> LexicalIndex:
        """The vendor's BM25 index, synced to these committed versions; given the manifest
        generation they were read at, a sync already done at it costs one comparison."""
        index = self._lexical_index(vendor, versions, generation)
        index.sync()
        return index

    def _lexical_index(self, vendor: VendorStore, versions: dict[str, str],
                       generation: str | None) -> LexicalIndex:
        """The vendor's BM25 index at these committed versions, not synced."""
        return LexicalIndex.for_vendor(
            self.settings, vendor, versions, generation=generation,
            expected_followups=lambda: self.links.read(vendor, generation).indexed_as())

    def hybrid(self, vendor: VendorStore, versions: dict[str, str],
               evidence: VendorEvidence | None = None, generation: str | None = None
               ) -> HybridSearch:
        """The vector search and the synced lexical index fused by reciprocal rank fusion."""
        return HybridSearch(evidence or self.evidence(vendor, versions),
                            self.lexical(vendor, versions, generation),
                            lexical_n=self.settings.lexical_first_stage_n, k=self.settings.rrf_k,
                            beside=self.settings.chroma_host is not None)

    def search(self, strategy: Strategy, vendor: VendorStore, versions: dict[str, str],
               evidence: VendorEvidence, timings: Timings, generation: str | None = None
               ) -> CandidateSource:
        """The first stage the strategy asks for, at these committed versions."""
        if strategy.search == "vector":
            return evidence
        if strategy.search == "vector_indexed":
            # The lexical index only where a hybrid search or an ask already synced it to
            # this state: a retrieval of `precedence` never writes it.
            with timings.stage("lexical_sync"):
                index = self._lexical_index(vendor, versions, generation)
                if not index.settled():
                    index.close()  # the connection its check used goes back
                    return evidence
            return IndexedVectorSearch(evidence, index)
        if strategy.search != "hybrid":
            raise ValueError(f"strategy {strategy.name!r}: search must be 'vector', "
                             f"'vector_indexed' or 'hybrid', not {strategy.search!r}")
        with timings.stage("lexical_sync"):
            return self.hybrid(vendor, versions, evidence, generation)

    def run(self, strategy: Strategy, vendor: VendorStore, query: Query,
            reranker: Reranker | None, reranker_status: RerankerStatus,
            timings: Timings) -> tuple[StrategyResult, list[str]]:
        """The strategy's result on one committed state, and the notes for the trace.

        A document replaced while the strategy runs would leave the result with chunks of
        neither version: it runs again on the new manifest until one manifest held
        throughout, at most CONSISTENT_READ_ATTEMPTS times.

        The state kept from the last read is tried first, unread: generations never repeat,
        so the generation read after the run still being the kept one means the manifest
        held it from that last read to now. An unchanged store costs one generation read;
        a changed one, the run on the kept state besides, which is not counted as an
        attempt (the change may have come before this retrieval began)."""
        attempts = 0
        kept = self.kept_state(vendor)
        # The manifest stage is listed first whichever read comes first, so every trace names
        # its stages in one order.
        timings.ms.setdefault("manifest", 0.0)
        while True:
            if kept is not None:
                generation, versions = kept
            else:
                attempts += 1
                with timings.stage("manifest"):
                    generation, versions = self.committed_state(vendor)
            evidence = self.evidence(vendor, versions)
            search = self.search(strategy, vendor, versions, evidence, timings, generation)
            env = self.env(vendor, generation, evidence, search, reranker, reranker_status)
            try:
                result = strategy.run(env, query, timings)
                with timings.stage("later_answers"):
                    result = mark_later_answers(env, query, result)
                with timings.stage("document_versions"):
                    result = mark_versions(env, result)
                result = replace(result, controls=tuple(env.kept.get("controls", ())))
            finally:
                if isinstance(search, HybridSearch | IndexedVectorSearch):
                    search.close()
            with timings.stage("manifest"):
                if generation is None:
                    consistent = committed_versions(vendor.documents()) == versions
                else:
                    consistent = vendor.generation() == generation
            if kept is not None:
                kept = None
                if consistent:
                    break
                continue
            if consistent or attempts == CONSISTENT_READ_ATTEMPTS:
                break
        if attempts > 1:
            env.notes.insert(0, f"The vendor's documents changed during retrieval; it ran "
                                f"{attempts} times" + (" to read one consistent state."
                                if consistent else " and still saw them change."))
        if not reranker_status.ran:
            env.notes.insert(0, f"No reranker ran: {reranker_status.reason}.")
        return result, env.notes

    def kept_state(self, vendor: VendorStore) -> tuple[str, dict[str, str]] | None:
        """The (generation, versions) last read for the vendor, without reading anything."""
        with self._lock:
            return self._committed.get(vendor.vendor_id)

    def committed_state(self, vendor: VendorStore
                            ) -> tuple[str | None, dict[str, str]]:
        """(manifest generation, doc_key -> committed version); the manifest itself is read
        only when its generation changed since the last read."""
        generation = vendor.generation()
        with self._lock:
            cached = self._committed.get(vendor.vendor_id)
        if generation is not None and cached is not None and cached[0] == generation:
            return cached
        manifest = ManifestState.read(vendor)
        versions = committed_versions(manifest.documents)
        if generation is not None:
            with self._lock:
                self._committed[vendor.vendor_id] = (generation, versions)
                self._manifests[vendor.vendor_id] = (generation, manifest)
        return generation, versions
