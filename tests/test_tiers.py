"""Precedence tiers on hand-built candidates and follow-ups: seeds 000 (extraction, round cap)
and 003 (tiers, merge)."""

from __future__ import annotations

from core.config import Settings
from core.hashing import criterion_hash, format_embedding_content
from core.models import FOLLOWUP_SOURCE_TYPE, Candidate, FollowupHit
from core.retrieval.tiers import assign_tiers, extract_by_hash, keep_latest_rounds, merge_tiers
from tests.conftest import AES_CRITERION
from tests.support.candidates import document

H = criterion_hash(AES_CRITERION)
OTHER_CRITERION = "Does the vendor encrypt data in transit using TLS 1.2 or higher?"
TIERS = Settings(fuzzy_match_threshold=0.7)


def followup_candidate(cid: str, round_number: int, cq_hash: str | None, *,
                       score: float = 0.5) -> Candidate:
    metadata = {"source_type": FOLLOWUP_SOURCE_TYPE, "type": f"followup_response:{round_number}",
                "round_number": round_number, "question_text": "Q?", "answer_text": "A."}
    if cq_hash is not None:
        metadata["criterion_question_hash"] = cq_hash
    return Candidate(id=cid, type=f"followup_response:{round_number}",
                     source=f"Follow-up Questionnaire Round {round_number}",
                     round_number=round_number, text="Question: Q? Answer: A.",
                     first_stage_score=score, final_score=score, metadata=metadata)


def hit(hid: str, round_number: int, *, similarity: float = 1.0, hash_match: bool = True,
        found_by: tuple[str, ...] = ("hash",), tier: str | None = None,
        timestamp: str | None = None, criterion: str | None = AES_CRITERION) -> FollowupHit:
    return FollowupHit(
        id=hid, round_number=round_number,
        timestamp=timestamp or f"2024-01-{10 + round_number:02d}T10:30:00Z",
        source=f"Follow-up Questionnaire Round {round_number}",
        content=format_embedding_content("Q?", "A."),
        criterion_question_text=criterion,
        criterion_question_hash=criterion_hash(criterion) if criterion else None,
        question_text="Q?", answer_text="A.", hash_match=hash_match,
        found_by=list(found_by), question_similarity=similarity, tier=tier)



# Seed 000: extraction by hash -------------------------------------------------------------

def test_extract_by_hash_separates_linked_followups():
    candidates = [
        document("doc-a", 0.9),
        followup_candidate("fu-linked", 2, H),
        followup_candidate("fu-other", 1, criterion_hash(OTHER_CRITERION)),
        followup_candidate("fu-adhoc", 1, None),
        document("doc-b", 0.4),
        followup_candidate("fu-linked-2", 3, H),
    ]
    matched, remaining = extract_by_hash(candidates, H)
    assert [c.id for c in matched] == ["fu-linked", "fu-linked-2"]
    assert [c.id for c in remaining] == ["doc-a", "fu-other", "fu-adhoc", "doc-b"]


def test_extract_by_hash_with_no_followups_keeps_everything():
    candidates = [document("doc-a"), document("doc-b")]
    matched, remaining = extract_by_hash(candidates, H)
    assert matched == []
    assert [c.id for c in remaining] == ["doc-a", "doc-b"]


def test_extract_by_hash_ignores_documents_carrying_a_hash_key():
    doc = document("doc-a")
    doc = doc.model_copy(update={"metadata": {**doc.metadata, "criterion_question_hash": H}})
    matched, remaining = extract_by_hash([doc], H)
    assert matched == []
    assert [c.id for c in remaining] == ["doc-a"]


def test_extract_by_hash_does_not_mutate_input():
    candidates = [followup_candidate("fu", 1, H), document("doc")]
    extract_by_hash(candidates, H)
    assert [c.id for c in candidates] == ["fu", "doc"]


# Seed 000: round cap ----------------------------------------------------------------------

def test_five_rounds_keep_5_4_3():
    hits = [hit(f"r{n}", n) for n in (2, 5, 1, 4, 3)]
    kept, dropped = keep_latest_rounds(hits, 3)
    assert [h.round_number for h in kept] == [5, 4, 3]
    assert sorted(d.followup.round_number for d in dropped) == [1, 2]
    for d in dropped:
        assert "MAX_FOLLOWUP_ROUNDS=3" in d.reason
        assert f"round {d.followup.round_number}" in d.reason


def test_three_rounds_or_fewer_drop_nothing():
    kept, dropped = keep_latest_rounds([hit("r1", 1), hit("r3", 3), hit("r2", 2)], 3)
    assert [h.round_number for h in kept] == [3, 2, 1]
    assert dropped == []


def test_round_cap_is_configurable():
    kept, dropped = keep_latest_rounds([hit(f"r{n}", n) for n in range(1, 6)], 1)
    assert [h.round_number for h in kept] == [5]
    assert len(dropped) == 4


# Seed 003: tiers --------------------------------------------------------------------------

def test_hash_match_with_similar_question_is_high():
    [tiered] = assign_tiers([hit("a", 2, similarity=0.93)], [], AES_CRITERION, TIERS)
    assert tiered.tier == "high"
    assert tiered.tier_reason == (
        "hash match; question lightly edited, similarity 0.93 >= 0.70: high")


def test_unchanged_question_is_high():
    [tiered] = assign_tiers([hit("a", 2, similarity=1.0)], [], AES_CRITERION, TIERS)
    assert tiered.tier == "high"
    assert tiered.tier_reason == "hash match; question unchanged, similarity 1.00 >= 0.70: high"


def test_similarity_exactly_at_threshold_is_high():
    [tiered] = assign_tiers([hit("a", 2, similarity=0.7)], [], AES_CRITERION, TIERS)
    assert tiered.tier == "high"


def test_hash_match_with_reworded_question_is_medium():
    [tiered] = assign_tiers([hit("a", 2, similarity=0.42)], [], AES_CRITERION, TIERS)
    assert tiered.tier == "medium"
    assert tiered.tier_reason == "hash match; question reworded, similarity 0.42 < 0.70: medium"


def test_semantic_only_is_low():
    semantic = hit("b", 1, hash_match=False, found_by=("semantic",), criterion=OTHER_CRITERION)
    [tiered] = assign_tiers([], [semantic], AES_CRITERION, TIERS)
    assert tiered.tier == "low"
    assert tiered.tier_reason.startswith("no hash match")
    assert tiered.tier_reason.endswith(": low")


def test_ad_hoc_semantic_hit_is_low_and_says_ad_hoc():
    adhoc = hit("c", 1, hash_match=False, found_by=("semantic",), criterion=None)
    [tiered] = assign_tiers([], [adhoc], AES_CRITERION, TIERS)
    assert tiered.tier == "low"
    assert "ad-hoc" in tiered.tier_reason


def test_hit_found_by_both_paths_appears_once_in_its_hash_tier():
    by_hash = hit("same", 2, similarity=0.95, found_by=("hash",))
    by_semantic = hit("same", 2, similarity=0.95, found_by=("semantic",))
    other = hit("other", 1, hash_match=False, found_by=("semantic",), criterion=OTHER_CRITERION)
    tiered = assign_tiers([by_hash], [by_semantic, other], AES_CRITERION, TIERS)
    assert [h.id for h in tiered] == ["same", "other"]
    assert tiered[0].tier == "high"
    assert tiered[0].found_by == ["hash", "semantic"]
    assert tiered[1].tier == "low"


def test_assign_tiers_does_not_mutate_input():
    original = hit("a", 2, similarity=0.42)
    assign_tiers([original], [], AES_CRITERION, TIERS)
    assert original.tier is None
    assert original.tier_reason == ""


# Seed 003: merge --------------------------------------------------------------------------

def test_merge_orders_high_medium_low_newest_first_and_caps():
    hits = [
        hit("low-6", 6, tier="low"),
        hit("high-1", 1, tier="high"),
        hit("medium-5", 5, tier="medium"),
        hit("high-3", 3, tier="high"),
        hit("medium-4", 4, tier="medium"),
    ]
    kept, dropped = merge_tiers(hits, 3)
    assert [h.id for h in kept] == ["high-3", "high-1", "medium-5"]
    assert sorted(d.followup.id for d in dropped) == ["low-6", "medium-4"]
    for d in dropped:
        assert "MAX_FOLLOWUP_ROUNDS" in d.reason


def test_merge_same_round_newest_timestamp_first():
    hits = [hit("early", 2, tier="high", timestamp="2024-01-15T08:00:00Z"),
            hit("late", 2, tier="high", timestamp="2024-01-15T18:00:00Z")]
    kept, _ = merge_tiers(hits, 3)
    assert [h.id for h in kept] == ["late", "early"]


def test_merge_under_limit_keeps_all():
    kept, dropped = merge_tiers([hit("a", 1, tier="low"), hit("b", 2, tier="medium")], 3)
    assert [h.id for h in kept] == ["b", "a"]
    assert dropped == []
