"""Strategies side by side over a vendor's criteria list: which linked answers each one puts
in the context, and what each stage costs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from core.config import Settings
from core.models import FollowupHit, RerankerStatus, RetrievalTrace, by_round
from core.reports import Progress
from core.retrieval.strategies import STRATEGIES

IN_CONTEXT_FATES = ("in_context", "excerpt")


def ids_in_context(trace: RetrievalTrace) -> set[str]:
    """Every record the LLM context cites: the excerpts and the follow-up entry, and the
    current answer where the strategy's context leads with it."""
    ids = {c.id for c in trace.evidence} | {f.id for f in trace.followups}
    strategy = STRATEGIES.get(trace.strategy)
    if trace.current_answer is not None and strategy and strategy.leads_with_current_answer:
        ids.add(trace.current_answer.id)
    return ids


def earlier_unmarked(trace: RetrievalTrace) -> int:
    """How many earlier answers the context shows without their criterion's newest answer
    beside them and labelled so: every earlier answer in a context that labels none (the
    seeds'), else those whose newest answer the context does not hold."""
    strategy = STRATEGIES.get(trace.strategy)
    shown = ids_in_context(trace)
    earlier = [a.later_answer for a in [*trace.followups, *trace.evidence]
               if a.later_answer is not None]
    if not (strategy and strategy.leads_with_current_answer):
        return len(earlier)
    return sum(later.id not in shown for later in earlier)


def expected_followups(linked: Iterable[FollowupHit], max_rounds: int) -> list[FollowupHit]:
    """The hash-linked responses that belong in the context: the latest `max_rounds` rounds
    (the cap every seed design applies), in ascending round order."""
    return by_round(linked)[-max_rounds:]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks; 0 for no values."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class StrategyRun:
    """One strategy on one criterion."""

    criterion: str
    strategy: str
    linked: int  # responses linked to the criterion by hash, in all rounds
    expected_rounds: tuple[int, ...]  # rounds of the latest linked responses
    reached_rounds: tuple[int, ...]  # those of them the context cites
    timings_ms: dict[str, float]

    @property
    def expected(self) -> int:
        return len(self.expected_rounds)

    @property
    def reached(self) -> int:
        return len(self.reached_rounds)

    @property
    def missing_rounds(self) -> tuple[int, ...]:
        """Expected rounds the context does not cite, counted: a round that answered the
        criterion twice, of which one answer reached the context, is missing once."""
        return tuple(sorted((Counter(self.expected_rounds)
                             - Counter(self.reached_rounds)).elements()))


@dataclass
class StrategySummary:
    strategy: str
    expected: int
    reached: int
    criteria_complete: int  # criteria with linked responses, every expected one in context
    criteria_linked: int  # criteria that have any linked response
    criteria: int
    total_ms_p50: float
    total_ms_p95: float
    stage_ms_p50: dict[str, float] = field(default_factory=dict)

    @property
    def linked_in_context(self) -> float:
        return self.reached / self.expected if self.expected else 1.0


@dataclass
class StrategyComparison:
    vendor_id: str
    runs: list[StrategyRun]
    embedding_model: str = ""
    reranker: RerankerStatus | None = None

    @property
    def strategies(self) -> list[str]:
        return list(dict.fromkeys(r.strategy for r in self.runs))

    @property
    def criteria(self) -> list[str]:
        return list(dict.fromkeys(r.criterion for r in self.runs))

    def summary(self) -> list[StrategySummary]:
        found = []
        for name in self.strategies:
            runs = [r for r in self.runs if r.strategy == name]
            stages = list(dict.fromkeys(k for r in runs for k in r.timings_ms if k != "total"))
            found.append(StrategySummary(
                strategy=name,
                expected=sum(r.expected for r in runs),
                reached=sum(r.reached for r in runs),
                criteria_complete=sum(r.expected and r.reached == r.expected for r in runs),
                criteria_linked=sum(bool(r.expected) for r in runs),
                criteria=len(runs),
                total_ms_p50=percentile([r.timings_ms.get("total", 0.0) for r in runs], 50),
                total_ms_p95=percentile([r.timings_ms.get("total", 0.0) for r in runs], 95),
                stage_ms_p50={s: percentile([r.timings_ms.get(s, 0.0) for r in runs], 50)
                              for s in stages},
            ))
        return found


class StrategyReader(Protocol):
    """What a side-by-side run of the strategies reads."""

    settings: Settings

    def retrieve(self, vendor_id: str, criterion: str, strategy: str = ...
                 ) -> RetrievalTrace: ...

    def linked_followups(self, vendor_id: str, criterion: str) -> list[FollowupHit]: ...

    def forget_query_embeddings(self) -> None: ...


def compare_strategies(workbench: StrategyReader, vendor_id: str, criteria: Sequence[str],
                       strategies: Sequence[str] | None = None,
                       progress: Progress | None = None) -> StrategyComparison:
    """Run every strategy on every criterion; each retrieve embeds its query itself, so the
    stage times compare like with like."""
    names = list(strategies or STRATEGIES)
    cap = workbench.settings.max_followup_rounds
    runs = []
    trace = None
    total = len(criteria) * len(names)
    for i, criterion in enumerate(criteria):
        linked = workbench.linked_followups(vendor_id, criterion)
        expected = expected_followups(linked, cap)
        for j, name in enumerate(names):
            workbench.forget_query_embeddings()
            trace = workbench.retrieve(vendor_id, criterion, name)
            runs.append(StrategyRun(
                criterion=trace.criterion, strategy=name, linked=len(linked),
                expected_rounds=tuple(h.round_number for h in expected),
                reached_rounds=tuple(h.round_number for h in expected
                                     if trace.fate(h.id) in IN_CONTEXT_FATES),
                timings_ms=dict(trace.timings_ms),
            ))
            if progress:
                progress("comparing", i * len(names) + j + 1, total)
    return StrategyComparison(
        vendor_id=vendor_id, runs=runs,
        embedding_model=trace.embedding_model if trace else "",
        reranker=trace.reranker if trace else None)
