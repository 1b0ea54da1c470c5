"""The default: every hash-linked follow-up fetched by metadata, tiered (with the answers keyed
by a control the criterion is mapped to, in a tier of their own), documents boosted,
follow-ups last in the context, which leads with the criterion's current answer; an earlier
answer among the excerpts has the newest answer to its criterion just ahead of it, and an
excerpt of a superseded document the current version's best excerpt."""

from __future__ import annotations

from core.retrieval.stages import (
    RetrievalEnv,
    Timings,
    boost_followup_documents,
    boost_outcome,
    first_stage,
    rerank,
    select_top,
    top_by_first_stage,
)
from core.retrieval.strategies.base import Query, Strategy, StrategyResult
from core.retrieval.tiers import (
    Supersession,
    assign_tiers,
    competing_followup,
    context_order,
    control_tier,
    fetch_control_linked,
    fetch_vouched_followups,
    followup_hit,
    keep_latest_rounds,
    merge_tiers,
    one_place_per_question,
    with_other_sheets,
)
from core.retrieval.versions import DocumentVersions


def run(env: RetrievalEnv, query: Query, timings: Timings) -> StrategyResult:
    s = env.settings
    with timings.stage("hash_fetch"):  # the hash's follow-ups and a typo's, in one read
        linked, near = fetch_vouched_followups(env, query)
    with timings.stage("control_fetch"):  # answers keyed by a control the criterion maps to
        by_control, control_reasons = fetch_control_linked(env, query, linked)
    with timings.stage("first_stage"):
        hits = first_stage(env, query, s.top_first_stage_n)
    with timings.stage("tiers"):
        by_id = {c.id: c for c in hits}
        semantic_ids = {c.id for c in hits[: s.semantic_path_top_k] if c.is_followup}

        def hit_for(candidate, paths):
            seen = by_id.get(candidate.id)
            found_by = paths + (["first_stage"] if seen else []) + (
                ["semantic"] if candidate.id in semantic_ids else [])
            return followup_hit(seen or candidate, query, found_by,
                                typo_corrections=env.typo_corrections.get(candidate.id),
                                linked_by_control=control_reasons.get(candidate.id))

        hash_hits = assign_tiers([hit_for(c, ["hash"]) for c in linked], [], query.text, s)
        # Seeds 000 and 003: the latest MAX_FOLLOWUP_ROUNDS linked responses, then tiers.
        latest, capped = keep_latest_rounds(hash_hits, s.max_followup_rounds)
        # Scoped precedence: besides the hash, only this criterion's text with a typo
        # vouches for a follow-up, as the low tier. Ad-hoc answers and
        # answers to other criteria compete as ordinary evidence.
        fallback = assign_tiers([], [hit_for(c, ["near_copy"]) for c in near], query.text, s)
        # Answers keyed by a mapped control: their own tier, the newest round per control.
        control_hits, superseded = control_tier([hit_for(c, ["control"]) for c in by_control])
        vouched = {c.id for c in linked} | {c.id for c in near} | {c.id for c in by_control}
        competing = [
            competing_followup(hit_for(by_id[i], []), query.text)
            for i in by_id if i in semantic_ids and i not in vouched
        ]
        kept, crowded = merge_tiers(latest + control_hits + fallback, s.max_followup_rounds)
        # Linked follow-ups (by hash or control) never compete as excerpts (kept or
        # capped); any other follow-up not in the follow-up entry is ordinary evidence.
        withheld = {h.id for h in kept} | {c.id for c in linked} | {c.id for c in by_control}
        remaining = [c for c in hits if c.id not in withheld]
        to_rerank = top_by_first_stage(remaining, s.top_to_rerank_n)
    with timings.stage("rerank"):
        ranked = rerank(env, query.text, to_rerank)
    with timings.stage("boost"):
        boosted = boost_followup_documents(ranked, s.followup_document_boost, s.followup_boost_cap)
        boost = boost_outcome(boosted, s.followup_document_boost, s.followup_boost_cap)
    with timings.stage("select"):
        # One place per question however many sheets answered it (the others stand beside).
        evidence = select_top(env, one_place_per_question(boosted), s.top_reranked_n)
    with timings.stage("later_answers"):
        # An earlier answer among the excerpts has its criterion's newest answer just ahead.
        evidence = Supersession.of(env).with_newest(evidence, query, s.top_reranked_n,
                                                    shown=[h.id for h in kept])
    with timings.stage("later_versions"):
        # An excerpt of a superseded document has its series' current version just ahead.
        evidence = DocumentVersions.of(env).with_current(evidence, query, s.top_reranked_n,
                                                         pool=boosted)
    with timings.stage("other_sheets"):
        # An answer from one sheet has the same question's answers on the other sheets beside.
        evidence = with_other_sheets(env, evidence)
    return StrategyResult(
        evidence=evidence, followups=context_order(kept), first_stage=hits, reranked=boosted,
        hash_path=hash_hits + control_hits + [d.followup for d in superseded], boost=boost,
        semantic_path=[h for h in hash_hits if "semantic" in h.found_by] + fallback + competing,
        dropped_followups=capped + superseded + crowded,
    )


STRATEGY = Strategy(
    name="precedence",
    seed="000+002+003",
    summary="all hash-linked follow-ups by metadata lookup, latest 3, tiered; follow-ups "
            "linked to a typo of the criterion as low tier; "
            "search 100, rerank top 70, follow-up documents boosted, top 6; follow-ups last",
    run=run,
    search="vector_indexed",
    leads_with_current_answer=True,
    followups_first=True,
)
