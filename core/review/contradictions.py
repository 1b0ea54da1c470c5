"""Contradictions a reviewer should see, found without a language model: answers to one
criterion (or one questionnaire id) that disagree across follow-up rounds, and the newest
answer where it disagrees with a document excerpt in the criterion's context. Every rule errs
towards silence, since a false alarm costs a reviewer more than a missed one; the rules in
full are in docs/review.md."""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from core.models import Candidate, FollowupHit, by_round
from core.review.claims import (
    PERIOD_TOLERANCE,
    Claim,
    ContradictionKind,
    agree,
    folded,
    leading_yes_no,
    read_claims,
)

# What rounds are compared for besides a yes or no, and what the newest answer is compared
# with a document for.
_ROUND_KINDS: tuple[ContradictionKind, ...] = ("number", "period", "algorithm", "key_length",
                                               "protocol_version")
DOCUMENT_KINDS: tuple[ContradictionKind, ...] = ("algorithm", "key_length", "protocol_version",
                                                 "period")


class Contradiction(BaseModel):
    """Two statements about one criterion that cannot both hold, as a reviewer reads them."""

    model_config = ConfigDict(frozen=True)

    kind: ContradictionKind
    between: tuple[str, str] = Field(
        description="what disagrees: two rounds, older first (\"round 3\", \"round 4\"), or "
                    "the newest round and a document (\"round 4\", \"encryption_standard.md\")")
    values: tuple[str, str] = Field(description="what each states, in the order of `between`")
    ids: tuple[str, str] = Field(description="the record ids, in the order of `between`")
    round_number: int = Field(description="the newest round the contradiction involves")
    questionnaire_id: str | None = Field(
        None, description="the questionnaire id both answers answer; None for the criterion's "
                          "answers without one")
    sentence: str = Field(description="one plain sentence for the reviewer")
    quotes: tuple[str, str] = Field(
        ("", ""), description="the words of each side that state its value, as written, in "
                              "the order of `between`")


def find_contradictions(followups: Sequence[FollowupHit],
                        excerpts: Sequence[Candidate] = ()) -> list[Contradiction]:
    """The contradictions among the follow-ups of one criterion and between its newest
    answers and the document excerpts, newest first."""
    documents = [e for e in excerpts if not _is_followup_excerpt(e)]
    found: list[tuple[tuple[int, str], int, Contradiction]] = []
    for group in _groups(followups):
        for contradiction, newer in [*_round_contradictions(group),
                                     *_document_contradictions(group, documents)]:
            found.append(((newer.round_number, newer.timestamp), len(found), contradiction))
    found.sort(key=lambda item: item[1])
    found.sort(key=lambda item: item[0], reverse=True)
    return [contradiction for _key, _order, contradiction in found]


# Answers ----------------------------------------------------------------------------------

@dataclass
class _Answer:
    """A follow-up and what its answer states."""

    hit: FollowupHit
    yes_no: str | None
    question: str  # the question's words, for telling two questions apart
    claims: list[Claim] = field(default_factory=list)


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", folded(text)))


_QUESTION_NEGATION = re.compile(r"\b(?:not|no|never|\w+n't|still|any)\b")


def _same_question(first: str, second: str) -> bool:
    """Two questions worded alike, with the same figures and the same negation."""
    if first == second:
        return True
    if (set(re.findall(r"[0-9]+", first)) != set(re.findall(r"[0-9]+", second))
            or set(_QUESTION_NEGATION.findall(first))
            != set(_QUESTION_NEGATION.findall(second))):
        return False
    matcher = difflib.SequenceMatcher(None, first, second, autojunk=False)
    return (matcher.real_quick_ratio() >= 0.9 and matcher.quick_ratio() >= 0.9
            and matcher.ratio() >= 0.9)


# Comparing --------------------------------------------------------------------------------

def _any_agree(kind: str, first: Sequence[Claim], second: Sequence[Claim]) -> bool:
    """True when some claim of one side agrees with some claim of the other."""
    if kind == "algorithm":
        return bool(frozenset().union(*(c.names for c in first))
                    & frozenset().union(*(c.names for c in second)))
    values = sorted(c.value for c in second)
    reach = 1 - PERIOD_TOLERANCE if kind == "period" else 1.0
    for claim in first:
        at = bisect.bisect_left(values, claim.value * reach)
        if at < len(values) and values[at] <= claim.value / reach:
            return True
    return False


def _distinct(kind: str, claims: Sequence[Claim]) -> list[Claim]:
    kept: list[Claim] = []
    for claim in claims:
        if not any(agree(kind, claim, other) for other in kept):
            kept.append(claim)
    return kept


def _shown(claims: Sequence[Claim]) -> str:
    return " and ".join(dict.fromkeys(c.shown for c in claims))


def _disagreement(kind: ContradictionKind, older: Sequence[Claim], newer: Sequence[Claim],
                  *, across_rounds: bool = False
                  ) -> tuple[Sequence[Claim], Sequence[Claim]] | None:
    """The claims of each side that disagree, or None where the sides can both hold. Between
    two rounds' answers to one criterion, a side that states one key length for an algorithm
    disagrees with another length the other side states for it ("AES-128 for most data" and
    "AES-256 for all tiers"), even where the other side also names the first."""
    if across_rounds and kind == "key_length" and _any_agree(kind, older, newer):
        first, second = _distinct(kind, older), _distinct(kind, newer)
        if len(second) == 1:
            other = [c for c in first if not agree(kind, c, second[0])]
            return (other, second) if other else None
        if len(first) == 1:
            other = [c for c in second if not agree(kind, c, first[0])]
            return (first, other) if other else None
        return None
    if kind == "protocol_version":
        first, second = _lowest(older), _lowest(newer)
        a, b = first.value, second.value
        if a == b or not (first.explicit and second.explicit or first.explicit and b < a
                          or second.explicit and a < b):
            return None
        return [first], [second]
    if _any_agree(kind, older, newer):
        return None
    first_values, second_values = _distinct(kind, older), _distinct(kind, newer)
    if kind in ("period", "number"):
        senses = {c.sense for c in older} | {c.sense for c in newer}
        if len(first_values) != 1 or len(second_values) != 1 or len(senses) != 1:
            return None  # one side gives several figures, or they are stated differently
    return first_values, second_values


def _lowest(claims: Sequence[Claim]) -> Claim:
    lowest = min(c.value for c in claims)
    at_lowest = [c for c in claims if c.value == lowest]
    return next((c for c in at_lowest if c.explicit), at_lowest[0])


def _slots(claims: Sequence[Claim], kinds: Sequence[str]) -> dict[tuple[object, ...],
                                                                    list[Claim]]:
    slots: dict[tuple[object, ...], list[Claim]] = {}
    for claim in claims:
        if claim.kind in kinds:
            slots.setdefault((claim.kind, *claim.slot), []).append(claim)
    return slots


@dataclass
class _Group:
    """The answers to one questionnaire id, or to the criterion where they carry none."""

    questionnaire_id: str | None
    answers: list[_Answer]

    def speaker(self, round_number: int) -> str:
        """How a sentence names the newer answer: "round 4" or "round 4's answer to CEK-1"."""
        return (f"round {round_number}'s answer to {self.questionnaire_id}"
                if self.questionnaire_id else f"round {round_number}")

    def same_question(self, first: _Answer, second: _Answer) -> bool:
        return bool(self.questionnaire_id) or _same_question(first.question, second.question)

    @property
    def newest(self) -> list[_Answer]:
        last = self.answers[-1].hit.round_number
        return [a for a in self.answers if a.hit.round_number == last]


def _groups(followups: Sequence[FollowupHit]) -> list[_Group]:
    """The follow-ups by questionnaire id (its typography, case and spaces aside), each group
    in round order."""
    grouped: dict[str | None, list[FollowupHit]] = {}
    for hit in followups:
        qid = hit.questionnaire_id
        key = "".join(folded(qid).split()) if qid and qid.strip() else None
        grouped.setdefault(key, []).append(hit)
    groups = []
    for key, hits in grouped.items():
        answers = []
        for hit in by_round(hits):
            question = _words(hit.question_text)
            answers.append(_Answer(hit, leading_yes_no(hit.answer_text), question, read_claims(
                hit.answer_text, hit.id, hit.question_text,
                f"id:{key}" if key else f"q:{question}", hit.criterion_question_text)))
        qid = next((h.questionnaire_id.strip() for h in hits if h.questionnaire_id), None)
        groups.append(_Group(qid if key else None, answers))
    return groups


_Reported = list[tuple[tuple[object, ...], Sequence[Claim], Sequence[Claim]]]
_Found = list[tuple[Contradiction, FollowupHit]]  # with the newer follow-up, for the order


def _round_contradictions(group: _Group) -> _Found:
    """Each round against the latest earlier round that states something comparable,
    newest first, each pair of values once."""
    by_number: dict[int, list[_Answer]] = {}
    for answer in group.answers:
        by_number.setdefault(answer.hit.round_number, []).append(answer)
    rounds = [(number, _slots([c for a in answers for c in a.claims], _ROUND_KINDS), answers)
              for number, answers in by_number.items()]
    found = _yes_no_flips(group)
    reported: _Reported = []
    for position in range(len(rounds) - 1, 0, -1):
        number, slots, answers = rounds[position]
        for slot, newer in slots.items():
            earlier = next(((n, s[slot]) for n, s, _a in reversed(rounds[:position])
                            if slot in s), None)
            if earlier is None:
                continue
            kind = newer[0].kind
            pair = _disagreement(kind, earlier[1], newer, across_rounds=True)
            if pair is None or _already(reported, slot, *pair):
                continue
            reported.append((slot, *pair))
            old, new = pair
            sentence = _sentence(
                kind, _statement(kind, group.speaker(number), new),
                _statement(kind, f"round {earlier[0]}", old, past=True),
                new[0].topic or old[0].topic)
            found.append((_contradiction(kind, group, number,
                                         (f"round {earlier[0]}", f"round {number}"),
                                         (old, new), sentence,
                                         (_text(group, old[0].record_id),
                                          _text(group, new[0].record_id))),
                          _hit(answers, new[0].record_id)))
    found.sort(key=lambda item: (item[1].round_number, item[1].timestamp), reverse=True)
    return found


def _already(reported: _Reported, slot: tuple[object, ...], old: Sequence[Claim],
             new: Sequence[Claim]) -> bool:
    """True when the same two values were reported for the slot already, either way round."""
    kind = str(slot[0])

    return any(s == slot and (_any_agree(kind, a, old) and _any_agree(kind, b, new)
                              or _any_agree(kind, a, new) and _any_agree(kind, b, old))
               for s, a, b in reported)


def _hit(answers: Sequence[_Answer], record_id: str) -> FollowupHit:
    return next(a.hit for a in answers if a.hit.id == record_id)


def _text(group: _Group, record_id: str) -> str:
    """The answer text of one of the group's answers."""
    return _hit(group.answers, record_id).answer_text


def _yes_no_flips(group: _Group) -> _Found:
    """Each yes or no against the latest earlier yes or no to the same question in another
    round; one flip per question, its newest."""
    stated = [a for a in group.answers if a.yes_no in ("yes", "no")]
    found: _Found = []
    flipped: list[_Answer] = []
    for position in range(len(stated) - 1, -1, -1):
        newer = stated[position]
        if any(group.same_question(newer, other) for other in flipped):
            continue
        older = next((a for a in reversed(stated[:position])
                      if a.hit.round_number < newer.hit.round_number
                      and group.same_question(a, newer)), None)
        if older is None or older.yes_no == newer.yes_no:
            continue
        flipped.append(newer)
        now, then = _yes_no_word(newer), _yes_no_word(older)
        newer_round, older_round = newer.hit.round_number, older.hit.round_number
        to = f" to {group.questionnaire_id}" if group.questionnaire_id else ""
        sentence = (f"Round {newer_round} answers {now}{to} where round {older_round} "
                    f"answered {then}.")
        found.append((Contradiction(
            kind="yes_no", between=(f"round {older_round}", f"round {newer_round}"),
            values=(then, now), ids=(older.hit.id, newer.hit.id), round_number=newer_round,
            questionnaire_id=group.questionnaire_id, sentence=sentence,
            quotes=(_quote(older.hit.answer_text), _quote(newer.hit.answer_text))), newer.hit))
    return found


def _yes_no_word(answer: _Answer) -> str:
    return "Yes" if answer.yes_no == "yes" else "No"


def _document_contradictions(group: _Group, documents: Sequence[Candidate]) -> _Found:
    """The newest round's answers against each document excerpt, each document's pair of
    values once."""
    newest = group.newest
    answer_slots = _slots([c for a in newest for c in a.claims], DOCUMENT_KINDS)
    if not answer_slots:
        return []
    number = newest[0].hit.round_number
    found: _Found = []
    reported: dict[str, _Reported] = {}
    for document in documents:
        label = _document_label(document)
        document_slots = _slots(read_claims(document.text, document.id), DOCUMENT_KINDS)
        seen = reported.setdefault(label, [])
        for slot, answer_claims in answer_slots.items():
            if slot not in document_slots:
                continue
            kind = answer_claims[0].kind
            pair = _disagreement(kind, document_slots[slot], answer_claims)
            if pair is None or _already(seen, slot, *pair):
                continue
            seen.append((slot, *pair))
            in_document, in_answer = pair
            sentence = _sentence(kind, _statement(kind, label, in_document),
                                 _statement(kind, group.speaker(number), in_answer),
                                 in_answer[0].topic or in_document[0].topic)
            found.append((_contradiction(kind, group, number, (f"round {number}", label),
                                         (in_answer, in_document), sentence,
                                         (_text(group, in_answer[0].record_id),
                                          document.text)),
                          _hit(newest, in_answer[0].record_id)))
    return found


def _contradiction(kind: ContradictionKind, group: _Group, round_number: int,
                   between: tuple[str, str], claims: tuple[Sequence[Claim], Sequence[Claim]],
                   sentence: str, texts: tuple[str, str]) -> Contradiction:
    first, second = claims
    return Contradiction(kind=kind, between=between, values=(_shown(first), _shown(second)),
                         ids=(first[0].record_id, second[0].record_id),
                         round_number=round_number, questionnaire_id=group.questionnaire_id,
                         sentence=sentence,
                         quotes=(_quote(texts[0], first), _quote(texts[1], second)))


_SENTENCE = re.compile(r"(?<=[.!?])\s+|[\n\r;]+")


def _quote(text: str, claims: Sequence[Claim] = ()) -> str:
    """The sentence of `text` that states the first claim, as written (the first sentence
    where no claim says which)."""
    sentences = [" ".join(part.split()) for part in _SENTENCE.split(text) if part.strip()]
    clause = claims[0].clause if claims else ""
    shown = claims[0].shown.lower() if claims else ""
    for sentence in sentences:
        plain = " ".join(folded(sentence).split())
        if clause and (clause in plain or plain in clause):
            return sentence
    for sentence in sentences:
        if shown and shown in folded(sentence):
            return sentence
    return sentences[0] if sentences else ""


# Sentences --------------------------------------------------------------------------------

_VERBS: dict[str, tuple[str, str]] = {  # kind -> (present, past)
    "period": ("says", "said"), "number": ("says", "said"), "algorithm": ("names", "named"),
    "key_length": ("names", "named"), "protocol_version": ("gives", "gave"),
}


def _statement(kind: str, who: str, claims: Sequence[Claim], *, past: bool = False) -> str:
    """"round 3 said every 90 days", "encryption_standard.md names AES-128"."""
    return f"{who} {_VERBS[kind][1 if past else 0]} {_shown(claims)}"


def _sentence(kind: str, first: str, second: str, topic: str) -> str:
    """One sentence: the newer answer's or the document's statement, then what it
    contradicts. A round is capitalised at its start; a document's name is left as it is."""
    if kind == "protocol_version":
        first += " as the lowest version"
    if topic and kind in ("period", "number"):
        return f"On {topic}, {first} where {second}."
    if first.startswith("round "):
        first = "R" + first[1:]
    return f"{first} where {second}."


def _document_label(document: Candidate) -> str:
    return f"{document.source}, page {document.page}" if document.page else document.source


def _is_followup_excerpt(candidate: Candidate) -> bool:
    return candidate.is_followup or candidate.type.startswith("followup_response")
