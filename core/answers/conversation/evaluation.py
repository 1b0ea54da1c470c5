"""Measures on a labelled set of conversation turns: how often the continuation detector is
right, and what each anchoring form does (the share of anchor-document chunks among the
answer chunks of continuations, and the share a topic shift would get were it anchored)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from core.answers.conversation.models import AskTurn
from core.config import Settings
from core.errors import UserInputError

LABELLED_TURNS = Path(__file__).resolve().parents[3] / "sample_data" / "conversations" / (
    "labelled_turns.json")


@dataclass(frozen=True)
class LabelledTurn:
    vendor_id: str
    conversation: int
    turn: int
    question: str
    continuation: bool


def load_labelled(path: Path = LABELLED_TURNS) -> list[LabelledTurn]:
    """The labelled turns, in conversation order."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [LabelledTurn(c["vendor_id"], i, j, t["question"], bool(t["continuation"]))
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


@dataclass
class ConversationEvaluation:
    turns: int
    continuations: int
    correct: int
    mistakes: list[dict[str, Any]] = field(default_factory=list)
    anchoring: list[AnchoringFigures] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.turns if self.turns else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"turns": self.turns, "continuations": self.continuations,
                "correct": self.correct, "accuracy": round(self.accuracy, 4),
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
    from core.answers.conversation.anchoring import anchor_boost

    main = next(iter(workbenches.values()))
    result = ConversationEvaluation(turns=len(labelled),
                                    continuations=sum(t.continuation for t in labelled),
                                    correct=0)
    asked = []
    conversation_ids: dict[int, str] = {}
    previous = {}
    for item in labelled:
        turn = main.ask(item.vendor_id, item.question, conversation_ids.get(item.conversation))
        conversation_ids[item.conversation] = turn.conversation_id
        if turn.continuation.is_continuation == item.continuation:
            result.correct += 1
        else:
            result.mistakes.append({"vendor_id": item.vendor_id, "question": item.question,
                                    "labelled": item.continuation,
                                    "decided": turn.continuation.is_continuation,
                                    "reason": turn.continuation.reason})
        asked.append((item, turn, previous.get(item.conversation)))
        previous[item.conversation] = turn
    for form, bench in workbenches.items():
        continuing, stale, plain = [], [], []
        for item, turn, before in asked:
            if before is None:
                continue
            anchors = before.cited_documents
            forced = turn.model_copy(update={"anchor_documents": anchors})
            anchored = bench.rerun(item.vendor_id, forced, anchored=True)
            share = _share([e.source for e in anchored.answer_evidence], set(anchors))
            if item.continuation:
                continuing.append(share)
                unanchored = bench.rerun(item.vendor_id, forced, anchored=False)
                plain.append(_share([e.source for e in unanchored.answer_evidence],
                                    set(anchors)))
            else:
                stale.append(share)
        result.anchoring.append(AnchoringFigures(
            form=form, boost=round(anchor_boost(bench.settings), 6),
            continuation_anchor_share=round(_mean(continuing), 4),
            shift_stale_share=round(_mean(stale), 4),
            unanchored_continuation_share=round(_mean(plain), 4)))
    return result
