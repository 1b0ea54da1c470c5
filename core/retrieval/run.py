"""One strategy run on one committed state of a vendor's store, turned into a trace."""

from __future__ import annotations

import threading
import time

from core.config import Settings
from core.context import format_context_xml, format_prompt
from core.models import RerankerStatus, RetrievalTrace, SeedConstants
from core.rerank import Reranker
from core.retrieval.fusion import HybridSearch
from core.retrieval.lexical import LexicalIndex
from core.retrieval.links import FollowupLinks
from core.retrieval.source import CandidateSource, ChromaEvidence, Query
from core.retrieval.stages import RetrievalEnv, Timings
from core.store import (
    CONSISTENT_READ_ATTEMPTS,
    EvidenceStore,
    VendorCollections,
    committed_versions,
    is_committed,
    manifest_generation,
    read_manifest,
)
from core.strategies import Strategy
from core.strategies.base import StrategyResult


class StrategyRunner:
    """Runs strategies against the store; per vendor it keeps, until the store says they
    changed, the committed document versions (keyed by the manifest generation) and each
    follow-up's link. Safe to share between threads."""

    def __init__(self, settings: Settings, store: EvidenceStore) -> None:
        self.settings = settings
        self.store = store
        self.links = FollowupLinks()
        self._lock = threading.Lock()
        self._committed: dict[str, tuple[str, dict[str, str]]] = {}

    def evidence(self, vendor: VendorCollections, versions: dict[str, str]) -> ChromaEvidence:
        """The vendor's chunks as a candidate source and record reader at these versions."""
        return ChromaEvidence(vendor.chunks, lambda meta: is_committed(meta, versions),
                              batch_size=self.store.max_batch_size())

    def lexical(self, vendor: VendorCollections, versions: dict[str, str]) -> LexicalIndex:
        """The vendor's BM25 index, synced to these committed versions."""
        index = LexicalIndex.for_vendor(self.settings, vendor, versions)
        index.sync()
        return index

    def hybrid(self, vendor: VendorCollections, versions: dict[str, str],
               evidence: ChromaEvidence | None = None) -> HybridSearch:
        """The vector search and the synced lexical index fused by reciprocal rank fusion."""
        return HybridSearch(evidence or self.evidence(vendor, versions),
                            self.lexical(vendor, versions),
                            lexical_n=self.settings.lexical_first_stage_n, k=self.settings.rrf_k)

    def search(self, strategy: Strategy, vendor: VendorCollections, versions: dict[str, str],
               evidence: ChromaEvidence, timings: Timings) -> CandidateSource:
        """The first stage the strategy asks for, at these committed versions."""
        if strategy.search == "vector":
            return evidence
        if strategy.search != "hybrid":
            raise ValueError(f"strategy {strategy.name!r}: search must be 'vector' or "
                             f"'hybrid', not {strategy.search!r}")
        with timings.stage("lexical_sync"):
            return self.hybrid(vendor, versions, evidence)

    def run(self, strategy: Strategy, vendor: VendorCollections, query: Query,
            reranker: Reranker | None, reranker_status: RerankerStatus,
            timings: Timings) -> tuple[StrategyResult, list[str]]:
        """The strategy's result on one committed state, and the notes for the trace.

        A document replaced while the strategy runs would leave the result with chunks of
        neither version: it runs again on the new manifest until one manifest held
        throughout, at most CONSISTENT_READ_ATTEMPTS times."""
        attempts = 0
        while True:
            attempts += 1
            with timings.stage("manifest"):
                generation, versions = self.committed_state(vendor)
            evidence = self.evidence(vendor, versions)
            search = self.search(strategy, vendor, versions, evidence, timings)
            env = RetrievalEnv(
                settings=self.settings, vendor_id=vendor.vendor_id, search=search,
                records=evidence, reranker=reranker, reranker_status=reranker_status,
                read_links=lambda ev=evidence: self.links.read(vendor.vendor_id, ev))
            result = strategy.run(env, query, timings)
            with timings.stage("manifest"):
                if generation is None:
                    consistent = committed_versions(read_manifest(vendor)) == versions
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
        return result, env.notes

    def committed_state(self, vendor: VendorCollections
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


def build_trace(*, vendor_id: str, query: Query, strategy: Strategy, result: StrategyResult,
                notes: list[str], reranker_status: RerankerStatus, embedding_model: str,
                settings: Settings, timings: Timings, started: float) -> RetrievalTrace:
    """The trace of one run: the strategy's parts, the context and prompt laid out from
    them, the constants in force and every stage's time since `started`."""
    with timings.stage("format"):
        context = format_context_xml(result.evidence, result.followups)
        prompt = format_prompt(query.text, result.evidence, result.followups)
    timings.ms["total"] = (time.perf_counter() - started) * 1000.0
    return RetrievalTrace(
        vendor_id=vendor_id, criterion=query.text, criterion_hash=query.criterion_hash,
        strategy=strategy.name, reranker=reranker_status, embedding_model=embedding_model,
        constants=SeedConstants(**settings.seed_constants()), context=context, prompt=prompt,
        followups=result.followups, evidence=result.evidence, first_stage=result.first_stage,
        hash_path=result.hash_path, semantic_path=result.semantic_path,
        reranked=result.reranked, dropped_followups=result.dropped_followups, notes=notes,
        timings_ms={k: round(v, 3) for k, v in timings.ms.items()}, boost=result.boost,
    )
