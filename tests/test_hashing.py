"""Criterion and content hashes, the embedded follow-up text, and question similarity."""

from __future__ import annotations

import difflib
import hashlib
import re

import pytest

from core.config import Settings
from core.hashing import (
    content_hash,
    criterion_hash,
    criterion_question_hash,
    format_embedding_content,
)
from core.retrieval.tiers import question_similarity
from tests.conftest import AES_CRITERION

HEX16 = re.compile(r"[0-9a-f]{16}")
# What precedence accepts as a typo, as the settings give it.
SETTINGS = Settings()
TYPOS = {"word_similarity": SETTINGS.typo_word_similarity, "max_words": SETTINGS.typo_max_words}


def _expected(text: str) -> str:
    """Seed 003's compute_criterion_question_hash, written out independently."""
    normalized = re.sub(r"\s+", " ", text.lower()).strip()
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()[:16]


def test_criterion_hash_is_16_hex_digits_of_sha256_of_normalised_text():
    value = criterion_hash(AES_CRITERION)
    assert HEX16.fullmatch(value)
    assert value == hashlib.sha256(
        b"does the vendor encrypt data at rest using aes-256?").hexdigest()[:16]
    assert value == _expected(AES_CRITERION)


@pytest.mark.parametrize("variant", [
    "DOES THE VENDOR ENCRYPT DATA AT REST USING AES-256?",
    "  Does the vendor encrypt data at rest using AES-256?  ",
    "Does  the\tvendor\nencrypt data   at rest using AES-256?",
    "\n\tdoes the VENDOR encrypt data at rest using aes-256?\r\n",
])
def test_case_and_spacing_differences_link(variant):
    assert criterion_hash(variant) == criterion_hash(AES_CRITERION)
    assert criterion_hash(variant) == _expected(variant)


@pytest.mark.parametrize("edited", [
    "Does the vendor encrypt data at rest using AES256?",  # one character
    "Does the vendor encrypt data at rest using AES-256",  # punctuation dropped
    "Does the vendor encrypt all data at rest using AES-256?",  # one word added
    "Does the vendor encrypt data in transit using AES-256?",  # one word changed
])
def test_any_other_edit_does_not_link(edited):
    assert criterion_hash(edited) != criterion_hash(AES_CRITERION)


def test_typo_fix_does_not_link():
    typo = "Does the vendor enforce multi-factor authentcation for all administrative access?"
    fixed = "Does the vendor enforce multi-factor authentication for all administrative access?"
    assert criterion_hash(typo) != criterion_hash(fixed)
    assert criterion_hash(fixed) == _expected(fixed)


def test_criterion_question_hash_matches_criterion_hash_for_linked_text():
    assert criterion_question_hash(AES_CRITERION) == _expected(AES_CRITERION)


@pytest.mark.parametrize("ad_hoc", [None, ""])
def test_criterion_question_hash_is_none_for_ad_hoc(ad_hoc):
    assert criterion_question_hash(ad_hoc) is None


def test_content_hash_is_seed_003_formula():
    question = "Please describe your encryption practices"
    expected = _expected(f"{AES_CRITERION}||{question}")
    assert content_hash(AES_CRITERION, question) == expected
    assert content_hash(None, question) == _expected(f"||{question}")


def test_content_hash_differs_for_same_criterion_with_different_question():
    first = content_hash(AES_CRITERION, "Please describe your encryption practices")
    second = content_hash(AES_CRITERION, "Which key management service do you use?")
    assert first != second


def test_content_hash_differs_for_ad_hoc_and_linked_same_question():
    question = "Please describe your encryption practices"
    assert content_hash(None, question) != content_hash(AES_CRITERION, question)
    assert content_hash("", question) == content_hash(None, question)


def test_content_hash_ignores_case_and_spacing():
    assert content_hash(AES_CRITERION, "Please describe  your ENCRYPTION practices") == \
        content_hash(AES_CRITERION.upper(), "please describe your encryption practices ")


def test_format_embedding_content():
    assert format_embedding_content(
        "Please describe your encryption practices",
        "We use AES-256 for all data at rest with AWS KMS.",
    ) == ("Question: Please describe your encryption practices "
          "Answer: We use AES-256 for all data at rest with AWS KMS.")


def test_question_similarity_identical_is_one():
    assert question_similarity(AES_CRITERION, AES_CRITERION) == 1.0
    assert question_similarity(AES_CRITERION, AES_CRITERION.upper()) == 1.0


def test_question_similarity_is_difflib_ratio_of_lowercased_text():
    question = "Please provide documentation showing your AES-256 configuration."
    expected = difflib.SequenceMatcher(None, AES_CRITERION.lower(), question.lower()).ratio()
    assert question_similarity(AES_CRITERION, question) == pytest.approx(expected)


def test_heavily_reworded_question_is_below_threshold():
    similarity = question_similarity(AES_CRITERION, "Please describe ALL your security practices.")
    assert similarity < 0.7
    assert similarity == pytest.approx(0.3368421052631579)


def test_lightly_edited_question_is_above_threshold():
    assert question_similarity(
        AES_CRITERION, "Does the vendor encrypt data at rest with AES-256?") >= 0.7


# Typo corrections: what precedence accepts as "the same criterion, misspelt" -------------

@pytest.mark.parametrize("linked, fixed", [
    ("Does the vendor enforce multi-factor authentcation for all administrative access?",
     [("authentcation", "authentication")]),
    ("Does the vendor encrpyt data at rest using AES-256?", [("encrpyt", "encrypt")]),
    ("Does the vendor encrypt data at rest using AES-256", []),  # punctuation only
])
def test_typo_corrections_names_the_corrected_words(linked, fixed):
    from core.retrieval.tiers import typo_corrections

    criterion = linked.replace("authentcation", "authentication").replace("encrpyt", "encrypt")
    if not criterion.endswith("?"):
        criterion += "?"
    assert typo_corrections(criterion, linked, **TYPOS) == fixed


@pytest.mark.parametrize("criterion, linked", [
    ("Does the vendor encrypt data at rest using AES-256?",
     "Does the vendor encrypt data at rest using AES-128?"),
    ("Does the vendor retain audit logs for at least 12 months?",
     "Does the vendor retain audit logs for at least 6 months?"),
    ("Does the vendor have a current SOC 2 Type II report?",
     "Does the vendor have a SOC 2 Type I report?"),
    ("Does the vendor encrypt data at rest using AES-256?",
     "Does the vendor encrypt all data at rest using AES-256?"),
    ("Does the vendor encrypt data at rest using AES-256?",
     "Does the vendor encrypt data in transit using TLS 1.2 or higher?"),
    ("Does the vendor encrypt data at rest using AES-256?",
     "Does the vendor decrypt data at rest using AES-256?"),
])
def test_edits_that_change_the_question_are_not_typos(criterion, linked):
    from core.retrieval.tiers import criterion_similarity, typo_corrections

    assert typo_corrections(criterion, linked, **TYPOS) is None
    if "TLS" not in linked:  # character similarity alone would have called these the same
        assert criterion_similarity(criterion, linked) >= 0.9
