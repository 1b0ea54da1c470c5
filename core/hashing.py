"""Criterion and content hashes, and the embedded follow-up text (seed 003)."""

from __future__ import annotations

import difflib
import hashlib
import re

_WORD = re.compile(r"[a-z0-9]+")


def normalize_text(text: str) -> str:
    """Lower-case, collapse runs of white space to one space, trim the ends."""
    return " ".join(text.lower().split())


def short_hash(text: str) -> str:
    """The first 16 hex digits of the text's SHA-256: every short id and hash in the store."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def criterion_hash(criterion_question_text: str) -> str:
    """The 16-hex-digit hash that links a follow-up to the criterion it answers."""
    return short_hash(normalize_text(criterion_question_text))


def criterion_question_hash(criterion_question_text: str | None) -> str | None:
    """Seed 003's hash for retrieval filtering; None for an ad-hoc question."""
    if not criterion_question_text:
        return None
    return criterion_hash(criterion_question_text)


def content_hash(criterion_question_text: str | None, question_text: str) -> str:
    """Seed 003's uniqueness key: the criterion and the question, normalised together."""
    return short_hash(normalize_text(f"{criterion_question_text or ''}||{question_text}"))


def format_embedding_content(question_text: str, answer_text: str) -> str:
    """The text embedded for a follow-up: prefixes give the model the structure."""
    return f"Question: {question_text} Answer: {answer_text}"


def question_similarity(criterion: str, question: str) -> float:
    """difflib ratio of the lower-cased criterion and follow-up question (seed 003)."""
    return difflib.SequenceMatcher(None, criterion.lower(), question.lower()).ratio()


def criterion_similarity(criterion: str, other: str, *, at_least: float = 0.0) -> float:
    """difflib ratio of two criterion texts after normalising case and white space.

    With `at_least`, pairs that cannot reach it are answered 0.0 by the cheap upper bounds."""
    matcher = difflib.SequenceMatcher(None, normalize_text(criterion), normalize_text(other))
    if at_least and (matcher.real_quick_ratio() < at_least or matcher.quick_ratio() < at_least):
        return 0.0
    return matcher.ratio()


def typo_corrections(criterion: str, other: str, *, word_similarity: float = 0.75,
                     max_words: int = 2) -> list[tuple[str, str]] | None:
    """The (other, criterion) word pairs when the two texts differ only by typos, else None.

    Same words in the same order; at most `max_words` differ, each a spelling slip (same
    first letter, similar spelling) of a word of four or more letters with no digits.
    "authentcation" -> "authentication" qualifies; "AES-128" -> "AES-256", "6 months" ->
    "12 months", encrypt -> decrypt or an added word do not: those change what the
    criterion asks, however similar the characters are."""
    words, others = _WORD.findall(criterion.lower()), _WORD.findall(other.lower())
    if len(words) != len(others):
        return None
    pairs = [(o, w) for w, o in zip(words, others, strict=True) if w != o]
    if len(pairs) > max_words:
        return None
    for typo, word in pairs:
        if min(len(typo), len(word)) < 4 or any(ch.isdigit() for ch in typo + word):
            return None
        if typo[0] != word[0]:  # misspellings keep the first letter; encrypt/decrypt do not
            return None
        if difflib.SequenceMatcher(None, typo, word).ratio() < word_similarity:
            return None
    return pairs


def file_digest(data: bytes) -> str:
    """SHA-256 of a file's bytes: the version of a document."""
    return hashlib.sha256(data).hexdigest()
