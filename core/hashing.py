"""Criterion and content hashes, and the embedded follow-up text (seed 003). How similar two
texts are is `core.retrieval.tiers`'s.

A criterion pasted from Word, Excel or a web page carries typography the same criterion
typed does not: curly quotes, en dashes, zero-width characters, ligatures, full-width
letters, another Unicode normal form. `criterion_hash` stays the contract's hash of the
text as written; `canonical_criterion_hash` is the hash of its typography folded to plain
characters, and follow-ups link to a criterion by that."""

from __future__ import annotations

import hashlib
import unicodedata

# Typographic characters -> (the plain character, or "" for an invisible one; how a reason
# names the variant). Applied before NFKC and again after it, since NFKC turns some
# characters into others of this table (a double prime into two primes, a non-breaking
# hyphen into a hyphen, a small em dash into an em dash).
TYPOGRAPHY: dict[str, tuple[str, str]] = {
    "\u2018": ("'", "left single quote \u2018 for '"),
    "\u2019": ("'", "curly apostrophe \u2019 for '"),
    "\u201a": ("'", "low single quote \u201a for '"),
    "\u201b": ("'", "reversed single quote \u201b for '"),
    "\u2032": ("'", "prime \u2032 for '"),
    "\u2035": ("'", "reversed prime \u2035 for '"),
    "\u2039": ("'", "single angle quote \u2039 for '"),
    "\u203a": ("'", "single angle quote \u203a for '"),
    "\u02bc": ("'", "modifier letter apostrophe \u02bc for '"),
    "\u201c": ('"', 'left double quote \u201c for "'),
    "\u201d": ('"', 'right double quote \u201d for "'),
    "\u201e": ('"', 'low double quote \u201e for "'),
    "\u201f": ('"', 'reversed double quote \u201f for "'),
    "\u2033": ('"', 'double prime \u2033 for "'),
    "\u2036": ('"', 'reversed double prime \u2036 for "'),
    "\u00ab": ('"', 'guillemet \u00ab for "'),
    "\u00bb": ('"', 'guillemet \u00bb for "'),
    "\u2010": ("-", "hyphen \u2010 for -"),
    "\u2011": ("-", "non-breaking hyphen \u2011 for -"),
    "\u2012": ("-", "figure dash \u2012 for -"),
    "\u2013": ("-", "en dash \u2013 for -"),
    "\u2014": ("-", "em dash \u2014 for -"),
    "\u2015": ("-", "horizontal bar \u2015 for -"),
    "\u2212": ("-", "minus sign \u2212 for -"),
    "\u00a0": (" ", "non-breaking space"),
    "\u2007": (" ", "figure space"),
    "\u202f": (" ", "narrow non-breaking space"),
    "\u205f": (" ", "medium mathematical space"),
    "\u3000": (" ", "ideographic space"),
    **{chr(code): (" ", f"{unicodedata.name(chr(code)).lower()}")
       for code in range(0x2000, 0x200B)},
    "\u200b": ("", "zero-width space removed"),
    "\u200c": ("", "zero-width non-joiner removed"),
    "\u200d": ("", "zero-width joiner removed"),
    "\u2060": ("", "word joiner removed"),
    "\ufeff": ("", "zero-width no-break space removed"),
    "\u00ad": ("", "soft hyphen removed"),
}
_FOLD = str.maketrans({char: plain for char, (plain, _label) in TYPOGRAPHY.items()})


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


def fold_typography(text: str) -> str:
    """The text with its typography made plain: NFKC (ligatures, full-width forms, the
    ellipsis, compatibility spaces), curly and angle quotes and primes to ' and ", dashes and
    the minus sign to -, Unicode spaces to a space, zero-width characters and the soft
    hyphen removed. Plain ASCII is returned unchanged."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text.translate(_FOLD)).translate(_FOLD)


def canonical_criterion_hash(text: str) -> str:
    """The hash typographic variants of a criterion share: the 16-hex-digit hash of the text
    normalised, folded (`fold_typography`) and normalised again. Texts with the same
    `criterion_hash` always have the same canonical hash."""
    return short_hash(normalize_text(fold_typography(normalize_text(text))))


def canonical_criterion_question_hash(criterion_question_text: str | None) -> str | None:
    """The canonical hash a follow-up links by; None for an ad-hoc question."""
    if not criterion_question_text:
        return None
    return canonical_criterion_hash(criterion_question_text)


def content_hash(criterion_question_text: str | None, question_text: str) -> str:
    """Seed 003's uniqueness key: the criterion and the question, normalised together."""
    return short_hash(normalize_text(f"{criterion_question_text or ''}||{question_text}"))


def response_key(criterion_question_text: str | None, question_text: str,
                 questionnaire_id: str | None = None, sheet: str | None = None) -> str:
    """A response's identity in its round: seed 003's content hash, and for a response with
    a questionnaire id the id with it (one question asked under several ids is several
    answers), and the sheet for an id a file answers on several sheets."""
    if not questionnaire_id:
        return content_hash(criterion_question_text, question_text)
    where = f"{sheet}||" if sheet else ""
    return short_hash(normalize_text(
        f"{questionnaire_id}||{where}{criterion_question_text or ''}||{question_text}"))


def format_embedding_content(question_text: str, answer_text: str) -> str:
    """The text embedded for a follow-up: prefixes give the model the structure."""
    return f"Question: {question_text} Answer: {answer_text}"


def file_digest(data: bytes) -> str:
    """SHA-256 of a file's bytes: the version of a document."""
    return hashlib.sha256(data).hexdigest()
