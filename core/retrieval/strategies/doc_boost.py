"""Seed 002: rerank, then a conservative boost for follow-up documents, then top N."""

from __future__ import annotations

from core.retrieval.stages import (
    RetrievalEnv,
    Timings,
    boost_followup_documents,
    boost_outcome,
    first_stage,
    rerank,
    select_top,
)
from core.retrieval.strategies.base import Query, Strategy, StrategyResult


def run(env: RetrievalEnv, query: Query, timings: Timings) -> StrategyResult:
    s = env.settings
    with timings.stage("first_stage"):
        hits = first_stage(env, query, s.semantic_first_stage_n)
    with timings.stage("rerank"):
        ranked = rerank(env, query.text, hits)
    with timings.stage("boost"):
        boosted = boost_followup_documents(ranked, s.followup_document_boost, s.followup_boost_cap)
        boost = boost_outcome(boosted, s.followup_document_boost, s.followup_boost_cap)
    with timings.stage("select"):
        evidence = select_top(env, boosted, s.top_reranked_n)
    return StrategyResult(evidence=evidence, followups=[], first_stage=hits, reranked=boosted,
                          boost=boost)


STRATEGY = Strategy(
    name="doc_boost",
    seed="002",
    summary="search 70, rerank, x1.15 on followup_document chunks (capped), top 6",
    run=run,
)
