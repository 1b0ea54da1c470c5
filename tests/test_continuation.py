"""The deterministic continuation decision: each rule, its one-sentence reason, and the
query expansion of a continuation."""

from __future__ import annotations

import pytest

from core.answers.conversation.continuation import Closeness, decide, expanded_query, subject_words

CLOSE = Closeness(previous=0.55, store=0.58)
FAR = Closeness(previous=0.20, store=0.61)


def rule(question: str, closeness: Closeness | None = CLOSE, *, has_previous: bool = True):
    return decide(question, has_previous=has_previous, closeness=closeness, margin=0.08,
                  short_words=4)


def test_the_first_question_continues_nothing():
    decision = rule("Can you elaborate on that?", has_previous=False)
    assert not decision.is_continuation and decision.decided_by == "first_turn"


@pytest.mark.parametrize("question", ["Can you elaborate on that?", "Tell me more.", "Why?",
                                      "Can you clarify that point?", "More details please."])
def test_a_question_without_subject_words_asks_about_the_previous_answer(question):
    decision = rule(question, FAR)  # whatever the store holds
    assert decision.is_continuation and decision.decided_by == "rules"
    assert decision.reason.endswith("so it asks about the previous answer.")


@pytest.mark.parametrize("question", ["Now tell me about Topic B",
                                      "Moving on: how long are audit logs retained?",
                                      "Switching to vendors: how are subprocessors assessed?"])
def test_an_opening_that_announces_a_new_topic_starts_one(question):
    decision = rule(question, CLOSE)
    assert not decision.is_continuation
    assert "announces a new topic" in decision.reason


def test_a_reference_word_with_close_previous_evidence_is_a_continuation():
    decision = rule("How often are they tested?", CLOSE)
    assert decision.is_continuation
    assert "\u201cthey\u201d" in decision.reason and "0.55" in decision.reason


def test_a_reference_word_with_closer_evidence_elsewhere_starts_a_new_topic():
    decision = rule("What about badge access to it?", FAR)
    assert not decision.is_continuation
    assert decision.reason.endswith("so it starts a new topic.")


def test_a_question_with_its_own_subject_and_no_pointer_is_standalone():
    decision = rule("How does Acme respond to a security incident?", CLOSE)
    assert not decision.is_continuation
    assert "without pointing back" in decision.reason


def test_every_reason_is_one_sentence():
    for question in ["Why?", "How often are they tested?", "Now what about badges?",
                     "Is training required?", "And removed?"]:
        for closeness in (CLOSE, FAR, None):
            reason = rule(question, closeness).reason
            assert "\n" not in reason and reason.endswith(".") and reason.count(". ") == 0


def test_a_continuation_searches_with_the_previous_questions_subject():
    query = expanded_query("Can you elaborate on that?", "How are backups protected?")
    assert query == "Can you elaborate on that? backups protected"
    assert expanded_query("How are backups encrypted?", "How are backups protected?") == (
        "How are backups encrypted? protected")


def test_subject_words_leave_out_how_a_question_asks():
    assert subject_words("Can you tell me more about their AES-256 keys?") == ["aes-256",
                                                                               "keys"]
