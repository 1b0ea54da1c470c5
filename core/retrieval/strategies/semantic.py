"""The status quo: one semantic search, rerank, top N. No precedence at all."""

from __future__ import annotations

from core.retrieval.stages import RetrievalEnv, Timings, first_stage, rerank, select_top
from core.retrieval.strategies.base import Query, Strategy, StrategyResult


def run(env: RetrievalEnv, query: Query, timings: Timings) -> StrategyResult:
    s = env.settings
    with timings.stage("first_stage"):
        hits = first_stage(env, query, s.semantic_first_stage_n)
    with timings.stage("rerank"):
        ranked = rerank(env, query.text, hits)
    with timings.stage("select"):
        evidence = select_top(env, ranked, s.top_reranked_n)
    return StrategyResult(evidence=evidence, followups=[], first_stage=hits, reranked=ranked)


STRATEGY = Strategy(
    name="semantic",
    seed="status quo",
    summary="first-stage search (70) + rerank + top 6; follow-ups compete like any chunk",
    run=run,
)
