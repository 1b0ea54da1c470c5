"""Does a question lean on the conversation, and does it continue the previous answer's topic?
(seed 001's needsReformulation and isFollowUp; a "follow-up" is a questionnaire answer in this
codebase, so the second is called a continuation here.)

Without a language model both are decided by a sum of parts a reader can check, each with
its weight and the words that triggered it, recorded in the turn:

- A later turn leans on the conversation unless it says otherwise (`LEAN`): in real
  conversations most questions after the first do.
- What makes a question lean on the conversation: a pronoun or demonstrative pointing outside
  it ("How often are they tested?"), no subject words of its own ("Tell me more."), a definite
  noun phrase nothing in the question introduces ("Who is on the response team?"), a relational
  noun without its complement ("What are the exceptions?"), an additive word ("Are transfers
  reviewed too?"), a comparison with one side missing, an opener such as "and" or "what about".
- What makes it stand alone: it names the subject the conversation has been about, or a proper
  noun of its own.
- Whether it continues the topic: the parts above, whether it repeats the previous search's
  subject, and the store's evidence: how close the previous answer's evidence is to the
  question compared with the best match in the whole store. A closer match elsewhere weighs
  against a continuation in proportion to the gap (`continuation_margin` is the gap that
  cancels one part's worth of weight). An opening that announces a new topic ("now", "moving
  on") decides alone.

The sum becomes a confidence through the logistic function; the question is a continuation
when the confidence is at least one half, and the anchoring boost is scaled by it.

A question that leans on the conversation is searched with the subject words it lacks from the
previous search and from the conversation's first question (TREC CAsT's historical query
expansion), so "Who approves it?" searches for what "it" was."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.review.conversation.models import Continuation, DecisionPart

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\u2019-]*|[,;:]")
_WORD = re.compile(r"[a-z0-9][a-z0-9'-]*")

# A later turn leans on the conversation unless its words say otherwise.
LEAN = 1.5
PERSONAL = frozenset({"it", "its", "it's", "itself", "they", "them", "their", "theirs",
                      "themselves", "he", "him", "his", "she", "her", "hers"})
DEMONSTRATIVE = frozenset({"this", "that", "these", "those", "such"})
POINTERS = frozenset({"former", "latter", "aforementioned", "above", "same", "mentioned"})
REFERENCE_WORDS = PERSONAL | DEMONSTRATIVE | POINTERS
# Possessive and reflexive pronouns refer back within their own clause ("Does the vendor
# review its plan?"), so a subject named before them in the question resolves them.
WITHIN_CLAUSE = frozenset({"its", "itself", "their", "theirs", "themselves", "his", "her",
                           "hers"})
# The second word of "how often", "how long"...: part of the question, never its subject.
QUESTION_ADVERBS = frozenset({"often", "long", "much", "many", "soon", "far", "quickly",
                              "frequently", "exactly", "else"})
ADDITIVE = frozenset({"too", "also", "other", "else", "similar", "similarly", "instead",
                      "besides", "afterwards", "either", "another"})
ADDITIVE_PHRASES = ("as well", "in that case", "in this case", "the rest")
COMPARISON_ENDINGS = frozenset({"different", "differ", "compare", "compares", "comparison",
                                "better", "worse", "similar", "alike"})
AUXILIARIES = frozenset({"is", "are", "was", "were", "be", "been", "has", "have", "had", "do",
                         "does", "did", "can", "could", "will", "would", "shall", "should",
                         "may", "might", "must"})
CLAUSE_WORDS = frozenset({",", ";", ":", "and", "but", "if", "when", "because", "while", "so",
                          "or", "since", "after", "before", "whether", "once"})
# Words that end a noun phrase: what follows them is its complement or another clause.
PHRASE_ENDS = AUXILIARIES | frozenset({",", ";", ":", "of", "for", "in", "between", "to",
                                       "on", "with", "and", "or", "from", "at", "by", "about",
                                       "that", "which", "who", "when", "if", "than", "under",
                                       "within"})
COMPLEMENTS = frozenset({"of", "for", "in", "to", "between", "with", "on", "about", "from"})
# Things there is one of, so "the" needs no earlier mention.
UNIQUE = frozenset({"world", "earth", "internet", "web", "sun", "moon", "us", "uk", "eu",
                    "public", "government", "law", "future", "past", "economy", "environment",
                    "universe", "end", "beginning", "day", "week", "month", "year", "morning",
                    "night", "time", "same", "company", "vendor", "cloud"})
# Adjectives that leave a noun as open as it was: "the main causes" are still causes of what?
OPEN_MODIFIERS = frozenset({
    "main", "key", "other", "different", "common", "possible", "important", "same", "whole",
    "new", "old", "current", "previous", "major", "minor", "typical", "usual", "various",
    "exact", "overall", "general", "specific", "particular", "primary", "basic", "potential",
    "any", "some", "all", "both", "each", "every", "these", "those"})
SUPERLATIVE = re.compile(r"^(?:most|least|best|worst|first|last|main|next|\w{3,}est)$")
# Nouns that name a part or property of something ("the causes", "the owner", "exceptions"):
# without their complement they point at whatever the conversation is about.
RELATIONAL = frozenset({
    "type", "types", "kind", "kinds", "sort", "sorts", "variety", "varieties", "class",
    "classes", "category", "categories", "example", "examples", "cause", "causes", "effect",
    "effects", "impact", "impacts", "consequence", "consequences", "benefit", "benefits",
    "advantage", "advantages", "disadvantage", "disadvantages", "drawback", "drawbacks", "pros",
    "cons", "risk", "risks", "danger", "dangers", "symptom", "symptoms", "sign", "signs",
    "treatment", "treatments", "cure", "cost", "costs", "price", "prices", "history", "origin",
    "origins", "purpose", "role", "goal", "goals", "function", "use", "uses", "application",
    "applications", "option", "options", "alternative", "alternatives", "difference",
    "differences", "similarity", "similarities", "feature", "features", "part", "parts",
    "component", "components", "member", "members", "leader", "leaders", "founder", "author",
    "owner", "owners", "size", "population", "requirement", "requirements", "rule", "rules",
    "step", "steps", "process", "stage", "stages", "phase", "phases", "frequency", "duration",
    "period", "schedule", "timeline", "limit", "limits", "scope", "exception", "exceptions",
    "version", "versions", "evidence", "result", "results", "finding", "findings", "outcome",
    "outcomes", "theme", "themes", "character", "characters", "meaning", "definition",
    "policy", "policies", "plan", "plans", "team", "teams", "approach", "method", "methods",
    "reason", "reasons", "problem", "problems", "issue", "issues", "challenge", "challenges",
    "criticism", "controversy", "influence", "significance", "importance", "status", "state",
    "level", "levels", "rate", "rates", "amount", "number", "percentage", "age", "date",
    "location", "approver", "deadline", "standard", "standards", "procedure", "procedures",
    "details", "specifics", "basics"})
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
    "interesting", "great", "thank", "cool", "wow", "my", "our", "some", "should", "if",
    "not", "don't", "doesn't", "very", "there's", "i'm", "i've", "i'd", "now", "let's",
    "talk",
})
# Weights of the parts, in units of the logistic's argument.
WEIGHTS = {
    "lean": LEAN, "no_subject": 3.0, "reference": 3.0, "opener": 1.5, "definite": 1.5,
    "fragment": 2.0,
    "superlative": 1.5, "relational": 1.5, "additive": 1.0, "comparison": 2.0,
    "names_subject": -2.0, "proper_noun": -1.0, "shift_opener": -8.0, "same_subject": 1.0,
}
EVIDENCE_LIMITS = (-4.0, 2.0)  # how far the store's evidence can move the sum either way
EVIDENCE_SLOPE = 4.0  # the evidence part per `continuation_margin` of gap
FRAGMENT_WORDS = 5  # a question this short with no verb of its own is a fragment
IMPERATIVES = frozenset({"tell", "describe", "explain", "list", "give", "show", "define",
                         "compare", "summarize", "summarise", "name", "outline", "walk"})
# A question opening with one of these has a clause ("Who approves restores?"), not a fragment.
CLAUSE_OPENERS = frozenset({"who", "what", "why", "where", "when"})


def known_words(*names: str) -> frozenset[str]:
    """The words of names every question may use without naming a subject (the vendor's)."""
    return frozenset(w for name in names for w in words(name.replace("_", " ")))


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def _tokens(text: str) -> list[str]:
    return [t.replace("\u2019", "'") for t in _TOKEN.findall(text)]


def subject_words(text: str, known: frozenset[str] = frozenset()) -> list[str]:
    """The words that say what a question is about (not how it asks, not what it points to,
    not the `known` words every question may name, such as the vendor's own name)."""
    return [w for w in words(text)
            if w not in FILLER and w not in REFERENCE_WORDS and w not in known]


def stem(word: str) -> str:
    """A plural folded to its singular, well enough to match a word across two questions."""
    word = word.lower().removesuffix("'s").removesuffix("'")
    if word.endswith("ies") and len(word) > 5:
        return word[:-3] + "y"
    for suffix in ("es", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 3 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def topic_words(text: str, known: frozenset[str] = frozenset()) -> list[str]:
    """Subject words that name a thing of their own (not "the causes" of something)."""
    return [w for w in subject_words(text, known) if w not in RELATIONAL]


def _opening(text: str, openers: tuple[str, ...]) -> str | None:
    lowered = " ".join(words(text))
    for opener in sorted(openers, key=len, reverse=True):
        if lowered == opener or lowered.startswith(opener + " "):
            return opener
    return None


def _part(name: str, detail: str) -> DecisionPart:
    return DecisionPart(name=name, weight=WEIGHTS[name], detail=detail)


def _total(parts: Sequence[DecisionPart]) -> float:
    return sum(p.weight for p in parts)


def _reference(tokens: list[str], low: list[str]) -> str | None:
    """A pronoun or demonstrative that points outside the question, if there is one."""
    for i, word in enumerate(low):
        if word in PERSONAL:
            # Resolved inside the question when a clause naming its own subject comes first
            # ("What is mortadella and where is it from?").
            breaks = [k for k in range(i) if low[k] in CLAUSE_WORDS]
            cut = i if word in WITHIN_CLAUSE else (breaks[-1] if breaks else 0)
            if not any(w not in FILLER and w not in REFERENCE_WORDS and w not in AUXILIARIES
                       and w not in CLAUSE_WORDS and w not in QUESTION_ADVERBS
                       for w in low[:cut]):
                return word
        elif word in DEMONSTRATIVE:
            after = low[i + 1] if i + 1 < len(low) else None
            if word == "such" and after == "as":
                continue
            if word == "that" and i > 0 and after is not None and (
                    after in AUXILIARIES or after in PERSONAL
                    or after in {"i", "you", "we", "the", "a", "an"}) and (
                    low[i - 1] not in AUXILIARIES):
                # A relative or complement clause ("the data that is kept"); after an
                # auxiliary "that" is the subject of the question ("must that be sent?").
                continue
            return word
        elif word in POINTERS:
            return word
    return None


def _definite(tokens: list[str], low: list[str]) -> tuple[str, str] | None:
    """A definite noun phrase nothing in the question introduces: ("definite"|"superlative",
    the phrase)."""
    for i, word in enumerate(low):
        if word != "the" or i + 1 >= len(low):
            continue
        j = i + 1
        while j < len(low) and low[j] not in PHRASE_ENDS:
            j += 1
        phrase = tokens[i + 1:j]
        if not phrase or any(t[:1].isupper() or any(c.isdigit() for c in t) for t in phrase):
            continue  # a name ("the Security Team", "the ACL") introduces itself
        if phrase[-1].lower() in UNIQUE:
            continue
        head = [t for t in phrase if t.lower() not in OPEN_MODIFIERS
                and not SUPERLATIVE.match(t.lower())]
        if len(head) > 1:
            continue  # a compound ("the storage service") names a thing of its own
        if j < len(low) and low[j] in {"of", "between", "for", "that", "which", "who",
                                       "whose"}:
            continue  # its complement or a relative clause says which
        kind = ("superlative" if len(phrase) == 1 and SUPERLATIVE.match(phrase[0].lower())
                else "definite")
        return kind, "the " + " ".join(phrase)
    return None


def dependence(question: str, earlier: Sequence[str],
               known: frozenset[str] = frozenset()) -> list[DecisionPart]:
    """The parts that say whether the question leans on the conversation to be understood,
    given the earlier questions of its topic, oldest first."""
    tokens = _tokens(question)
    low = [t.lower() for t in tokens]
    parts = [_part("lean", "a later question usually leans on the conversation")]
    subject = subject_words(question, known)
    if not subject:
        parts.append(_part("no_subject", "no subject words of its own"))
    elif (len(words(question)) <= FRAGMENT_WORDS and not any(w in AUXILIARIES for w in low)
          and low[0] not in IMPERATIVES and not (low[0] in CLAUSE_OPENERS and len(low) > 2)):
        parts.append(_part("fragment", "a fragment without a verb of its own"))
    reference = _reference(tokens, low)
    if reference:
        parts.append(_part("reference", f"\u201c{reference}\u201d points back"))
    opener = _opening(question, OPENERS)
    if opener:
        parts.append(_part("opener", f"opens with \u201c{opener}\u201d"))
    definite = _definite(tokens, low)
    if definite:
        parts.append(_part(definite[0], f"\u201c{definite[1]}\u201d is not introduced"))
    else:
        relational = next((w for i, w in enumerate(low) if w in RELATIONAL and (
            i + 1 >= len(low) or low[i + 1] not in COMPLEMENTS) and (
            i == 0 or low[i - 1] in FILLER or low[i - 1] in OPEN_MODIFIERS
            or SUPERLATIVE.match(low[i - 1]))), None)
        if relational and not any(t[:1].isupper() for t in tokens[1:]):
            parts.append(_part("relational", f"\u201c{relational}\u201d of what is not said"))
    joined = " ".join(low)
    additive = next((w for i, w in enumerate(low) if w in ADDITIVE and not (
        w == "other" and i > 0 and low[i - 1] in {"each", "one"})), None) or next(
        (p for p in ADDITIVE_PHRASES if f" {p} " in f" {joined} "), None)
    if additive:
        parts.append(_part("additive", f"\u201c{additive}\u201d adds to something said"))
    ends = [w for w in low if w not in CLAUSE_WORDS]
    if ends and ends[-1] in COMPARISON_ENDINGS:
        parts.append(_part("comparison", f"\u201c{ends[-1]}\u201d than what is not said"))
    own = topic_words(question, known)
    said = {stem(w) for text in earlier for w in topic_words(text, known)}
    shared = next((w for w in own if stem(w) in said), None)
    if shared and not reference:
        parts.append(_part("names_subject", f"names \u201c{shared}\u201d itself"))
    proper = next((t for t in tokens[1:] if t[:1].isupper() and t.lower() not in FILLER
                   and t.lower() not in known), None)
    if proper and not shared and not reference:
        parts.append(_part("proper_noun", f"names \u201c{proper}\u201d"))
    return parts


def leans_on_words(question: str, earlier: Sequence[str],
                   known: frozenset[str] = frozenset()) -> bool:
    """Whether anything in the question's words (not the lean alone) points at the
    conversation: then it is measured against the store with the subject it lacks."""
    return any(p.weight > 0 and p.name != "lean" for p in dependence(question, earlier, known))


def needs_conversation(question: str, earlier: Sequence[str],
                       known: frozenset[str] = frozenset()) -> bool:
    """Whether a later question needs the conversation to be understood (seed 001's
    needsReformulation), from its words alone."""
    return _total(dependence(question, earlier, known)) > 0.0


@dataclass(frozen=True)
class Closeness:
    """Cosine of the question to the previous answer's evidence and to the store's best."""

    previous: float
    store: float


def _confidence(total: float) -> float:
    return 1.0 / (1.0 + math.exp(-total))


def decide(question: str, *, earlier: Sequence[str], previous_search: str = "",
           closeness: Closeness | None, margin: float,
           known: frozenset[str] = frozenset()) -> Continuation:
    """The deterministic continuation decision: its parts, their sum's confidence and a
    reason in one sentence. `earlier` are the conversation's earlier questions, oldest first;
    `previous_search` what the previous turn searched for."""
    if not earlier:
        return Continuation(is_continuation=False, decided_by="first_turn", confidence=0.0,
                            needs_conversation=False,
                            reason="It is the first question of the conversation.")
    shift = _opening(question, SHIFT_OPENERS)
    language = dependence(question, earlier, known)
    needs = _total(language) > 0.0
    if shift:
        parts = [_part("shift_opener", f"opens with \u201c{shift}\u201d")]
        return Continuation(
            is_continuation=False, decided_by="rules",
            confidence=round(_confidence(_total(language + parts)), 4), needs_conversation=needs,
            parts=parts, signals={"shift_opener": shift},
            reason=f"It opens with \u201c{shift}\u201d, which announces a new topic.")
    # Naming the subject the conversation has been about makes a question stand alone, and
    # it is also what a question continuing that subject does.
    parts = [p for p in language if p.name != "names_subject"]
    before = {stem(w) for text in [previous_search, *earlier]
              for w in topic_words(text, known)}
    repeated = next((w for w in topic_words(question, known) if stem(w) in before), None)
    if repeated:
        parts.append(_part("same_subject", f"\u201c{repeated}\u201d was the topic's subject"))
    signals: dict[str, object] = {"subject_words": subject_words(question, known)}
    if closeness is not None:
        gap = closeness.store - closeness.previous
        weight = max(EVIDENCE_LIMITS[0], min(EVIDENCE_LIMITS[1], EVIDENCE_SLOPE * (
            (margin - gap) / margin if margin else 0.0)))
        parts.append(DecisionPart(
            name="evidence", weight=round(weight, 4),
            detail=f"previous answer's evidence {closeness.previous:.2f}, store's best "
                   f"{closeness.store:.2f}"))
        signals.update({"previous_evidence_cosine": round(closeness.previous, 4),
                        "store_best_cosine": round(closeness.store, 4), "margin": margin})
    confidence = _confidence(_total(parts))
    continues = confidence >= 0.5
    return Continuation(is_continuation=continues, decided_by="rules",
                        confidence=round(confidence, 4), needs_conversation=needs,
                        parts=parts, signals=signals,
                        reason=_reason(continues, confidence, parts))


def _reason(continues: bool, confidence: float, parts: list[DecisionPart]) -> str:
    """One sentence: the decision, its confidence and the parts that weighed most for it."""
    for_it = sorted((p for p in parts if p.name != "lean" and (p.weight > 0) == continues
                     and p.weight), key=lambda p: -abs(p.weight))[:2]
    why = " and ".join(p.detail for p in for_it) or "nothing in it says otherwise"
    if continues:
        return (f"It continues the previous answer's topic (confidence {confidence:.2f}): "
                f"{why}.")
    return f"It starts a new topic (confidence {1 - confidence:.2f}): {why}."


def carried_words(question: str, earlier: Sequence[str], previous_search: str = "",
                  known: frozenset[str] = frozenset()) -> list[str]:
    """The subject words a question that leans on the conversation lacks: from the previous
    question (or, when it named nothing, what it searched for) and from the topic's first
    question, in that order (HQE)."""
    own = {stem(w) for w in subject_words(question, known)}
    if not earlier:
        return []
    previous = (earlier[-1] if topic_words(earlier[-1], known)
                else (previous_search or earlier[-1]))
    sources = [previous, earlier[0]]
    carried: list[str] = []
    for text in sources:
        for word in topic_words(text, known):
            if stem(word) not in own and word not in carried:
                carried.append(word)
                own.add(stem(word))
    return carried


def expanded_query(question: str, earlier: Sequence[str], previous_search: str = "",
                   known: frozenset[str] = frozenset()) -> str:
    """The question with the subject words it lacks from the conversation (HQE)."""
    carried = carried_words(question, earlier, previous_search, known)
    return f"{question} {' '.join(carried)}".strip() if carried else question
