"""Seed 003: a hash-filtered path and a semantic path, follow-ups in high/medium/low tiers."""

from __future__ import annotations

from core.retrieval.stages import (
    RetrievalEnv,
    Timings,
    first_stage,
    rerank,
    select_top,
    split_followups,
)
from core.retrieval.strategies.base import Query, Strategy, StrategyResult
from core.retrieval.tiers import (
    assign_tiers,
    context_order,
    followup_hit,
    merge_tiers,
    nearest_hash_linked,
)


def run(env: RetrievalEnv, query: Query, timings: Timings) -> StrategyResult:
    s = env.settings
    with timings.stage("hash_path"):
        # Seed 003 path 1, a vector search filtered to the follow-ups linked to the
        # criterion, limited to MAX_FOLLOWUP_ROUNDS and ranked by similarity within the
        # matches. They are linked by the canonical hash, so a criterion pasted with other
        # typography links, and by the questionnaire ids the criterion is mapped to.
        linked = nearest_hash_linked(env, query, s.max_followup_rounds)
        hash_hits = [followup_hit(c, query, ["hash"]) for c in linked]
    with timings.stage("first_stage"):
        hits = first_stage(env, query, s.semantic_path_top_k)
    with timings.stage("tiers"):
        semantic_followups, documents = split_followups(hits)
        semantic_hits = [followup_hit(c, query, ["semantic"]) for c in semantic_followups]
        tiered = assign_tiers(hash_hits, semantic_hits, query.text, s)
        kept, dropped = merge_tiers(tiered, s.max_followup_rounds)
    with timings.stage("rerank"):
        ranked = rerank(env, query.text, documents)
    with timings.stage("select"):
        evidence = select_top(env, ranked, s.top_reranked_n)
    return StrategyResult(
        evidence=evidence, followups=context_order(kept), first_stage=hits, reranked=ranked,
        hash_path=[h for h in tiered if "hash" in h.found_by],
        semantic_path=[h for h in tiered if "semantic" in h.found_by],
        dropped_followups=dropped,
    )


STRATEGY = Strategy(
    name="tiered",
    seed="003",
    summary="hash-filtered vector search (3) + semantic search (10), tiers high/medium/low "
            "(difflib >= 0.7), max 3; documents of the semantic path reranked, top 6",
    run=run,
    followups_first=True,
)
