"""How close two texts are, and how they differ, in the words a tier's reason uses: a follow-up
question's similarity to the criterion (seed 003's difflib ratio), a linked criterion text's
similarity to this one, the typos that make it this criterion, and the typography that makes
it the same one."""

from __future__ import annotations

import difflib
import re
import unicodedata

from core.hashing import TYPOGRAPHY, fold_typography, normalize_text

_WORD = re.compile(r"[a-z0-9]+")
_NFD_LABEL = "Unicode NFD form"


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
    if char in TYPOGRAPHY:
        return TYPOGRAPHY[char][1]
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
    return f"compatibility character {char} for {fold_typography(plain)}"


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


