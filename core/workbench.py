"""The library's front door: it composes the store, the models and the pipelines, and hands
each call to the module that owns it. Only the command line, the dashboard and the benchmark
import it; features are given `Services` or a protocol of what they use."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.config import Settings
from core.controls.mappings import criteria_controls
from core.criteria import check_criterion
from core.encoders.embedding import Embedder, QueryEmbeddings, SentenceTransformerEmbedder
from core.encoders.factory import configured_embedder
from core.encoders.rerank import Reranker, load_reranker
from core.ingest import LoadedRound
from core.ingest.rounds.files import load_json_rounds, load_rounds
from core.ingest.writer import EvidenceWriter, RoundInput
from core.models import (
    FollowupHit,
    PayloadLimits,
    QuestionnairePayload,
    RerankerStatus,
    RetrievalTrace,
)
from core.reports import DocumentIngestReport, Progress, QuestionnaireIngestReport, VendorStatus
from core.retrieval.catalog import Catalog
from core.retrieval.check import CheckReport, check_vendor
from core.retrieval.run import StrategyRunner
from core.retrieval.strategies import DEFAULT_STRATEGY
from core.review.conversation.ask import AskPipeline
from core.review.conversation.models import AskTurn, ConversationSummary
from core.review.conversation.store import Conversations
from core.review.decisions import DecisionView, Reviewing
from core.review.documents import SeriesCorrections
from core.review.verdicts import Assessor
from core.services import Services
from core.store import EvidenceStore
from core.trace.build import retrieve


class Workbench:
    """One store, one embedder, one reranker; thread-safe for concurrent retrievals."""

    def __init__(self, settings: Settings | None = None, *, embedder: Embedder | None = None,
                 reranker: Reranker | None = None, reranker_status: RerankerStatus | None = None
                 ) -> None:
        self.settings = settings or Settings()
        self.store = EvidenceStore(self.settings)
        self.store.writer_runtime = lambda: self.embedder.runtime
        self._embedder, self._reranker, self._reranker_status = embedder, reranker, reranker_status
        if reranker is not None and reranker_status is None:
            self._reranker_status = RerankerStatus(
                name=reranker.name, ran=True, reason="reranker supplied by the caller")
        self._lock = threading.Lock()
        self._queries = QueryEmbeddings(lambda: self.embedder)
        self.writer = EvidenceWriter(self.settings, self.store, lambda: self.embedder)
        self.catalog = Catalog(self.settings, self.store)
        self.runner = StrategyRunner(self.settings, self.store)
        self.controls = criteria_controls(self.settings, self.store, lambda: self.embedder,
                                          self.runner)
        self.services = Services(settings=self.settings, store=self.store, runner=self.runner,
                                 embedder=lambda: self.embedder, embed_query=self.embed_query,
                                 reranker=self.reranker)
        self.verdicts = Assessor(self.settings, self.store, self.retrieve)
        self.reviews = Reviewing(self.store, self.retrieve, self.verdicts.status,
                                 reviewer=self.settings.reviewer,
                                 versions_of=self.catalog.versions_by_key)
        self.series_corrections = SeriesCorrections(self.store, self.catalog,
                                                    reviewer=self.settings.reviewer)

    @property
    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                # The module's own name for the torch embedder, which tests replace.
                self._embedder = configured_embedder(
                    self.settings, torch_embedder=SentenceTransformerEmbedder)
            return self._embedder

    def reranker(self) -> tuple[Reranker | None, RerankerStatus]:
        """The reranker and what it is; loaded (or found missing) once."""
        with self._lock:
            if self._reranker_status is None:
                self._reranker, self._reranker_status = load_reranker(self.settings)
            return self._reranker, self._reranker_status

    def with_settings(self, settings: Settings) -> Workbench:
        """A workbench over the same store folder and models, with other settings."""
        reranker, status = self.reranker()
        return Workbench(settings, embedder=self.embedder, reranker=reranker,
                         reranker_status=status)

    def embed_query(self, text: str, also: Sequence[str] = ()) -> np.ndarray:
        """The query embedding, cached (`also`: texts to embed in the same model call)."""
        return self._queries.get(text, also)

    def forget_query_embeddings(self) -> None:
        """Empty the query-embedding cache (the benchmark times every query from cold)."""
        self._queries.clear()

    def ingest_documents(self, vendor_id: str, paths: Iterable[Path | str], *,
                         doc_type: str = "tc_files", round_number: int | None = None,
                         progress: Progress | None = None) -> DocumentIngestReport:
        """Validate every file first, then write each document completely or not at all."""
        return self.writer.documents(vendor_id, paths, doc_type=doc_type,
                                     round_number=round_number, progress=progress)

    def ingest_questionnaire(self, payload: RoundInput | Sequence[QuestionnairePayload], *,
                             replace: bool = False, progress: Progress | None = None
                             ) -> QuestionnaireIngestReport:
        """Store a whole round, every response or none."""
        return self.writer.round(payload, replace=replace, progress=progress)

    def ingest_questionnaires(self, payloads: Sequence[QuestionnairePayload], *,
                              replace: bool = False, progress: Progress | None = None
                              ) -> Iterator[QuestionnaireIngestReport]:
        """Several rounds, each vendor checked before the first is written."""
        return self.writer.rounds(payloads, replace=replace, progress=progress)

    def load_questionnaires(self, files: Iterable[Path | str]) -> list[QuestionnairePayload]:
        """Validate every JSON round before any is written."""
        return load_json_rounds(files, PayloadLimits.from_settings(self.settings))

    def load_rounds(self, files: Iterable[Path | str], *, vendor_id: str | None = None,
                    round_number: int | None = None, timestamp: str | None = None,
                    columns: str | None = None, sheets: Sequence[str] = ()
                    ) -> list[LoadedRound]:
        """Validate every round file, JSON or spreadsheet, before any is written."""
        return load_rounds(files, PayloadLimits.from_settings(self.settings),
                           vendor_id=vendor_id, round_number=round_number, timestamp=timestamp,
                           columns=columns, sheets=sheets)

    def vendor_ids(self) -> list[str]:
        return self.store.vendor_ids()

    def store_state(self, vendor_id: str | None = None) -> str | None:
        """What readers see of the vendor (every vendor), as one value; see the runner's."""
        return self.runner.store_state(vendor_id, self.embedder.name)

    def status(self, vendor_id: str | None = None) -> list[VendorStatus]:
        """What the store holds, per vendor; only completed documents are counted."""
        return self.catalog.status(vendor_id)

    def documents(self, vendor_id: str) -> list[dict[str, Any]]:
        """The vendor's committed documents (the manifest), sorted by source."""
        return self.catalog.documents(vendor_id)

    def browse_chunks(self, vendor_id: str, **filters: Any) -> list[dict[str, Any]]:
        """Stored chunks and follow-ups of one vendor, committed ones (`Catalog`'s filters)."""
        return self.catalog.browse_chunks(vendor_id, **filters)

    def check(self, vendor_id: str, *, repair: bool = True) -> CheckReport:
        """The lexical index and what interrupted writes left, mended with `repair`."""
        return check_vendor(self.store, self.settings, self.runner, vendor_id, repair=repair)

    def linked_followups(self, vendor_id: str, criterion: str) -> list[FollowupHit]:
        """Every follow-up linked to the criterion by hash, whatever any strategy kept."""
        return self.catalog.linked_followups(vendor_id, check_criterion(criterion))

    def retrieve(self, vendor_id: str, criterion: str, strategy: str = DEFAULT_STRATEGY,
                 questionnaire_ids: Sequence[str] = (), controls: Sequence[str] = ()
                 ) -> RetrievalTrace:
        """Run one strategy for one criterion of one vendor; every stage lands in the trace."""
        return retrieve(self.services, vendor_id, criterion, strategy, questionnaire_ids, controls)

    def ask(self, vendor_id: str, question: str, conversation_id: str | None = None, *,
            anchored: bool = True, save: bool = True) -> AskTurn:
        """Answer one question of a conversation (new without an id), stored with its sources."""
        return AskPipeline(self.services).ask(vendor_id, question, conversation_id,
                                              anchored=anchored, save=save)

    def rerun(self, vendor_id: str, turn: AskTurn, *, anchored: bool) -> AskTurn:
        """A stored turn searched again with its own query, anchored or not; nothing stored."""
        return AskPipeline(self.services).rerun(vendor_id, turn, anchored=anchored)

    def conversations(self, vendor_id: str) -> list[ConversationSummary]:
        """The vendor's conversations, oldest first."""
        return Conversations.of(self.store, vendor_id).summaries()

    def conversation(self, vendor_id: str, conversation_id: str) -> list[AskTurn]:
        """Every turn of one of the vendor's conversations; another vendor's id is refused."""
        conversations = Conversations.of(self.store, vendor_id)
        return conversations.turns(conversations.check_id(conversation_id))

    def decide(self, vendor_id: str, criterion: str, status: str, *,
               strategy: str = DEFAULT_STRATEGY, note: str | None = None,
               until: str | None = None, reviewer: str | None = None) -> DecisionView:
        """Record the reviewer's decision on the criterion's context as it is now."""
        return self.reviews.decide(vendor_id, check_criterion(criterion), status,
                                   strategy=strategy, note=note, until=until, reviewer=reviewer)

    def decisions(self, vendor_id: str) -> list[DecisionView]:
        """Every decided criterion of the vendor: its current decision, state and history."""
        return self.reviews.decisions(vendor_id)
