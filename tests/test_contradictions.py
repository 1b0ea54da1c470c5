"""Contradictions found without a language model: what a reviewer sees when answers to one
criterion disagree across rounds, or the newest answer disagrees with a document."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.models import FOLLOWUP_SOURCE_TYPE, Candidate, FollowupHit
from core.review.claims import leading_yes_no
from core.review.contradictions import Contradiction, find_contradictions
from tests.conftest import AES_CRITERION

ROTATION = "How often are encryption keys rotated?"


def hit(round_number: int, answer: str, *, question: str = AES_CRITERION,
        questionnaire_id: str | None = None, hit_id: str | None = None) -> FollowupHit:
    return FollowupHit(
        id=hit_id or f"followup-{round_number}", round_number=round_number,
        timestamp=f"2024-01-{round_number:02d}T10:00:00Z",
        source=f"Follow-up Questionnaire Round {round_number}", content="",
        questionnaire_id=questionnaire_id, criterion_question_text=AES_CRITERION,
        criterion_question_hash="0123456789abcdef", question_text=question,
        answer_text=answer, hash_match=True, question_similarity=1.0)


def doc(text: str, *, source: str = "encryption_standard.md", doc_id: str = "doc-1",
        page: int | None = None) -> Candidate:
    return Candidate(id=doc_id, type="tc_files", source=source, text=text, page=page)


def sentences(contradictions: list[Contradiction]) -> list[str]:
    return [c.sentence for c in contradictions]


# Yes or no --------------------------------------------------------------------------------

def test_a_yes_turned_no_is_flagged_with_a_sentence_for_the_reviewer():
    [flip] = find_contradictions([hit(3, "Yes."), hit(4, "No.")])
    assert flip == Contradiction(
        kind="yes_no", between=("round 3", "round 4"), values=("Yes", "No"),
        ids=("followup-3", "followup-4"), round_number=4, questionnaire_id=None,
        sentence="Round 4 answers No where round 3 answered Yes.", quotes=("Yes.", "No."))


def test_the_same_yes_worded_differently_is_no_contradiction():
    assert find_contradictions([hit(3, "Yes, AES-256"),
                                hit(4, "Yes, we use AES-256 encryption")]) == []


@pytest.mark.parametrize("older, newer", [
    ("Yes.", "yes"),
    ("\u201cYes\u201d, we use AES\u2011256.", "Yes, we use AES-256."),
    ("Yes,\u00a0keys rotate every\u00a090 days.", "yes, keys rotate every 90 days"),
    ("YES \u2013 TLS\u00a01.2 or higher", "Yes - TLS 1.2 or higher"),
    ("\uff39\uff45\uff53, \uff21\uff25\uff33-\uff12\uff15\uff16", "Yes, AES-256"),
])
def test_typographic_variants_of_one_answer_are_no_contradiction(older, newer):
    assert find_contradictions([hit(3, older, question=ROTATION),
                                hit(4, newer, question=ROTATION)]) == []


@pytest.mark.parametrize("answer, expected", [
    ("Yes", "yes"), ("yes.", "yes"), ("Y", "yes"), ("True", "yes"), ("**Yes** we do", "yes"),
    ("No.", "no"), ("N", "no"), ("FALSE", "no"), ("No\nWe retired it in 2021.", "no"),
    ("No, never.", "no"), ("N/A", "n/a"), ("Not applicable - no card data.", "n/a"),
    ("NA.", "n/a"), ("No data is kept unencrypted.", None), ("Yes/No", None),
    ("Nope", None), ("Yesterday we rotated keys.", None), ("Partially.", None), ("", None),
])
def test_the_leading_yes_or_no_is_read_as_a_reviewer_reads_it(answer, expected):
    assert leading_yes_no(answer) == expected


def test_not_applicable_is_no_flip_but_does_not_hide_one():
    assert find_contradictions([hit(1, "Yes."), hit(2, "N/A")]) == []
    [flip] = find_contradictions([hit(1, "Yes."), hit(2, "Not applicable."), hit(3, "No.")])
    assert flip.between == ("round 1", "round 3")
    assert flip.sentence == "Round 3 answers No where round 1 answered Yes."


def test_different_questionnaire_ids_are_never_compared():
    followups = [hit(3, "Yes.", questionnaire_id="CEK-03.1"),
                 hit(4, "No.", questionnaire_id="CEK-03.2")]
    assert find_contradictions(followups) == []


def test_one_questionnaire_id_is_one_question_whatever_its_wording():
    followups = [hit(3, "Yes.", questionnaire_id="CEK-03.1", question="Is data encrypted?"),
                 hit(4, "No.", questionnaire_id="cek\u201103.1 ", question="Still encrypted?")]
    [flip] = find_contradictions(followups)
    assert flip.questionnaire_id == "CEK-03.1"
    assert flip.sentence == "Round 4 answers No to CEK-03.1 where round 3 answered Yes."


def test_without_ids_a_yes_and_a_no_to_different_questions_are_not_compared():
    followups = [hit(3, "Yes.", question="Is TLS 1.2 required on every endpoint?"),
                 hit(4, "No.", question="Are TLS 1.0 or TLS 1.1 still accepted anywhere?")]
    assert find_contradictions(followups) == []


def test_a_vendor_going_back_and_forth_is_reported_once_at_its_newest_flip():
    [flip] = find_contradictions([hit(1, "Yes."), hit(2, "No."), hit(3, "Yes.")])
    assert flip.between == ("round 2", "round 3")
    assert flip.values == ("No", "Yes")


# Periods and numbers ----------------------------------------------------------------------

def test_equal_periods_in_other_words_are_no_contradiction():
    assert find_contradictions([hit(3, "Every 90 days.", question=ROTATION),
                                hit(4, "Quarterly.", question=ROTATION)]) == []
    assert find_contradictions([hit(2, "Annually.", question=ROTATION),
                                hit(3, "Every 12 months.", question=ROTATION),
                                hit(4, "Once a year.", question=ROTATION),
                                hit(5, "Keys rotate every 365 days.", question=ROTATION)]) == []


def test_a_different_period_is_flagged_with_what_it_is_about():
    [period] = find_contradictions([hit(3, "Every 90 days.", question=ROTATION),
                                    hit(4, "Annually.", question=ROTATION)])
    assert period.kind == "period"
    assert period.values == ("every 90 days", "annually")
    assert period.sentence == ("On key rotation, round 4 says annually where round 3 said "
                               "every 90 days.")


def test_a_round_silent_on_a_point_is_passed_over():
    [period] = find_contradictions([hit(2, "Every 90 days.", question=ROTATION),
                                    hit(3, "Yes, with AWS KMS.", question=ROTATION),
                                    hit(4, "Annually.", question=ROTATION)])
    assert period.between == ("round 2", "round 4")


def test_the_same_pair_of_periods_is_reported_once():
    answers = ["Every 90 days.", "Annually.", "Quarterly.", "Every 365 days."]
    found = find_contradictions([hit(n, a, question=ROTATION)
                                 for n, a in enumerate(answers, start=1)])
    assert [c.between for c in found] == [("round 3", "round 4")]


def test_a_bound_is_compared_only_with_a_bound_of_the_same_sense():
    question = "How quickly are critical vulnerabilities remediated?"
    assert find_contradictions([hit(3, "Within 30 days.", question=question),
                                hit(4, "15 days on average.", question=question)]) == []
    [deadline] = find_contradictions([hit(3, "Within 30 days.", question=question),
                                      hit(4, "Within 15 calendar days.", question=question)])
    assert deadline.sentence == ("On vulnerability remediation, round 4 says within 15 "
                                 "calendar days where round 3 said within 30 days.")


def test_a_recurrence_is_not_compared_with_a_duration():
    question = "How often are user access rights reviewed?"
    assert find_contradictions([hit(3, "Quarterly.", question=question),
                                hit(4, "Review records are kept for 3 years.",
                                    question=question)]) == []


def test_an_answer_giving_several_figures_of_one_sort_is_not_read_for_them():
    question = "How long are audit logs retained?"
    assert find_contradictions([
        hit(3, "13 months: 90 days searchable, the rest archived.", question=question),
        hit(4, "12 months.", question=question)]) == []


def test_numbers_with_the_same_unit_are_compared_and_bare_numbers_are_not():
    question = "What is the minimum password length?"
    [length] = find_contradictions([hit(3, "At least 12 characters.", question=question),
                                    hit(4, "At least 8 characters.", question=question)])
    assert length.kind == "number"
    assert length.values == ("at least 12 characters", "at least 8 characters")
    assert find_contradictions([hit(3, "12.", question=question),
                                hit(4, "8.", question=question)]) == []


def test_figures_of_different_questions_without_an_activity_are_not_compared():
    assert find_contradictions([hit(3, "99.9%", question="What is your uptime target?"),
                                hit(4, "80%", question="What share of staff use SSO?")]) == []


# Algorithms, key lengths, protocol versions -----------------------------------------------

def test_a_document_naming_another_key_length_than_the_newest_answer_is_flagged():
    [length] = find_contradictions(
        [hit(3, "We are migrating."), hit(4, "Yes, all data at rest uses AES-256.")],
        [doc("Customer data at rest is encrypted with AES-128.")])
    assert length == Contradiction(
        kind="key_length", between=("round 4", "encryption_standard.md"),
        values=("AES-256", "AES-128"), ids=("followup-4", "doc-1"), round_number=4,
        sentence="encryption_standard.md names AES-128 where round 4 names AES-256.",
        quotes=("Yes, all data at rest uses AES-256.",
                "Customer data at rest is encrypted with AES-128."))


def test_only_the_newest_round_is_compared_with_documents():
    followups = [hit(3, "Data at rest uses AES-128."), hit(4, "Data at rest uses AES-256.")]
    found = find_contradictions(followups, [doc("Storage uses 256-bit AES encryption.")])
    assert [c.between for c in found] == [("round 3", "round 4")]


def test_another_algorithm_of_the_same_role_is_flagged():
    [algorithm] = find_contradictions([hit(3, "Yes, AES."), hit(4, "Yes, 3DES.")])
    assert algorithm.kind == "algorithm"
    assert algorithm.sentence == "Round 4 names 3DES where round 3 named AES."


def test_algorithms_of_different_roles_are_not_compared():
    assert find_contradictions([hit(3, "Files are encrypted with AES-256."),
                                hit(4, "Checksums use SHA-256.")]) == []
    assert find_contradictions([hit(4, "Passwords are hashed with bcrypt.")],
                               [doc("Backups are encrypted with AES-256.")]) == []


def test_a_hash_family_name_agrees_with_its_members_and_lengths_are_not_algorithms():
    assert find_contradictions([hit(3, "Integrity uses SHA-2."),
                                hit(4, "Integrity uses SHA-256.")]) == []
    [length] = find_contradictions([hit(3, "AES-256."), hit(4, "AES-128.")])
    assert length.kind == "key_length"


def test_rsa_securid_is_not_rsa():
    assert find_contradictions([hit(3, "Signing uses ECDSA."),
                                hit(4, "Admins sign in with RSA SecurID tokens.")]) == []


def test_a_lower_tls_version_than_the_stated_minimum_is_flagged():
    [tls] = find_contradictions(
        [hit(4, "Yes, TLS 1.0 is still accepted for legacy clients.")],
        [doc("All external connections use TLS 1.2 or higher.")])
    assert tls.kind == "protocol_version"
    assert tls.values == ("TLS 1.0", "TLS 1.2")
    assert tls.sentence == ("encryption_standard.md gives TLS 1.2 as the lowest version where "
                            "round 4 gives TLS 1.0.")
    [between_rounds] = find_contradictions([hit(3, "TLS 1.2 minimum."),
                                            hit(4, "TLS 1.0 and above.")])
    assert between_rounds.sentence == ("Round 4 gives TLS 1.0 as the lowest version where "
                                       "round 3 gave TLS 1.2.")


def test_disabled_versions_and_versions_above_the_minimum_are_no_contradiction():
    standard = doc("Connections use TLS version 1.2 or higher. TLS 1.0 and 1.1 are disabled "
                   "at the edge.")
    assert find_contradictions(
        [hit(4, "Public endpoints accept only TLS 1.2 and TLS 1.3; TLS 1.0 and 1.1 were "
                "switched off in 2021.")], [standard]) == []
    assert find_contradictions([hit(4, "The API uses TLS 1.3.")], [standard]) == []
    assert find_contradictions([hit(3, "The API uses TLS 1.3."),
                                hit(4, "The website uses TLS 1.2.")]) == []


def test_a_period_in_a_document_is_compared_when_it_is_about_the_same_thing():
    [period] = find_contradictions(
        [hit(4, "Every 90 days.", question=ROTATION)],
        [doc("Customer data encryption keys are rotated automatically every year.",
             page=3)])
    assert period.between == ("round 4", "encryption_standard.md, page 3")
    assert period.sentence == ("On key rotation, encryption_standard.md, page 3 says every "
                               "year where round 4 says every 90 days.")
    assert find_contradictions(
        [hit(4, "Every 90 days.", question=ROTATION)],
        [doc("Access to other applications is reviewed every six months.")]) == []


def test_documents_are_not_read_for_yes_or_no_and_follow_up_excerpts_are_not_documents():
    followup_excerpt = Candidate(
        id="followup-2", type="followup_response:2", source="Follow-up Questionnaire Round 2",
        text="Question: ... Answer: We use AES-128.",
        metadata={"source_type": FOLLOWUP_SOURCE_TYPE})
    found = find_contradictions([hit(4, "Yes, AES-256.")],
                                [doc("No."), followup_excerpt])
    assert found == []


def test_newest_first():
    followups = [hit(1, "Yes.", questionnaire_id="A.1"), hit(2, "No.", questionnaire_id="A.1"),
                 hit(3, "AES.", questionnaire_id="B.1"), hit(5, "3DES.", questionnaire_id="B.1"),
                 hit(4, "Yes, AES-256.", questionnaire_id="C.1")]
    found = find_contradictions(followups, [doc("AES-128 everywhere.")])
    assert [(c.kind, c.between) for c in found] == [
        ("algorithm", ("round 3", "round 5")),
        ("algorithm", ("round 5", "encryption_standard.md")),
        ("key_length", ("round 4", "encryption_standard.md")),
        ("yes_no", ("round 1", "round 2"))]


# Properties -------------------------------------------------------------------------------

ANSWER_WORDS = st.sampled_from([
    "Yes", "No", "N/A", ".", ",", ";", "\n", " ", "\u00a0", "every", "90", "days", "annually",
    "quarterly", "once a year", "within", "at least", "keys", "rotated", "logs", "kept",
    "AES-128", "AES-256", "256-bit", "3DES", "RSA 2048", "SHA-1", "SHA-2", "bcrypt", "TLS 1.0",
    "TLS 1.2", "or higher", "only", "disabled", "not", "12 characters", "99.9%", "5 attempts",
    "twice a year", "13 months", "\u2019", "\u201c", "-"])
ANSWERS = st.one_of(st.text(max_size=300), st.lists(ANSWER_WORDS, max_size=40).map(" ".join))


@settings(max_examples=200, deadline=None)
@given(answer=ANSWERS, question=st.text(max_size=80),
       questionnaire_id=st.one_of(st.none(), st.text(max_size=10)))
def test_identical_answers_never_contradict_themselves(answer, question, questionnaire_id):
    followups = [hit(round_number, answer, question=question,
                     questionnaire_id=questionnaire_id) for round_number in (1, 2, 3)]
    assert find_contradictions(followups, [doc(answer)]) == []


@settings(max_examples=200, deadline=None)
@given(answers=st.lists(ANSWERS, min_size=1, max_size=4), document=ANSWERS,
       questions=st.lists(st.text(max_size=40), min_size=4, max_size=4),
       ids=st.lists(st.one_of(st.none(), st.sampled_from(["A.1", "a.1", "B.2"])), min_size=4,
                    max_size=4))
def test_arbitrary_text_never_raises_and_every_finding_reads_as_a_sentence(
        answers, document, questions, ids):
    followups = [hit(n, answer, question=questions[n - 1], questionnaire_id=ids[n - 1],
                     hit_id=f"f{n}") for n, answer in enumerate(answers, start=1)]
    for contradiction in find_contradictions(followups, [doc(document)]):
        assert contradiction.sentence.endswith(".")
        assert contradiction.values[0] != contradiction.values[1]
        assert set(contradiction.ids) <= {f.id for f in followups} | {"doc-1"}


# Answers to one criterion across rounds ---------------------------------------------------

def test_one_key_length_contradicts_another_named_beside_it_in_an_earlier_round():
    """The sample's acme rounds 3 and 5: round 3 corrects earlier answers (AES-128 for most
    data, AES-256 only for PII, a migration under way); round 5 says the migration completed.
    The migration's target counts once it is done, and a single length stated later
    contradicts another length stated earlier, though the earlier round also named it."""
    earlier = ("We need to correct our earlier answers. Most stored data is encrypted with "
               "AES-128. AES-256 is currently applied only to stores that hold PII. A "
               "migration of all remaining tiers to AES-256 is under way and is planned to "
               "finish in February.")
    later = ("Confirmed. Migration to AES-256 completed on 2024-02-09 for all storage tiers, "
             "including backups.")
    [found] = find_contradictions([hit(3, earlier), hit(4, "Yes."), hit(5, later)])
    assert found.kind == "key_length"
    assert found.between == ("round 3", "round 5")
    assert found.values == ("AES-128", "AES-256")
    assert found.sentence == "Round 5 names AES-256 where round 3 named AES-128."
    assert found.quotes == ("Most stored data is encrypted with AES-128.",
                            "Migration to AES-256 completed on 2024-02-09 for all storage "
                            "tiers, including backups.")


def test_a_migration_not_yet_done_does_not_state_what_is_in_use():
    assert find_contradictions([
        hit(3, "All data at rest uses AES-128."),
        hit(4, "A migration to AES-256 is under way and will finish next year.")]) == []


def test_two_rounds_naming_the_same_lengths_do_not_contradict():
    assert find_contradictions([hit(3, "AES-256 for data and AES-128 for caches."),
                                hit(4, "We use AES-256 and AES-128, as before.")]) == []
