"""What a strategy is: a named list of stages that turns a criterion into context parts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from core.models import Candidate, DroppedFollowup, FollowupHit
from core.stages import RetrievalEnv, Timings


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


@dataclass(frozen=True)
class Query:
    """The criterion as every stage sees it."""

    text: str
    criterion_hash: str
    embedding: np.ndarray


StrategyRun = Callable[[RetrievalEnv, Query, Timings], StrategyResult]


@dataclass(frozen=True)
class Strategy:
    name: str
    seed: str
    summary: str
    run: StrategyRun
