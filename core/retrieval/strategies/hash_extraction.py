"""Seed 000: search 100, pull out follow-ups carrying the criterion hash, rerank the rest,
append the follow-ups last."""

from __future__ import annotations

from core.retrieval.stages import (
    RetrievalEnv,
    Timings,
    first_stage,
    rerank,
    select_top,
    top_by_first_stage,
)
from core.retrieval.strategies.base import Query, Strategy, StrategyResult
from core.retrieval.tiers import (
    assign_tiers,
    context_order,
    extract_by_hash,
    followup_hit,
    keep_latest_rounds,
)


def run(env: RetrievalEnv, query: Query, timings: Timings) -> StrategyResult:
    s = env.settings
    with timings.stage("first_stage"):
        hits = first_stage(env, query, s.top_first_stage_n)
    with timings.stage("extract"):
        matched, remaining = extract_by_hash(hits, query.criterion_hash, query.canonical_hash,
                                            query.questionnaire_ids)
        extracted = [followup_hit(c, query, ["first_stage", "hash"]) for c in matched]
        # Tiers are informational here: seed 000 logs question similarity, keeps by round.
        extracted = assign_tiers(extracted, [], query.text, s)
        kept, dropped = keep_latest_rounds(extracted, s.max_followup_rounds)
        to_rerank = top_by_first_stage(remaining, s.top_to_rerank_n)
    with timings.stage("rerank"):
        ranked = rerank(env, query.text, to_rerank)
    with timings.stage("select"):
        evidence = select_top(env, ranked, s.top_reranked_n)
    return StrategyResult(
        evidence=evidence, followups=context_order(kept), first_stage=hits, reranked=ranked,
        hash_path=extracted, dropped_followups=dropped,
    )


STRATEGY = Strategy(
    name="hash_extraction",
    seed="000",
    summary="search 100, extract hash-linked follow-ups (latest 3), rerank top 70 of the rest, "
            "top 6, follow-ups last",
    run=run,
    followups_first=True,
)
