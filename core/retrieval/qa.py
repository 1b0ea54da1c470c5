"""Seed 004's question-answering retrieval as a named list of stages.

    hash_fetch    questionnaire answers linked to the question's hash (as `precedence`)
    first_stage   the top qa_first_stage_n (10) from the environment's candidate source
    followups     the linked answers tiered, latest max_followup_rounds kept (as `precedence`)
    dedupe        one candidate per id and per text; linked answers leave the list
    cap           the first qa_candidate_cap (7)
    rerank        cross-encoder relevance, sorted by score (first-stage order without one)
    later_answers an earlier answer among the chunks gets its criterion's newest answer just
                  ahead of it, within the answer and suggestion chunks' number
    later_versions an excerpt of a superseded document gets its series' current version's best
                  excerpt just ahead of it, within the same number
    split         answer chunks [0:qa_answer_n], suggestion chunks [qa_answer_n:+qa_suggestion_n]

The linked follow-ups come first and are returned on their own: they never compete for the
answer's chunks. Every stage's list is kept, so a trace can show each step."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from core.models import Candidate, CurrentAnswer, DroppedFollowup, FollowupHit, RerankerStatus
from core.retrieval.source import Query
from core.retrieval.stages import RetrievalEnv, Timings, first_stage, rerank
from core.retrieval.tiers import (
    Supersession,
    assign_tiers,
    context_order,
    control_tier,
    fetch_control_linked,
    fetch_vouched_followups,
    followup_hit,
    keep_latest_rounds,
    merge_tiers,
)
from core.retrieval.versions import DocumentVersions

QA_STAGES = ("hash_fetch", "control_fetch", "first_stage", "followups", "dedupe", "cap", "rerank",
             "later_answers", "later_versions", "split")


@dataclass(frozen=True)
class DroppedCandidate:
    """A first-stage candidate the dedupe stage left out, and why."""

    candidate: Candidate
    reason: str


@dataclass
class QAResult:
    """Every stage of one question's retrieval, in the order the stages ran."""

    question: str
    question_hash: str
    reranker: RerankerStatus
    linked_followups: list[FollowupHit]  # ascending round, as in a retrieve trace
    dropped_followups: list[DroppedFollowup]
    first_stage: list[Candidate]  # the source's order, ranks from 1
    deduplicated: list[Candidate]
    duplicates: list[DroppedCandidate]
    capped: list[Candidate]
    over_cap: list[Candidate]
    reranked: list[Candidate]  # the capped candidates, best score first
    answer: list[Candidate]
    suggestions: list[Candidate]
    current_answer: CurrentAnswer | None = None  # the question's criterion's newest answer
    notes: list[str] = field(default_factory=list)
    timings: Timings = field(default_factory=Timings)


def run(env: RetrievalEnv, query: Query, timings: Timings | None = None) -> QAResult:
    """Seed 004's pipeline for one question over the environment's store and reranker."""
    s = env.settings
    timings = timings if timings is not None else Timings()
    with timings.stage("hash_fetch"):
        linked, near = fetch_vouched_followups(env, query)
    with timings.stage("control_fetch"):
        by_control, control_reasons = fetch_control_linked(env, query, linked)
    with timings.stage("first_stage"):
        hits = first_stage(env, query, s.qa_first_stage_n)
    with timings.stage("followups"):
        seen = {c.id for c in hits}

        def hit_for(candidate: Candidate, path: str) -> FollowupHit:
            found_by = [path] + (["first_stage"] if candidate.id in seen else [])
            return followup_hit(candidate, query, found_by,
                                typo_corrections=env.typo_corrections.get(candidate.id),
                                linked_by_control=control_reasons.get(candidate.id))

        hash_hits = assign_tiers([hit_for(c, "hash") for c in linked], [], query.text, s)
        latest, capped_rounds = keep_latest_rounds(hash_hits, s.max_followup_rounds)
        typo_hits = assign_tiers([], [hit_for(c, "near_copy") for c in near], query.text, s)
        control_hits, superseded = control_tier([hit_for(c, "control") for c in by_control])
        kept, crowded = merge_tiers(latest + control_hits + typo_hits, s.max_followup_rounds)
        # As in `precedence`: a linked answer never competes as a chunk, kept or not.
        withheld = {h.id for h in kept} | {c.id for c in linked} | {c.id for c in by_control}
    with timings.stage("dedupe"):
        deduplicated, duplicates = dedupe(hits, withheld)
    with timings.stage("cap"):
        capped, over_cap = deduplicated[: s.qa_candidate_cap], deduplicated[s.qa_candidate_cap:]
    with timings.stage("rerank"):
        if env.reranker is None and capped:
            env.notes.append(f"No reranker ran ({env.reranker_status.reason}); the candidates "
                             "keep first-stage order.")
        reranked = rerank(env, query.text, capped)
    with timings.stage("later_answers"):
        answers = Supersession.of(env)
        linked_followups = answers.mark_hits(context_order(kept), query) or []
        shown = answers.with_newest(reranked, query, s.qa_answer_n + s.qa_suggestion_n,
                                    shown=[h.id for h in linked_followups])
        current = answers.current(query)
    with timings.stage("later_versions"):
        shown = DocumentVersions.of(env).with_current(
            shown, query, s.qa_answer_n + s.qa_suggestion_n, pool=reranked)
    with timings.stage("split"):
        answer, suggestions = split(shown, s.qa_answer_n, s.qa_suggestion_n)
    return QAResult(
        question=query.text, question_hash=query.criterion_hash, reranker=env.reranker_status,
        linked_followups=linked_followups,
        dropped_followups=capped_rounds + superseded + crowded,
        first_stage=hits, deduplicated=deduplicated, duplicates=duplicates, capped=capped,
        over_cap=over_cap, reranked=reranked, answer=answer, suggestions=suggestions,
        current_answer=current, notes=env.notes, timings=timings,
    )


def dedupe(candidates: Sequence[Candidate], withheld: Collection[str] = ()
           ) -> tuple[list[Candidate], list[DroppedCandidate]]:
    """(one candidate per id and per text, in input order; the rest with why). Texts that
    differ only in white space are the same text; a blank text and a `withheld` id are
    left out too."""
    kept: list[Candidate] = []
    dropped: list[DroppedCandidate] = []
    by_id: dict[str, Candidate] = {}
    by_text: dict[str, Candidate] = {}
    for candidate in candidates:
        text = " ".join(candidate.text.split())
        if candidate.id in withheld:
            reason = "linked to the question's hash: returned with the linked follow-ups"
        elif candidate.id in by_id:
            reason = f"same id as the candidate at first-stage rank {_rank(by_id[candidate.id])}"
        elif not text:
            reason = "empty text"
        elif text in by_text:
            first = by_text[text]
            reason = f"same text as {first.id} (first-stage rank {_rank(first)})"
        else:
            by_id[candidate.id] = by_text[text] = candidate
            kept.append(candidate)
            continue
        dropped.append(DroppedCandidate(candidate, reason))
    return kept, dropped


def split(ranked: Sequence[Candidate], answer_n: int, suggestion_n: int
          ) -> tuple[list[Candidate], list[Candidate]]:
    """Seed 004: (answer chunks [0:answer_n], suggestion chunks [answer_n:answer_n +
    suggestion_n]); with answer_n candidates or fewer there are no suggestions."""
    return list(ranked[:answer_n]), list(ranked[answer_n: answer_n + suggestion_n])


def _rank(candidate: Candidate) -> str:
    return str(candidate.first_stage_rank) if candidate.first_stage_rank is not None else "?"
