"""Measures of the conversation mode on labelled turns:

- on a labelled set of conversations about a vendor's documents (the sample data's, and one
  about a public vendor's policies written without tuning on it): how often the continuation
  decision is right on the turns after the first, which way it errs, how much of a
  continuation's answer comes from the documents that answer its topic, and what each
  anchoring form does (the share of anchor-document chunks among the answer chunks of
  continuations, and the share a topic shift would get were it anchored);
- on TREC CAsT's conversations (no store: their passage corpus cannot be had here): how often
  the words-only decision says right whether a turn needs the conversation (its manual rewrite
  differs from what was said), and how much of what the rewrite adds the query expansion
  carries."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from core.config import Settings
from core.errors import UserInputError
from core.review.conversation.continuation import (
    carried_words,
    needs_conversation,
    stem,
    subject_words,
)
from core.review.conversation.models import AskTurn

LABELLED_TURNS = Path(__file__).resolve().parents[3] / "sample_data" / "conversations" / (
    "labelled_turns.json")


@dataclass(frozen=True)
class LabelledTurn:
    vendor_id: str
    conversation: int
    turn: int
    question: str
    continuation: bool
    documents: tuple[str, ...] = ()  # the documents that answer the turn's topic, if labelled


def load_labelled(path: Path = LABELLED_TURNS) -> list[LabelledTurn]:
    """The labelled turns, in conversation order."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [LabelledTurn(c["vendor_id"], i, j, t["question"], bool(t["continuation"]),
                             tuple(t.get("documents", ())))
                for i, c in enumerate(data["conversations"], start=1)
                for j, t in enumerate(c["turns"], start=1)]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserInputError(f"{path} is not a labelled conversation set: {exc}.") from None


@dataclass
class AnchoringFigures:
    """One anchoring form on the set."""

    form: str
    boost: float
    continuation_anchor_share: float  # anchor-document chunks among continuations' answers
    shift_stale_share: float  # the same share on topic shifts, had they been anchored
    unanchored_continuation_share: float
    # continuations' answer excerpts from the documents that answer their labelled topic,
    # anchored by this form and unanchored (labelled sets that name the documents)
    continuation_topic_share: float | None = None
    unanchored_topic_share: float | None = None


@dataclass
class ConversationEvaluation:
    turns: int
    continuations: int
    correct: int
    later_turns: int = 0
    later_correct: int = 0
    shifts_called_continuations: int = 0
    continuations_called_shifts: int = 0
    topic_share: float | None = None  # continuations' answer excerpts from the topic's documents
    decisions: list[dict[str, Any]] = field(default_factory=list)
    mistakes: list[dict[str, Any]] = field(default_factory=list)
    anchoring: list[AnchoringFigures] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.turns if self.turns else 0.0

    @property
    def later_accuracy(self) -> float:
        return self.later_correct / self.later_turns if self.later_turns else 0.0

    def to_json(self) -> dict[str, Any]:
        later = self.later_turns or 1
        return {"turns": self.turns, "continuations": self.continuations,
                "correct": self.correct, "accuracy": round(self.accuracy, 4),
                "turns_after_first": self.later_turns,
                "correct_after_first": self.later_correct,
                "accuracy_after_first": round(self.later_accuracy, 4),
                "shifts_called_continuations": self.shifts_called_continuations,
                "shift_error_share": round(self.shifts_called_continuations / later, 4),
                "continuations_called_shifts": self.continuations_called_shifts,
                "continuation_error_share": round(self.continuations_called_shifts / later, 4),
                "continuation_topic_share": (None if self.topic_share is None
                                             else round(self.topic_share, 4)),
                "mistakes": self.mistakes,
                "anchoring": [vars(a) for a in self.anchoring]}


def _share(sources: list[str], anchors: set[str]) -> float:
    return sum(s in anchors for s in sources) / len(sources) if sources else 0.0


class Asker(Protocol):
    """What measuring conversations asks."""

    settings: Settings

    def ask(self, vendor_id: str, question: str, conversation_id: str | None = None, *,
            anchored: bool = True, save: bool = True) -> AskTurn: ...

    def rerun(self, vendor_id: str, turn: AskTurn, *, anchored: bool) -> AskTurn: ...


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def evaluate(workbenches: dict[str, Asker], labelled: list[LabelledTurn]
             ) -> ConversationEvaluation:
    """Ask every conversation of the set (with the first workbench's settings, stored), then
    re-run each later turn with every anchoring form: continuations as asked, topic shifts
    anchored to the previous answer's documents as if the detector had erred."""
    from core.review.conversation.anchoring import anchor_boost, document_weights

    main = next(iter(workbenches.values()))
    result = ConversationEvaluation(turns=len(labelled),
                                    continuations=sum(t.continuation for t in labelled),
                                    correct=0)
    asked = []
    conversation_ids: dict[int, str] = {}
    previous = {}
    on_topic: list[float] = []
    for item in labelled:
        turn = main.ask(item.vendor_id, item.question, conversation_ids.get(item.conversation))
        conversation_ids[item.conversation] = turn.conversation_id
        decided = turn.continuation.is_continuation
        right = decided == item.continuation
        result.correct += right
        if item.turn > 1:
            result.later_turns += 1
            result.later_correct += right
            result.shifts_called_continuations += decided and not item.continuation
            result.continuations_called_shifts += item.continuation and not decided
        if item.continuation and item.documents:
            on_topic.append(_share([e.source for e in turn.answer_evidence],
                                   set(item.documents)))
        if not right:
            result.mistakes.append({"vendor_id": item.vendor_id, "question": item.question,
                                    "labelled": item.continuation, "decided": decided,
                                    "confidence": turn.continuation.confidence,
                                    "reason": turn.continuation.reason})
        asked.append((item, turn, previous.get(item.conversation)))
        previous[item.conversation] = turn
    result.topic_share = _mean(on_topic) if on_topic else None
    for form, bench in workbenches.items():
        continuing, stale, plain, topical, untopical = [], [], [], [], []
        for item, turn, before in asked:
            if before is None:
                continue
            anchors = before.cited_documents
            forced = turn.model_copy(update={
                "anchor_documents": anchors,
                "anchor_weights": document_weights([e.source for e in before.answer_evidence])})
            anchored = bench.rerun(item.vendor_id, forced, anchored=True)
            share = _share([e.source for e in anchored.answer_evidence], set(anchors))
            if item.continuation:
                continuing.append(share)
                unanchored = bench.rerun(item.vendor_id, forced, anchored=False)
                plain.append(_share([e.source for e in unanchored.answer_evidence],
                                    set(anchors)))
                if item.documents:
                    topical.append(_share([e.source for e in anchored.answer_evidence],
                                          set(item.documents)))
                    untopical.append(_share([e.source for e in unanchored.answer_evidence],
                                            set(item.documents)))
            else:
                stale.append(share)
        result.anchoring.append(AnchoringFigures(
            form=form, boost=round(anchor_boost(bench.settings), 6),
            continuation_anchor_share=round(_mean(continuing), 4),
            shift_stale_share=round(_mean(stale), 4),
            unanchored_continuation_share=round(_mean(plain), 4),
            continuation_topic_share=round(_mean(topical), 4) if topical else None,
            unanchored_topic_share=round(_mean(untopical), 4) if untopical else None))
    return result


# TREC CAsT ---------------------------------------------------------------------------------

CAST_TURNS = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "cast" / "turns.json"
_FOLD = re.compile(r"[a-z0-9]+")


def _folded(text: str) -> str:
    return " ".join(_FOLD.findall(text.lower()))


def _stems(words: list[str]) -> set[str]:
    return {stem(w) for w in words}


def load_cast(path: Path = CAST_TURNS) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """CAsT's conversations, each a list of turns in order, keyed by (year, conversation)."""
    try:
        turns = json.loads(path.read_text(encoding="utf-8"))["turns"]
        conversations: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
        for turn in turns:
            conversations[(int(turn["year"]), str(turn["conversation"]))].append(
                {"utterance": str(turn["utterance"]), "rewrite": str(turn["rewrite"]),
                 "repeat": bool(turn.get("repeat", False))})
        return dict(conversations)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserInputError(f"{path} is not a set of CAsT turns: {exc}.") from None


def evaluate_cast(conversations: dict[tuple[int, str], list[dict[str, Any]]]
                  ) -> dict[str, Any]:
    """The words-only decision and query expansion on every CAsT turn after the first (a turn
    two paths of a 2022 topic tree share is counted once), per year and over all years.

    A turn needs the conversation when its manual rewrite differs from what was said (letters
    and digits compared, case folded). The expansion carries words only into turns it decides
    need the conversation; the topic restarts at a turn it decides stands alone. Its recall is
    the share of the subject words the rewrite adds that it carries; its precision the share
    of what it carries that the rewrite adds."""
    years: dict[str, dict[str, float]] = {}
    totals: dict[str, float] = defaultdict(float)
    misses: list[dict[str, Any]] = []
    for (year, _conversation), turns in sorted(conversations.items()):
        figures = years.setdefault(str(year), defaultdict(float))
        topic: list[str] = []
        searched = ""
        for position, turn in enumerate(turns):
            said = turn["utterance"]
            if position == 0:
                topic, searched = [said], said
                continue
            needs = needs_conversation(said, topic)
            carried = carried_words(said, topic, searched) if needs else []
            if needs:
                topic.append(said)
            else:
                topic = [said]
            searched = f"{said} {' '.join(carried)}".strip()
            if turn["repeat"]:
                continue
            gold = _folded(said) != _folded(turn["rewrite"])
            added = _stems(subject_words(turn["rewrite"])) - _stems(subject_words(said))
            got = _stems(carried)
            for bucket in (figures, totals):
                bucket["turns"] += 1
                bucket["need_conversation"] += gold
                bucket["correct"] += needs == gold
                bucket["said_needs_wrongly"] += needs and not gold
                bucket["missed_needs"] += gold and not needs
                bucket["added_words"] += len(added)
                bucket["added_words_carried"] += len(added & got)
                bucket["carried_words"] += len(got)
            if needs != gold and len(misses) < 40:
                misses.append({"year": year, "said": said, "rewrite": turn["rewrite"],
                               "decided_needs": needs})
    return {"years": {y: _cast_figures(f) for y, f in years.items()},
            "all": _cast_figures(totals), "some_mistakes": misses}


def _cast_figures(f: dict[str, float]) -> dict[str, Any]:
    turns = f["turns"] or 1.0
    return {"turns_after_first": int(f["turns"]),
            "need_the_conversation": int(f["need_conversation"]),
            "accuracy": round(f["correct"] / turns, 4),
            "said_needed_wrongly_share": round(f["said_needs_wrongly"] / turns, 4),
            "missed_share": round(f["missed_needs"] / turns, 4),
            "accuracy_if_every_turn_needed_it": round(f["need_conversation"] / turns, 4),
            "rewrite_words_carried_recall": round(
                f["added_words_carried"] / (f["added_words"] or 1.0), 4),
            "carried_words_precision": round(
                f["added_words_carried"] / (f["carried_words"] or 1.0), 4)}
