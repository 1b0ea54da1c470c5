"""What a strategy is: a named list of stages that turns a criterion into context parts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from core.controls.mappings import ControlLink
from core.models import BoostOutcome, Candidate, CurrentAnswer, DroppedFollowup, FollowupHit
from core.retrieval.source import Query
from core.retrieval.stages import RetrievalEnv, Timings


@dataclass
class StrategyResult:
    """The parts of a trace a strategy decides; the workbench adds the rest."""

    evidence: list[Candidate]
    followups: list[FollowupHit]  # in context order
    first_stage: list[Candidate]
    reranked: list[Candidate]
    hash_path: list[FollowupHit] | None = None
    semantic_path: list[FollowupHit] | None = None
    dropped_followups: list[DroppedFollowup] = field(default_factory=list)
    boost: BoostOutcome | None = None  # None: this strategy applies no boost
    # The criterion's newest answer, whatever the strategy kept (the runner adds it).
    current_answer: CurrentAnswer | None = None
    # The controls the criterion was mapped to, where the vendor's answers are keyed by
    # controls (the runner adds them).
    controls: tuple[ControlLink, ...] = ()


StrategyRun = Callable[[RetrievalEnv, Query, Timings], StrategyResult]


# Where a strategy's first stage looks: the vector search alone ("vector", each hit's record
# read from ChromaDB, as the seeds designed it; "vector_indexed", the same hits with their
# records read from the lexical index of the same committed state), or the vector search and
# the lexical (BM25) index fused by reciprocal rank fusion ("hybrid").
SearchKind = Literal["vector", "vector_indexed", "hybrid"]


@dataclass(frozen=True)
class Strategy:
    name: str
    seed: str
    summary: str
    run: StrategyRun
    search: SearchKind = "vector"
    # The project's own layout: the context and prompt lead with the criterion's current
    # answer and label every earlier answer. The seeds' layouts are their artifacts, as
    # written.
    leads_with_current_answer: bool = False
    # Whether the follow-ups take precedence over the excerpts (read first), as the seeds
    # that extract or tier them by hash intend, whatever the context's order.
    followups_first: bool = False
