"""The library's front door: ingest documents and rounds, report status, retrieve with a trace.

Each public call checks its input and hands the work to the module that owns it: writes to
`core.ingest.writer`, reads for people to `core.retrieval.catalog`, retrieval to `core.retrieval`,
verdicts to `core.answers.verdicts`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from core.answers.conversation.ask import AskPipeline
from core.answers.conversation.models import AskTurn, ConversationSummary
from core.answers.conversation.store import Conversations
from core.answers.verdicts import Assessor, Verdict, VerdictStatus
from core.config import Settings
from core.criteria import check_criterion
from core.encoders.embedding import (
    Embedder,
    QueryEmbeddings,
    SentenceTransformerEmbedder,
)
from core.encoders.factory import configured_embedder
from core.encoders.rerank import Reranker, load_reranker
from core.errors import UserInputError
from core.hashing import criterion_hash
from core.ingest import LoadedRound, shown_path
from core.ingest.questionnaire import check_batch_vendor_ids, load_payload_file
from core.ingest.writer import EvidenceWriter, RoundInput, check_one_round
from core.models import (
    FollowupHit,
    PayloadLimits,
    QuestionnairePayload,
    RerankerStatus,
    RetrievalTrace,
)
from core.reports import DocumentIngestReport, Progress, QuestionnaireIngestReport, VendorStatus
from core.retrieval.catalog import Catalog
from core.retrieval.run import StrategyRunner
from core.retrieval.source import Query
from core.retrieval.stages import Timings
from core.retrieval.strategies import DEFAULT_STRATEGY, get_strategy
from core.services import Services
from core.store import EvidenceStore
from core.trace.build import build_trace

if TYPE_CHECKING:
    from core.retrieval.check import CheckReport


class Workbench:
    """One store, one embedder, one reranker; thread-safe for concurrent retrievals."""

    def __init__(self, settings: Settings | None = None, *, embedder: Embedder | None = None,
                 reranker: Reranker | None = None,
                 reranker_status: RerankerStatus | None = None) -> None:
        self.settings = settings or Settings()
        self.store = EvidenceStore(self.settings)
        self.store.writer_runtime = lambda: self.embedder.runtime
        self._embedder = embedder
        self._reranker = reranker
        self._reranker_status = reranker_status
        if reranker is not None and reranker_status is None:
            self._reranker_status = RerankerStatus(
                name=reranker.name, ran=True, reason="reranker supplied by the caller")
        self._lock = threading.Lock()
        self._queries = QueryEmbeddings(lambda: self.embedder)
        self.writer = EvidenceWriter(self.settings, self.store, lambda: self.embedder)
        self.catalog = Catalog(self.settings, self.store)
        self.runner = StrategyRunner(self.settings, self.store)

    # Models ------------------------------------------------------------------------------

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

    def embed_query(self, text: str) -> np.ndarray:
        """The query embedding, cached: the same criterion is embedded once per process."""
        return self._queries.get(text)

    def forget_query_embeddings(self) -> None:
        """Empty the query-embedding cache (the benchmark times every query from cold)."""
        self._queries.clear()

    def count_tokens(self, text: str) -> int:
        return self.embedder.count_tokens(text)

    # Ingest ------------------------------------------------------------------------------

    def ingest_documents(self, vendor_id: str, paths: Iterable[Path | str], *,
                         doc_type: str = "tc_files", round_number: int | None = None,
                         progress: Progress | None = None) -> DocumentIngestReport:
        """Validate every file first, then write each document completely or not at all."""
        return self.writer.documents(vendor_id, paths, doc_type=doc_type,
                                     round_number=round_number, progress=progress)

    def ingest_questionnaire(self, payload: RoundInput | Sequence[QuestionnairePayload], *,
                             replace: bool = False, progress: Progress | None = None
                             ) -> QuestionnaireIngestReport:
        """Store a whole round in one write: every response, or none. Several payloads of one
        vendor and round are stored together, as one. With `replace`, the round becomes
        exactly the given responses: answers absent from them are removed in the same atomic
        step, and the report's `removed_count` says how many (see `EvidenceWriter.round`)."""
        return self.writer.round(payload, replace=replace, progress=progress)

    def ingest_questionnaires(self, payloads: Sequence[QuestionnairePayload], *,
                              replace: bool = False, progress: Progress | None = None
                              ) -> Iterator[QuestionnaireIngestReport]:
        """Several rounds: every vendor id is checked before the first is written (a refusal
        never leaves half a batch), then one report per round as it is stored.

        With `replace`, the payloads must all name one vendor and round (a replacement is one
        atomic step, so one round at a time): they become that round, and one report says so."""
        if replace:
            check_one_round(payloads, what="files given to replace",
                            why="a replacement makes one round at a time (in one atomic "
                                "step); replace each round on its own")
        check_batch_vendor_ids((p.vendor_id for p in payloads), self.store, self.embedder.name)
        if replace:
            if payloads:
                yield self.ingest_questionnaire(list(payloads), replace=True, progress=progress)
            return
        for payload in payloads:
            yield self.ingest_questionnaire(payload, progress=progress)

    def load_questionnaires(self, files: Iterable[Path | str]) -> list[QuestionnairePayload]:
        """Validate every JSON round before any is written."""
        limits = PayloadLimits.from_settings(self.settings)
        return [load_payload_file(Path(f), limits=limits) for f in files]

    def load_rounds(self, files: Iterable[Path | str], *, vendor_id: str | None = None,
                    round_number: int | None = None, timestamp: str | None = None
                    ) -> list[LoadedRound]:
        """Validate every round file before any is written: JSON payloads as they are, .csv
        and .xlsx spreadsheets under the vendor, round and time given for them."""
        from core.ingest.spreadsheets import is_spreadsheet, load_spreadsheet_round

        files = [Path(f) for f in files]
        sheets = [f for f in files if is_spreadsheet(f)]
        given = [option for option, value in (("--vendor", vendor_id), ("--round", round_number),
                                              ("--timestamp", timestamp)) if value is not None]
        if not sheets and given:
            raise UserInputError(
                f"{' and '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to "
                ".csv and .xlsx rounds; a JSON round names its own vendor, round and time.")
        if sheets and (vendor_id is None or round_number is None):
            raise UserInputError(
                f"{shown_path(sheets[0])} is a spreadsheet round; give --vendor and --round "
                "for it (and --timestamp for when it was answered, default now).")
        limits = PayloadLimits.from_settings(self.settings)
        rounds = []
        for file in files:
            if is_spreadsheet(file):
                read = load_spreadsheet_round(file, vendor_id=vendor_id,
                                              round_number=round_number, timestamp=timestamp,
                                              limits=limits)
                rounds.append(LoadedRound(read.payload, shown_path(file), list(read.notes)))
            else:
                rounds.append(LoadedRound(load_payload_file(file, limits=limits),
                                          shown_path(file)))
        return rounds

    # What the store holds ----------------------------------------------------------------

    def vendor_ids(self) -> list[str]:
        return self.store.vendor_ids()

    def store_state(self, vendor_id: str | None = None) -> str | None:
        """A value that changes whenever what readers see of the vendor (of every vendor,
        without one) changes, for caching views of it; None while a round is between its
        link write and its responses' write (or for a store without generations), when a
        view read now may change without a new generation, so nothing should be cached."""
        known = self.vendor_ids()
        vendors = [vendor_id] if vendor_id is not None else known
        parts = []
        for name in vendors:
            if name not in known:
                parts.append(f"{name}:absent")
                continue
            vendor = self.store.open_vendor(name, embedding_model=self.embedder.name)
            state = self.runner.settled_state(vendor)
            if state is None:
                return None
            parts.append(f"{name}:{state}")
        return "|".join(parts)

    def status(self, vendor_id: str | None = None) -> list[VendorStatus]:
        """What the store holds, per vendor; only completed documents are counted."""
        return self.catalog.status(vendor_id)

    def documents(self, vendor_id: str) -> list[dict[str, Any]]:
        """The vendor's committed documents (the manifest), sorted by source."""
        return self.catalog.documents(vendor_id)

    def browse_chunks(self, vendor_id: str, *, contains: str | None = None,
                      doc_type: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """Stored chunks and follow-ups of one vendor, committed ones only."""
        return self.catalog.browse_chunks(vendor_id, contains=contains, doc_type=doc_type,
                                          limit=limit)

    def check(self, vendor_id: str, *, repair: bool = True) -> CheckReport:
        """Compare the vendor's lexical index with its store and look for what interrupted
        writes left; with `repair`, under the store's write lock, mend the index (sync, or
        rebuild) and delete the leftovers that are safe to delete (see `core.retrieval.check`)."""
        from core.retrieval.check import check_vendor

        return check_vendor(self.store, self.settings, self.runner, vendor_id, repair=repair)

    def linked_followups(self, vendor_id: str, criterion: str) -> list[FollowupHit]:
        """Every follow-up linked to the criterion by hash, whatever any strategy kept."""
        return self.catalog.linked_followups(vendor_id, check_criterion(criterion))

    # Ask --------------------------------------------------------------------------------

    def ask(self, vendor_id: str, question: str, conversation_id: str | None = None, *,
            anchored: bool = True, save: bool = True) -> AskTurn:
        """Answer one question of a conversation (new without an id), stored with its sources."""
        return AskPipeline(self.services()).ask(vendor_id, question, conversation_id,
                                                anchored=anchored, save=save)

    def rerun(self, vendor_id: str, turn: AskTurn, *, anchored: bool) -> AskTurn:
        """A stored turn searched again with its own query, anchored or not; nothing stored."""
        return AskPipeline(self.services()).rerun(vendor_id, turn, anchored=anchored)

    def conversations(self, vendor_id: str) -> list[ConversationSummary]:
        """The vendor's conversations, oldest first."""
        vendor = self.store.open_vendor(vendor_id)
        return Conversations(self.store, vendor.vendor_id).summaries()

    def conversation(self, vendor_id: str, conversation_id: str) -> list[AskTurn]:
        """Every turn of one of the vendor's conversations; another vendor's id is refused."""
        vendor = self.store.open_vendor(vendor_id)
        conversations = Conversations(self.store, vendor.vendor_id)
        return conversations.turns(conversations.check_id(conversation_id))

    # Retrieve ----------------------------------------------------------------------------

    def retrieve(self, vendor_id: str, criterion: str,
                 strategy: str = DEFAULT_STRATEGY) -> RetrievalTrace:
        """Run one strategy for one criterion of one vendor; every stage lands in the trace."""
        chosen = get_strategy(strategy)
        criterion = check_criterion(criterion)
        started = time.perf_counter()
        timings = Timings()
        vendor = self.store.open_vendor(vendor_id, embedding_model=self.embedder.name)
        reranker, reranker_status = self.reranker()
        with timings.stage("load_model"):  # ~0 once loaded; kept apart from query time
            self.embedder.warm_up()
        with timings.stage("embed_query"):
            query = Query(text=criterion, criterion_hash=criterion_hash(criterion),
                          embedding=self.embed_query(criterion))
        result, notes = self.runner.run(chosen, vendor, query, reranker, reranker_status,
                                        timings)
        return build_trace(vendor_id=vendor_id, query=query, strategy=chosen, result=result,
                           notes=notes, reranker_status=reranker_status,
                           embedding_model=self.embedder.name, settings=self.settings,
                           timings=timings, started=started)

    # Verdicts ----------------------------------------------------------------------------

    def assess(self, vendor_id: str, criterion: str, strategy: str = DEFAULT_STRATEGY, *,
               refresh: bool = False, criterion_id: str | None = None) -> Verdict:
        """The configured language model's verdict on the criterion's prompt; a prompt it
        already answered is read back, not sent again (unless `refresh`)."""
        return self._assessor().assess(vendor_id, criterion, strategy, refresh=refresh,
                                     criterion_id=criterion_id)

    def verdict_status(self, vendor_id: str, criterion: str,
                       strategy: str = DEFAULT_STRATEGY) -> VerdictStatus:
        """The stored verdict to show for the criterion, and whether the store changed since;
        needs no language model."""
        return self._assessor().latest(vendor_id, criterion, strategy)

    def services(self) -> Services:
        """What the pipelines over this store are given: its settings, store, runner, models."""
        return Services(settings=self.settings, store=self.store, runner=self.runner,
                        embedder=lambda: self.embedder, embed_query=self.embed_query,
                        reranker=self.reranker)

    def _assessor(self) -> Assessor:
        return Assessor(self.settings, self.store, self.retrieve)
