"""What features are given to work with, instead of reaching back into the front door.

`Services` is the small bundle a pipeline over the store needs (settings, the store, the
strategy runner, the models). The protocols name the few front-door calls that outputs and
uploads make; `core.workbench.Workbench` provides all of them and composes everything, and
nothing below the command line, the dashboard and the benchmark imports it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from core.config import Settings
from core.encoders.embedding import Embedder
from core.encoders.rerank import Reranker
from core.models import (
    FollowupHit,
    QuestionnairePayload,
    RerankerStatus,
    RetrievalTrace,
)
from core.reports import DocumentIngestReport, Progress, QuestionnaireIngestReport, VendorStatus
from core.retrieval.run import StrategyRunner
from core.store import EvidenceStore


@dataclass(frozen=True)
class Services:
    """One store with its runner and models, as a pipeline uses them. The models are given as
    calls, so that one loads only when first used."""

    settings: Settings
    store: EvidenceStore
    runner: StrategyRunner
    embedder: Callable[[], Embedder]
    # A query's vector, cached; texts given after it are embedded in the same model call.
    embed_query: Callable[..., np.ndarray]
    reranker: Callable[[], tuple[Reranker | None, RerankerStatus]]


class EvidenceReader(Protocol):
    """What an output (the evidence pack, a drafted round) reads of the store."""

    settings: Settings
    store: EvidenceStore

    def retrieve(self, vendor_id: str, criterion: str, strategy: str = ...,
                 questionnaire_ids: Sequence[str] = ..., controls: Sequence[str] = ...
                 ) -> RetrievalTrace: ...

    def linked_followups(self, vendor_id: str, criterion: str) -> list[FollowupHit]: ...

    def status(self, vendor_id: str | None = None) -> list[VendorStatus]: ...


class EvidenceIngest(Protocol):
    """What an upload writes through."""

    settings: Settings
    store: EvidenceStore

    @property
    def embedder(self) -> Embedder: ...

    def ingest_documents(self, vendor_id: str, paths: Iterable[Path | str], *,
                         doc_type: str = ..., round_number: int | None = ...,
                         progress: Progress | None = ...) -> DocumentIngestReport: ...

    def ingest_questionnaires(self, payloads: Sequence[QuestionnairePayload], *,
                              replace: bool = ..., progress: Progress | None = ...
                              ) -> Iterator[QuestionnaireIngestReport]: ...
