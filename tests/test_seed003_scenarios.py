"""Seed 003 ("Content-Based Hashing + Hybrid Retrieval"): one test per item of its Testing
checklist, for `tiered` (the seed) and `precedence` (which tiers the same way), on the fake
models over a real ChromaDB store."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from core.config import Settings
from core.errors import EvidenceError, UserInputError
from core.hashing import canonical_criterion_question_hash, criterion_hash
from core.retrieval.tiers import question_similarity
from core.store import Where
from core.store.vendor import chroma_where
from core.workbench import Workbench
from tests.conftest import AES_CRITERION
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support import payloads
from tests.support.layouts import seed_context, seed_prompt
from tests.support.store import get_all

VENDOR = "acme"
BOTH = pytest.mark.parametrize("strategy", ["tiered", "precedence"])

DOCS = {
    "encryption_policy.md":
        "Policy: the vendor shall encrypt data at rest using AES-256 for all production systems.",
    "backups.md": "Backups hold data at rest and are sealed with AES-256 by the vendor.",
    "laptops.md": "Laptop disks rely on AES-256 full disk protection at rest.",
    "training.md": "Staff complete security awareness training using an online course.",
}
REWORDED = "Which cipher protects stored customer information?"


payload = partial(payloads.round_payload, vendor=VENDOR)
response = partial(payloads.response, criterion=AES_CRITERION)


def ingest_docs(bench: Workbench, folder: Path, docs: dict[str, str] = DOCS) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    bench.ingest_documents(VENDOR, [folder])


def all_hits(trace):
    """Every follow-up the trace mentions, wherever it sits."""
    return (list(trace.followups) + list(trace.hash_path or []) + list(trace.semantic_path or [])
            + [d.followup for d in trace.dropped_followups])


def last_entry(context: str) -> str:
    return "<index_" + context.rsplit("<index_", 1)[1]


@pytest.fixture
def bench(workbench, tmp_path) -> Workbench:
    ingest_docs(workbench, tmp_path / "docs")
    return workbench


# 1. Modified question uses completely different terminology ---------------------------------

@BOTH
def test_reworded_question_is_still_linked_by_hash_as_medium(bench, strategy):
    bench.ingest_questionnaire(payload(1, [response(REWORDED, "AES-256.")]))

    trace = bench.retrieve(VENDOR, AES_CRITERION, strategy)

    [hit] = trace.followups
    similarity = question_similarity(AES_CRITERION, REWORDED)
    assert similarity < 0.7
    assert hit.hash_match is True
    assert "hash" in hit.found_by
    assert hit.tier == "medium"
    assert hit.tier_reason == (
        f"hash match; question reworded, similarity {similarity:.2f} < 0.70: medium")
    assert last_entry(seed_context(trace)) == (
        f"<index_{len(trace.evidence) + 1}>\n<source>Follow-up Questionnaire Round 1</source>\n"
        f"<content>\nQuestion: {REWORDED} Answer: AES-256.\n</content>\n"
        f"</index_{len(trace.evidence) + 1}>")


# 2. Vendor answer is extremely short ------------------------------------------------------

@BOTH
@pytest.mark.parametrize("answer", ["Yes.", "Not yet"])
def test_extremely_short_answer_reaches_the_context(bench, strategy, answer):
    bench.ingest_questionnaire(payload(1, [response(AES_CRITERION, answer)]))

    trace = bench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert [(f.answer_text, f.tier) for f in trace.followups] == [(answer, "high")]
    assert last_entry(seed_context(trace)).endswith(
        f"Question: {AES_CRITERION} Answer: {answer}\n</content>\n"
        f"</index_{len(trace.evidence) + 1}>")
    assert f"Vendor Response: {answer}\n" in seed_prompt(trace)


# 3. Vendor answer contradicts existing documentation ---------------------------------------

@BOTH
def test_answer_contradicting_documentation_both_reach_the_context(workbench, tmp_path,
                                                                    strategy):
    old = "Data at rest is not encrypted; the vendor plans to adopt AES-256 next year."
    ingest_docs(workbench, tmp_path / "docs", {**DOCS, "soc2_2022.md": old})
    answer = "All data at rest has been encrypted with AES-256 since March."
    workbench.ingest_questionnaire(payload(2, [response(AES_CRITERION, answer)]))

    trace = workbench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert old in [c.text for c in trace.evidence]
    assert [f.answer_text for f in trace.followups] == [answer]
    assert seed_context(trace).index(old) < seed_context(trace).index(answer)
    assert answer in last_entry(seed_context(trace))
    # The prompt puts the answer under Source 1 and the documentation under Source 2.
    source2 = seed_prompt(trace).index("**Source 2: General Documentation**")
    assert seed_prompt(trace).index(answer) < source2 < seed_prompt(trace).index(old)


# 4. Multiple rounds (3+) of follow-ups for the same criterion ------------------------------

@BOTH
def test_three_rounds_for_one_criterion_all_reach_the_context(bench, strategy):
    answers = {1: "Planned.", 2: "In progress for databases.", 3: "Yes, everywhere."}
    for rnd, answer in answers.items():
        bench.ingest_questionnaire(payload(rnd, [response(AES_CRITERION, answer)]))

    trace = bench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert [(f.round_number, f.answer_text) for f in trace.followups] == list(answers.items())
    assert all(f.tier == "high" and f.hash_match for f in trace.followups)
    entry = last_entry(seed_context(trace))
    assert "(Multiple Rounds)" in entry
    assert entry.index("[Round 1]") < entry.index("[Round 2]") < entry.index("[Round 3]")
    prompt = seed_prompt(trace)
    assert (prompt.index("[MOST RECENT - ROUND 3 - 2024-03-15]")
            < prompt.index("[ROUND 2 - 2024-02-15]") < prompt.index("[ROUND 1 - 2024-01-15]"))


# 5. Vendor contradicts themselves across rounds --------------------------------------------

@BOTH
def test_self_contradiction_lists_newest_first_marked_most_recent(bench, strategy):
    first = "No, data at rest is not encrypted."
    second = "Yes, all data at rest uses AES-256."
    bench.ingest_questionnaire(payload(1, [response(AES_CRITERION, first)]))
    bench.ingest_questionnaire(payload(2, [response(AES_CRITERION, second)]))

    trace = bench.retrieve(VENDOR, AES_CRITERION, strategy)

    prompt = seed_prompt(trace)
    newest = prompt.index(f"[MOST RECENT - ROUND 2 - 2024-02-15]\nQuestion: {AES_CRITERION}\n"
                          f"Vendor Response: {second}")
    oldest = prompt.index(f"[ROUND 1 - 2024-01-15]\nQuestion: {AES_CRITERION}\n"
                          f"Vendor Response: {first}")
    assert newest < oldest
    assert prompt.count("[MOST RECENT - ") == 1
    assert "If you observe contradictions between follow-up rounds" in prompt
    entry = last_entry(seed_context(trace))
    assert entry.index(first) < entry.index(second)  # the context keeps ascending rounds


# 6. Many rounds exceed MAX_FOLLOWUP_ROUNDS -------------------------------------------------

@BOTH
def test_many_rounds_are_capped_at_max_followup_rounds(bench, strategy):
    for rnd in range(1, 7):
        bench.ingest_questionnaire(
            payload(rnd, [response(AES_CRITERION, f"Answer given in round {rnd}.")]))

    trace = bench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert len(trace.followups) <= 3
    assert all(f.hash_match for f in trace.followups)
    entry = last_entry(seed_context(trace))
    assert entry.count("[Round ") == len(trace.followups)
    assert seed_context(trace).count("Answer given in round") == len(trace.followups)
    if strategy == "precedence":
        assert [f.round_number for f in trace.followups] == [4, 5, 6]
        assert sorted(d.followup.round_number for d in trace.dropped_followups) == [1, 2, 3]


def test_tiered_hash_path_is_the_filtered_vector_search_over_linked_answers(bench):
    # Seed 003 path 1 is a vector search filtered on the criterion's hash: the store's own
    # filtered query over every linked answer is the reference for the three kept, in order.
    for rnd in range(1, 7):
        bench.ingest_questionnaire(payload(rnd, [
            response(AES_CRITERION, f"Round {rnd}: AES-{128 * (1 + rnd % 2)} at rest, "
                                    f"keys rotated every {rnd * 30} days."),
            payloads.response("Do you train staff?", f"Training answer of round {rnd}.",
                              criterion="Does the vendor train its staff?")]))
    vendor = bench.store.open_vendor(VENDOR)
    trace = bench.retrieve(VENDOR, AES_CRITERION, "tiered")
    query = bench.embedder.embed([AES_CRITERION])[0]
    where = chroma_where(vendor.scope_filter(Where.eq(
        criterion_canonical_hash=canonical_criterion_question_hash(AES_CRITERION))))
    found = vendor.chunks.query(query_embeddings=[query], n_results=3, where=where,
                                include=["distances"])

    assert len(vendor.links()) == 12
    assert len(found["ids"][0]) == 3
    assert {h.id for h in trace.hash_path} == set(found["ids"][0])


@BOTH
def test_tier_labels_never_contradict_the_hash(bench, strategy):
    """Seed 003's tier table: low means no hash match. A hash-linked follow-up that the cap
    leaves out must still say it is hash-linked, never 'no hash match'."""
    for rnd in range(1, 7):
        bench.ingest_questionnaire(
            payload(rnd, [response(AES_CRITERION, f"Answer given in round {rnd}.")]))

    trace = bench.retrieve(VENDOR, AES_CRITERION, strategy)

    hits = all_hits(trace)
    assert len({h.id for h in hits}) == 6
    for hit in hits:
        assert hit.hash_match is True
        assert hit.tier in ("high", "medium"), (hit.round_number, hit.tier, hit.tier_reason)
        assert hit.tier_reason.startswith("hash match;"), hit.tier_reason


# 7. Criterion text edited (hash changes) ---------------------------------------------------

EDITED = "Does the vendor encrypt all stored data using AES-256 or stronger?"


def test_edited_criterion_orphans_old_followups_to_the_low_tier_in_tiered(bench):
    """Seed 003 as written: the semantic path puts any follow-up it sees in the low tier."""
    bench.ingest_questionnaire(payload(1, [response(
        AES_CRITERION, "Yes, all stored data uses AES-256.")]))
    assert criterion_hash(EDITED) != criterion_hash(AES_CRITERION)

    trace = bench.retrieve(VENDOR, EDITED, "tiered")

    assert not [h for h in trace.hash_path or [] if h.hash_match]
    [hit] = trace.followups
    assert hit.hash_match is False
    assert hit.tier == "low"
    assert hit.found_by == ["semantic"]
    assert hit.tier_reason.startswith("no hash match")


def test_substantially_edited_criterion_competes_as_evidence_in_precedence(bench):
    """Scoped precedence: an answer linked to a criterion that is not a typo of this one
    is not vouched for as a follow-up, yet the semantic fallback still brings it into the
    context as an ordinary excerpt."""
    bench.ingest_questionnaire(payload(1, [response(
        AES_CRITERION, "Yes, all stored data uses AES-256.")]))

    trace = bench.retrieve(VENDOR, EDITED, "precedence")

    assert trace.followups == []
    [seen] = [h for h in trace.semantic_path or [] if not h.hash_match]
    assert seen.tier is None
    assert seen.tier_reason.startswith("no hash match, linked to a different criterion")
    assert seen.tier_reason.endswith("competes as ordinary evidence")
    assert seen.id in [e.id for e in trace.evidence]
    assert "Yes, all stored data uses AES-256." in seed_context(trace)


BACKUP_CRITERION = "Are backups of production databases tested quarterly?"


@BOTH
def test_followup_of_a_genuinely_different_criterion_is_not_a_followup(workbench, tmp_path,
                                                                        strategy):
    backup_docs = {f"backup_{i:02d}.md":
                   f"Backups of production databases are tested quarterly in region {i}."
                   for i in range(12)}
    ingest_docs(workbench, tmp_path / "docs", {**DOCS, **backup_docs})
    workbench.ingest_questionnaire(payload(1, [response(AES_CRITERION, "Yes, AES-256.")]))

    trace = workbench.retrieve(VENDOR, BACKUP_CRITERION, strategy)

    assert trace.followups == []
    assert "Follow-up Questionnaire" not in seed_context(trace)
    assert all(not h.hash_match for h in all_hits(trace))


# 8. Minor typo fix in the criterion --------------------------------------------------------

TYPO = "Does the vendor encrpyt data at rest using AES-256?"


@BOTH
def test_typo_fix_still_surfaces_old_followups_as_low(bench, strategy):
    bench.ingest_questionnaire(payload(1, [response(TYPO, "Yes, AES-256 for all data at rest.",
                                                    criterion=TYPO)]))
    bench.ingest_questionnaire(payload(2, [response(TYPO, "Confirmed, AES-256 at rest.",
                                                    criterion=TYPO)]))

    trace = bench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert [f.round_number for f in trace.followups] == [1, 2]
    for hit in trace.followups:
        assert hit.hash_match is False
        assert hit.tier == "low"
        assert hit.criterion_question_text == TYPO
        assert hit.tier_reason.startswith("no hash match")
        assert "criterion text differs" in hit.tier_reason
        assert hit.tier_reason.endswith(": low")
    assert "[Round 1]" in last_entry(seed_context(trace))


def test_typo_fixed_followup_is_found_by_its_criterion_text_when_search_misses_it(
        workbench, tmp_path):
    """precedence finds near-copy follow-ups by metadata, not through the top-10 window."""
    crowd = {f"crowd_{i:02d}.md": "The vendor encrypts data at rest using AES-256 keys, "
             f"rotated in region {i}." for i in range(30)}
    ingest_docs(workbench, tmp_path / "crowd", crowd)
    workbench.ingest_questionnaire(payload(2, [response(
        "Which cipher?", "GCM mode.", criterion=TYPO)]))

    trace = workbench.retrieve(VENDOR, AES_CRITERION, "precedence")

    [hit] = trace.followups
    assert hit.criterion_question_text == TYPO and hit.tier == "low"
    assert "near_copy" in hit.found_by and "semantic" not in hit.found_by
    assert hit.tier_reason.endswith("found by its linked criterion text: low")
    tiered = workbench.retrieve(VENDOR, AES_CRITERION, "tiered")
    assert tiered.followups == []  # seed 003's top-10 semantic path cannot see it


THREE_TYPOS = "Does the vendor encrpyt data at rest usign AES-256 for all storgae?"
TYPED = "Does the vendor encrypt data at rest using AES-256 for all storage?"


def test_a_followup_kept_under_wider_typo_settings_is_explained_by_that_decision(tmp_path):
    """With typo_max_words=3 a criterion with three slips is this criterion: the follow-up is
    kept, and its reason names the three corrections the decision found (the defaults, two
    words at most, would call the text edited)."""
    wider = Workbench(Settings(store=tmp_path / "store", typo_max_words=3),
                      embedder=FakeEmbedder(), reranker=FakeReranker())
    ingest_docs(wider, tmp_path / "docs")
    wider.ingest_questionnaire(payload(1, [response("Which cipher?", "AES-256 everywhere.",
                                                    criterion=THREE_TYPOS)]))

    trace = wider.retrieve(VENDOR, TYPED, "precedence")

    [hit] = trace.followups
    assert hit.tier == "low" and "near_copy" in hit.found_by
    assert ("its criterion text differs only by a typo (encrpyt -> encrypt, usign -> using, "
            "storgae -> storage)") in hit.tier_reason


# Ad-hoc questions (no criterion) -----------------------------------------------------------

@BOTH
@pytest.mark.parametrize("criterion", [None, "", "   "])
def test_ad_hoc_question_is_never_hash_linked(bench, strategy, criterion):
    bench.ingest_questionnaire(payload(1, [response(
        "Does the vendor encrypt data at rest using AES-256?", "Yes.", criterion=criterion)]))
    [record] = get_all(bench.store.open_vendor(VENDOR).chunks,
                       where={"source_type": "follow_up_response"})["metadatas"]
    assert "criterion_question_hash" not in record
    assert record["original_criterion_question_text"] == ""

    trace = bench.retrieve(VENDOR, AES_CRITERION, strategy)

    hits = all_hits(trace)
    for hit in hits:
        assert hit.hash_match is False
        assert hit.criterion_question_hash is None
        assert "hash" not in hit.found_by
        # tiered labels it low; precedence does not vouch for it at all
        assert hit.tier == ("low" if strategy == "tiered" else None)
        assert "ad-hoc" in hit.tier_reason
    if strategy == "precedence":
        # Scoped precedence: an ad-hoc answer competes as ordinary evidence.
        assert trace.followups == []
        assert any(c.id.startswith("followup-") for c in trace.reranked)
    else:
        assert [h.tier for h in trace.followups] == ["low"]


# Tier reasons in words ---------------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["tiered", "precedence", "hash_extraction"])
def test_tier_reasons_in_words(bench, strategy):
    light = "Does the vendor encrypt all data at rest using AES-256?"
    bench.ingest_questionnaire(payload(1, [response(AES_CRITERION, "Yes.")]))
    bench.ingest_questionnaire(payload(2, [response(light, "Yes, all of it.")]))
    bench.ingest_questionnaire(payload(3, [response(REWORDED, "AES-256.")]))

    trace = bench.retrieve(VENDOR, AES_CRITERION, strategy)

    light_sim = question_similarity(AES_CRITERION, light)
    far_sim = question_similarity(AES_CRITERION, REWORDED)
    assert {f.round_number: f.tier_reason for f in trace.followups} == {
        1: "hash match; question unchanged, similarity 1.00 >= 0.70: high",
        2: f"hash match; question lightly edited, similarity {light_sim:.2f} >= 0.70: high",
        3: f"hash match; question reworded, similarity {far_sim:.2f} < 0.70: medium",
    }
    assert [f.tier for f in trace.followups] == ["high", "high", "medium"]


# 9. Bulk API: partial failure handling (rollback) ------------------------------------------

def test_embedder_failure_writes_nothing(bench, settings):
    bench.ingest_questionnaire(payload(1, [response(AES_CRITERION, "Planned.")]))
    before = [s.model_dump() for s in bench.status()]
    failing = Workbench(settings, embedder=FakeEmbedder(fail_after_calls=0),
                        reranker=FakeReranker())
    round_two = payload(2, [response(AES_CRITERION, "Yes."),
                            response(REWORDED, "AES-256."),
                            response("Who holds the keys?", "Our HSM team.")])

    with pytest.raises((RuntimeError, EvidenceError)):
        failing.ingest_questionnaire(round_two)
    with pytest.raises((RuntimeError, EvidenceError)):
        failing.ingest_questionnaire(payload(1, [response(AES_CRITERION, "Yes.")],
                                             vendor="globex"))

    assert [s.model_dump() for s in bench.status()] == before
    assert bench.vendor_ids() == [VENDOR]
    trace = bench.retrieve(VENDOR, AES_CRITERION, "precedence")
    assert [f.answer_text for f in trace.followups] == ["Planned."]


@pytest.mark.parametrize("bad", [
    {"criterion_question_text": AES_CRITERION, "question_text": "Who?", "answer_text": "   "},
    {"criterion_question_text": AES_CRITERION, "question_text": "Who?"},
    {"criterion_question_text": AES_CRITERION, "question_text": 7, "answer_text": "Us."},
])
def test_payload_with_one_bad_response_is_refused_whole(bench, bad):
    bench.ingest_questionnaire(payload(1, [response(AES_CRITERION, "Planned.")]))
    before = [s.model_dump() for s in bench.status()]
    responses = [response(AES_CRITERION, "Yes."), response(REWORDED, "AES-256."), bad]

    with pytest.raises(UserInputError, match=r"responses\[2\]"):
        bench.ingest_questionnaire(payload(2, responses))
    with pytest.raises(UserInputError):
        bench.ingest_questionnaire(payload(1, responses, vendor="globex"))

    assert [s.model_dump() for s in bench.status()] == before
    assert bench.vendor_ids() == [VENDOR]


# 10. Bulk API: idempotent re-indexing (no duplicates) --------------------------------------

def test_reindexing_the_same_round_never_duplicates(bench):
    round_one = payload(1, [response(AES_CRITERION, "Planned."),
                            response(REWORDED, "AES-256."),
                            response("Who holds the keys?", "Our HSM team.", criterion=None)])
    first = bench.ingest_questionnaire(round_one)
    second = bench.ingest_questionnaire(round_one)
    assert first.indexed_count == second.indexed_count == 3

    [status] = bench.status(VENDOR)
    assert (status.followup_responses, status.rounds) == (3, [1])
    ids = get_all(bench.store.open_vendor(VENDOR).chunks,
                  where={"source_type": "follow_up_response"})["ids"]
    assert len(ids) == len(set(ids)) == 3

    # Same (criterion, question, round) with a corrected answer replaces the old one.
    fixed = payload(1, [response(AES_CRITERION, "Yes, since March.")])
    fixed["timestamp"] = "2024-01-20T08:00:00Z"
    bench.ingest_questionnaire(fixed)
    [status] = bench.status(VENDOR)
    assert status.followup_responses == 3
    trace = bench.retrieve(VENDOR, AES_CRITERION, "precedence")
    assert sorted(f.answer_text for f in trace.followups) == ["AES-256.", "Yes, since March."]

    # The same response in a later round is a new round, not a duplicate.
    bench.ingest_questionnaire(payload(2, [response(AES_CRITERION, "Yes, since March.")]))
    [status] = bench.status(VENDOR)
    assert (status.followup_responses, status.rounds) == (4, [1, 2])


@BOTH
def test_reindexing_leaves_retrieval_unchanged(bench, strategy):
    round_one = payload(1, [response(AES_CRITERION, "Yes.")])
    bench.ingest_questionnaire(round_one)
    once = bench.retrieve(VENDOR, AES_CRITERION, strategy)
    bench.ingest_questionnaire(round_one)
    twice = bench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert [f.id for f in twice.followups] == [f.id for f in once.followups]
    assert len(twice.followups) == 1
    assert twice.context == once.context


def test_reindexing_documents_never_duplicates(tmp_path):
    settings = Settings(store=tmp_path / "store", reranker_cache_dir=tmp_path / "models")
    bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    ingest_docs(bench, tmp_path / "docs")
    ingest_docs(bench, tmp_path / "docs")
    [status] = bench.status(VENDOR)
    assert (status.documents, status.chunks) == (4, 4)
