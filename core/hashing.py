"""Criterion and content hashes, and the embedded follow-up text (seed 003).

A criterion pasted from Word, Excel or a web page carries typography the same criterion
typed does not: curly quotes, en dashes, zero-width characters, ligatures, full-width
letters, another Unicode normal form. `criterion_hash` stays the contract's hash of the
text as written; `canonical_criterion_hash` is the hash of its typography folded to plain
characters, and follow-ups link to a criterion by that."""

from __future__ import annotations

import difflib
import hashlib
import re
import unicodedata

_WORD = re.compile(r"[a-z0-9]+")

# Typographic characters -> (the plain character, or "" for an invisible one; how a reason
# names the variant). Applied before NFKC and again after it, since NFKC turns some
# characters into others of this table (a double prime into two primes, a non-breaking
# hyphen into a hyphen, a small em dash into an em dash).
_TYPOGRAPHY: dict[str, tuple[str, str]] = {
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
_FOLD = str.maketrans({char: plain for char, (plain, _label) in _TYPOGRAPHY.items()})
_NFD_LABEL = "Unicode NFD form"


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


def typographic_differences(text: str, other: str) -> list[str]:
    """How two texts that fold alike differ, by name, in the order met: "curly apostrophe ’
    for '", "zero-width space removed", "Unicode NFD form", "ligature ﬁ for fi"... Each
    name says which typographic character stands where the other text has a plain one (or
    none), whichever text carries it. Empty when the texts are the same up to case and white
    space."""
    first, second = normalize_text(text), normalize_text(other)
    if first == second:
        return []
    labels: list[str] = []
    composed = [unicodedata.normalize("NFC", t) for t in (first, second)]
    decomposed = [c != t for c, t in zip(composed, (first, second), strict=True)]
    if any(decomposed) and (decomposed[0] != decomposed[1] or composed[0] == composed[1]):
        labels.append(_NFD_LABEL)
    a, b = composed
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for char in a[i1:i2] + b[j1:j2]:
            label = _variant_label(char)
            if label and label not in labels:
                labels.append(label)
    if not labels and a != b:  # reached only by texts that do not fold alike
        labels.append("other characters differ")
    return labels


def _variant_label(char: str) -> str | None:
    """How a reason names one typographic character; None for a plain one."""
    if char in _TYPOGRAPHY:
        return _TYPOGRAPHY[char][1]
    if unicodedata.combining(char):  # an accent NFC could not compose (a character between)
        return _NFD_LABEL
    plain = unicodedata.normalize("NFKC", char)
    if plain == char:
        return None
    if "\uff01" <= char <= "\uff5e":
        return "full-width characters"
    if "\ufb00" <= char <= "\ufb4f":
        return f"ligature {char} for {plain}"
    if char == "\u2026":
        return "ellipsis \u2026 for ..."
    return f"compatibility character {char} for {plain.translate(_FOLD)}"


def content_hash(criterion_question_text: str | None, question_text: str) -> str:
    """Seed 003's uniqueness key: the criterion and the question, normalised together."""
    return short_hash(normalize_text(f"{criterion_question_text or ''}||{question_text}"))


def format_embedding_content(question_text: str, answer_text: str) -> str:
    """The text embedded for a follow-up: prefixes give the model the structure."""
    return f"Question: {question_text} Answer: {answer_text}"


def question_similarity(criterion: str, question: str) -> float:
    """difflib ratio of the lower-cased criterion and follow-up question (seed 003), their
    typography folded first so a pasted criterion scores as the typed one."""
    return difflib.SequenceMatcher(None, fold_typography(criterion).lower(),
                                   fold_typography(question).lower()).ratio()


def criterion_similarity(criterion: str, other: str, *, at_least: float = 0.0) -> float:
    """difflib ratio of two criterion texts after normalising case and white space.

    With `at_least`, pairs that cannot reach it are answered 0.0 by the cheap upper bounds.
    Typography is folded first, as for the canonical hash."""
    matcher = difflib.SequenceMatcher(None, _folded(criterion), _folded(other))
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
    criterion asks, however similar the characters are. Typography is folded first; an
    empty list means the same words with other punctuation."""
    words, others = _WORD.findall(_folded(criterion)), _WORD.findall(_folded(other))
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


def _folded(text: str) -> str:
    """The text as the canonical hash reads it (normalised, folded, normalised)."""
    return normalize_text(fold_typography(normalize_text(text)))


def file_digest(data: bytes) -> str:
    """SHA-256 of a file's bytes: the version of a document."""
    return hashlib.sha256(data).hexdigest()
