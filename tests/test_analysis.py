"""core.trace.analysis: rank moves, what-if boosts, entry boosts, comparisons, round progression."""

from __future__ import annotations

import pytest

from core.models import Candidate, FollowupHit, RerankerStatus, RetrievalTrace
from core.trace.analysis import (
    answer_diff,
    compare_traces,
    context_map,
    entry_boost,
    move_label,
    ranked_items,
    round_progression,
    whatif_ranking,
)


def cand(cid: str, score: float, *, doc_type: str = "tc_files", rank: int = 1,
         rerank: float | None = None) -> Candidate:
    return Candidate(id=cid, type=doc_type, source=f"{cid}.md", text=cid,
                     first_stage_score=score, rerank_score=rerank,
                     final_score=rerank if rerank is not None else score,
                     rank_before_boost=rank, rank_after_boost=rank)


def hit(round_number: int, *, tier: str = "medium", answer: str = "Yes.") -> FollowupHit:
    return FollowupHit(
        id=f"f{round_number}", round_number=round_number,
        timestamp=f"2024-01-{round_number:02d}T00:00:00Z", source="Follow-up Questionnaire",
        content="", criterion_question_text="C?", criterion_question_hash="h",
        question_text=f"Q{round_number}", answer_text=answer, hash_match=True,
        question_similarity=0.5, tier=tier, tier_reason=f"reason {round_number}")


def trace(**fields) -> RetrievalTrace:
    base = dict(vendor_id="acme", criterion="C?", criterion_hash="h", strategy="precedence",
                reranker=RerankerStatus(name="none", ran=False, reason="x"),
                embedding_model="fake", constants={})
    return RetrievalTrace(**(base | fields))


@pytest.mark.parametrize("before, after, label", [
    (5, 2, "Up 3"), (2, 3, "Down 1"), (4, 4, "="), (None, 1, "new"), (3, None, "out")])
def test_move_labels_read_like_a_compare_view(before, after, label):
    assert move_label(before, after) == label


RANKED = [cand("a", 0.90, rank=1), cand("b", 0.80, rank=2), cand("doc", 0.70, rank=3,
          doc_type="followup_document"), cand("c", 0.60, rank=4)]


def test_whatif_at_one_is_the_unboosted_order():
    assert [c.id for c in whatif_ranking(RANKED, 1.0, None)] == ["a", "b", "doc", "c"]


def test_whatif_boost_moves_a_followup_document_up_from_the_traces_scores():
    ranked = whatif_ranking(RANKED, 1.2, None)  # 0.70 * 1.2 = 0.84 > 0.80
    assert [c.id for c in ranked] == ["a", "doc", "b", "c"]
    moved = next(c for c in ranked if c.id == "doc")
    assert moved.final_score == pytest.approx(0.84) and moved.rank_after_boost == 2


def test_whatif_respects_the_cap():
    high = [cand("a", 0.99, rank=1), cand("doc", 0.95, rank=2, doc_type="followup_document")]
    ranked = whatif_ranking(high, 2.0, 0.98)
    assert [c.id for c in ranked] == ["a", "doc"]
    assert ranked[1].final_score == pytest.approx(0.98)


def test_whatif_uses_rerank_scores_when_a_reranker_ran():
    reranked = [cand("a", 0.1, rank=1, rerank=0.9),
                cand("doc", 0.9, rank=2, rerank=0.5, doc_type="followup_document")]
    assert [c.id for c in whatif_ranking(reranked, 1.5, None)] == ["a", "doc"]  # 0.75 < 0.9
    assert [c.id for c in whatif_ranking(reranked, 1.9, None)] == ["doc", "a"]  # 0.95


def test_entry_boost_is_the_smallest_factor_that_reaches_the_top_n():
    factor = entry_boost(RANKED, "doc", 1, None)
    assert factor == pytest.approx(0.90 / 0.70, rel=1e-6)
    assert [c.id for c in whatif_ranking(RANKED, factor, None)][0] == "doc"
    assert whatif_ranking(RANKED, factor * 0.99, None)[0].id != "doc"


def test_entry_boost_is_one_when_already_in_and_none_when_the_cap_forbids_it():
    assert entry_boost(RANKED, "doc", 3, None) == 1.0
    assert entry_boost(RANKED, "doc", 1, 0.85) is None  # capped below 0.90


def test_ranked_items_mark_the_context_and_the_moves():
    moved = [cand("doc", 0.7, rank=3, doc_type="followup_document").model_copy(
        update={"rank_after_boost": 1, "boost": 1.15})]
    [item] = ranked_items(moved, {"doc"})
    assert item.move == "Up 2" and item.in_context and item.boost == 1.15


def test_round_progression_marks_each_round_kept_dropped_or_missed():
    from core.models import DroppedFollowup

    linked = [hit(r) for r in (5, 1, 3, 4, 2)]
    t = trace(followups=[hit(3), hit(4), hit(5)],
              dropped_followups=[DroppedFollowup(followup=hit(2), reason="older")])
    rows = round_progression(linked, t)
    assert [r.followup.round_number for r in rows] == [1, 2, 3, 4, 5]
    assert [r.status for r in rows] == ["not found by this strategy", "dropped",
                                        "in context", "in context", "in context"]
    assert rows[1].reason == "older"


def test_answer_diff_isolates_a_contradiction():
    parts = answer_diff("We use AES-256 for all data.", "We use AES-128 for most data.")
    assert parts == [("equal", "We use"), ("delete", "AES-256 for all"),
                     ("insert", "AES-128 for most"), ("equal", "data.")]
    assert " ".join(t for op, t in parts if op != "delete") == "We use AES-128 for most data."
    assert " ".join(t for op, t in parts if op != "insert") == "We use AES-256 for all data."


def test_answer_diff_of_a_rewrite_is_one_change_not_confetti():
    parts = answer_diff("Attached is our KMS configuration with AES-256-GCM on all buckets.",
                        "We need to correct our earlier answers: most data uses AES-128.")
    assert [op for op, _ in parts] == ["delete", "insert"]


def test_answer_diff_of_identical_answers_is_all_equal():
    assert answer_diff("Yes.", "Yes.") == [("equal", "Yes.")]


def test_compare_traces_lists_shared_and_unique_items_with_moves():
    a = trace(evidence=[cand("x", 0.9), cand("y", 0.8)], followups=[hit(3)])
    b = trace(evidence=[cand("y", 0.8), cand("z", 0.7)])
    items = {i.id: i for i in compare_traces(a, b)}
    assert (items["x"].rank_a, items["x"].rank_b, items["x"].move) == (1, None, "out")
    assert (items["y"].rank_a, items["y"].rank_b, items["y"].move) == (2, 1, "Up 1")
    assert (items["z"].rank_a, items["z"].move) == (None, "new")
    assert items["f3"].rank_a == 3 and items["f3"].rank_b is None


def test_context_map_has_one_entry_per_index():
    t = trace(evidence=[cand("x", 0.9), cand("y", 0.8)], followups=[hit(3), hit(4)])
    entries = context_map(t)
    assert [e.index for e in entries] == [1, 2, 3]
    assert entries[-1].kind == "follow-ups" and entries[-1].rounds == (3, 4)
    assert entries[-1].source.endswith("(Multiple Rounds)")
    assert entries[0].ids == ("x",) and entries[0].source == "x.md"
