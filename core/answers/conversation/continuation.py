"""Does a question continue the previous answer's topic? (seed 001's isFollowUp, called a
continuation here: a "follow-up" is a questionnaire answer in this codebase.)

Without a language model the decision is made by rules a reader can check, in this order:
the first question of a conversation continues nothing; an opening that announces a new
topic ("now", "moving on", "switching to") starts one; a question with no subject words of
its own ("Can you elaborate on that?") refers to the previous answer; otherwise the question
must refer back (a reference word such as "it" or "those", an opener such as "and" or "what
about", or only a few words) AND the previous answer's evidence must be about as close to it
as the best match in the whole store (within `continuation_margin`), or the store holds
closer evidence elsewhere and the question starts a new topic. Every decision carries its
reason in one sentence.

A continuation is searched with the previous question's subject words added (TREC CAsT's
historical query expansion, in its simplest form), so "Can you elaborate on that?" searches
for what "that" was."""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.answers.conversation.models import Continuation

_WORD = re.compile(r"[a-z0-9][a-z0-9'-]*")
REFERENCE_WORDS = frozenset({
    "it", "its", "that", "this", "those", "these", "they", "them", "their", "there", "such",
    "same", "above", "former", "latter", "previous", "mentioned", "one", "ones", "he", "she",
})
OPENERS = ("and", "also", "what about", "how about", "then", "so", "but", "plus", "what else",
           "anything else", "more on", "and what", "what if")
SHIFT_OPENERS = ("now", "moving on", "switching", "switch to", "next topic", "new topic",
                 "different topic", "another topic", "unrelated", "separately", "turning to",
                 "let's talk about", "lets talk about", "on another note", "changing the subject")
# Words that ask without saying what about: a question made only of these has no subject.
FILLER = frozenset({
    "a", "about", "additional", "all", "an", "any", "are", "as", "at", "be", "been", "by",
    "can", "clarify", "could", "describe", "detail", "details", "do", "does", "elaborate",
    "example", "examples", "explain", "for", "further", "give", "go", "have", "how", "i",
    "in", "info", "information", "is", "it's", "just", "know", "like", "me", "mean", "more",
    "much", "of", "on", "or", "please", "point", "say", "said", "specific", "specifically",
    "tell", "than", "thanks", "the", "to", "us", "want", "was", "we", "were", "what",
    "what's", "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
    "deeper", "dig", "expand", "else", "again", "really", "exactly", "part", "bit", "little",
    "also", "and", "so", "but", "then", "ok", "okay", "yes", "no", "vendor", "vendor's",
    "their", "they", "them", "its", "did", "done", "has", "had", "get", "there", "here",
})


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def subject_words(text: str) -> list[str]:
    """The words that say what a question is about (not how it asks, not what it points to)."""
    return [w for w in words(text) if w not in FILLER and w not in REFERENCE_WORDS]


def _opening(text: str, openers: tuple[str, ...]) -> str | None:
    lowered = " ".join(words(text))
    for opener in sorted(openers, key=len, reverse=True):
        if lowered == opener or lowered.startswith(opener + " "):
            return opener
    return None


@dataclass(frozen=True)
class Closeness:
    """Cosine of the question to the previous answer's evidence and to the store's best."""

    previous: float
    store: float


def decide(question: str, *, has_previous: bool, closeness: Closeness | None,
           margin: float, short_words: int) -> Continuation:
    """The deterministic continuation decision, with its reason in one sentence."""
    if not has_previous:
        return Continuation(is_continuation=False, decided_by="first_turn",
                            reason="It is the first question of the conversation.")
    shift = _opening(question, SHIFT_OPENERS)
    if shift:
        return Continuation(is_continuation=False, decided_by="rules",
                            reason=f"It opens with \u201c{shift}\u201d, which announces a new "
                                   "topic.", signals={"shift_opener": shift})
    subject = subject_words(question)
    signals: dict[str, object] = {"subject_words": subject}
    if not subject:
        pointer = next((w for w in words(question) if w in REFERENCE_WORDS), None)
        what = f"points back with \u201c{pointer}\u201d" if pointer else "names no subject"
        return Continuation(is_continuation=True, decided_by="rules", signals=signals,
                            reason=f"It {what} and has no subject words of its own, so it "
                                   "asks about the previous answer.")
    reference = next((w for w in words(question) if w in REFERENCE_WORDS), None)
    opener = _opening(question, OPENERS)
    short = len(words(question)) <= short_words
    cue = (f"refers back with \u201c{reference}\u201d" if reference else
           f"opens with \u201c{opener}\u201d" if opener else
           f"is only {len(words(question))} words long" if short else None)
    signals.update({"reference_word": reference, "opener": opener, "short": short})
    if closeness is not None:
        signals.update({"previous_evidence_cosine": round(closeness.previous, 4),
                        "store_best_cosine": round(closeness.store, 4), "margin": margin})
    if cue is None:
        return Continuation(is_continuation=False, decided_by="rules", signals=signals,
                            reason="It names its own subject (" + ", ".join(subject[:4])
                                   + ") without pointing back to the previous answer.")
    if closeness is None:
        return Continuation(is_continuation=True, decided_by="rules", signals=signals,
                            reason=f"It {cue}, and no evidence was at hand to say otherwise.")
    gap = closeness.store - closeness.previous
    if gap <= margin:
        return Continuation(
            is_continuation=True, decided_by="rules", signals=signals,
            reason=f"It {cue}, and the previous answer's evidence is as close to it "
                   f"({closeness.previous:.2f}) as the store's best match ({closeness.store:.2f}).")
    return Continuation(
        is_continuation=False, decided_by="rules", signals=signals,
        reason=f"It {cue}, but the store holds closer evidence ({closeness.store:.2f}) than the "
               f"previous answer's ({closeness.previous:.2f}), so it starts a new topic.")


def expanded_query(question: str, previous_question: str) -> str:
    """The question with the previous question's subject words it lacks (HQE)."""
    own = set(subject_words(question))
    carried = [w for w in dict.fromkeys(subject_words(previous_question)) if w not in own]
    return f"{question} {' '.join(carried)}".strip() if carried else question
