"""Conversations, kept per vendor in the store beside its evidence.

Every message is a record of the vendor's conversations (a file of its own beside an embedded
store, a collection on a server: `EvidenceStore.conversations`), with a vector so earlier
messages can be found by similarity: a question's own embedding, and an answer's
(made of excerpts, the mean of theirs; see `AskPipeline._answer_vector`). A turn (the
question and its answer) is one write, so a conversation never holds a question without
its answer. The answer's record keeps the
ids of the chunks and the documents that backed it (seed 001's retrievedContextJson) and
the whole turn as `evidence ask` printed it."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Sequence

import numpy as np

from core.errors import UserInputError
from core.review.conversation.models import AskTurn, ConversationSummary, HistoryMessage
from core.store import EvidenceStore, Where
from core.store.conversation_file import ConversationFile
from core.store.conversations import ConversationRecords, MessageRecord

CONVERSATION_ID = re.compile(r"c-[0-9a-f]{12}")


def new_conversation_id() -> str:
    return f"c-{uuid.uuid4().hex[:12]}"


def _message_id(conversation_id: str, turn: int, role: str) -> str:
    return f"{conversation_id}-{turn:05d}-{role}"


class Conversations:
    """One vendor's conversations; never reads or writes another vendor's."""

    def __init__(self, store: EvidenceStore, vendor_id: str) -> None:
        self.store = store
        self.vendor_id = vendor_id

    @classmethod
    def of(cls, store: EvidenceStore, vendor_id: str) -> Conversations:
        """The conversations of a vendor the store holds (an unknown one is refused)."""
        return cls(store, store.open_vendor(vendor_id).vendor_id)

    def _collection(self, *, create: bool = False
                    ) -> ConversationRecords | ConversationFile | None:
        return self.store.conversations(self.vendor_id, create=create)

    def check_id(self, conversation_id: object) -> str:
        """The id of an existing conversation of this vendor, or a one-sentence refusal that
        does not tell whether another vendor has it."""
        conversation_id = self._well_formed(conversation_id)
        if not self.turn_count(conversation_id):
            self._unknown(conversation_id)
        return conversation_id

    @staticmethod
    def _well_formed(conversation_id: object) -> str:
        if not isinstance(conversation_id, str) or not CONVERSATION_ID.fullmatch(conversation_id):
            shown = repr(conversation_id)[:40]
            raise UserInputError(
                f"Conversation id {shown} is not valid: ids look like c-1a2b3c4d5e6f (see "
                "`evidence conversations`).")
        return conversation_id

    def _unknown(self, conversation_id: str) -> None:
        raise UserInputError(
            f"Vendor '{self.vendor_id}' has no conversation {conversation_id}; list them "
            "with `evidence conversations --vendor " + self.vendor_id + "`.")

    def read(self, conversation_id: object) -> ConversationRead:
        """An existing conversation of this vendor read whole, in one read (its messages with
        their vectors), or the refusal `check_id` gives."""
        conversation_id = self._well_formed(conversation_id)
        collection = self._collection()
        records = ([] if collection is None else
                   collection.with_vectors(Where.eq(conversation_id=conversation_id)))
        read = ConversationRead(conversation_id, records)
        if not read.turn_count():
            self._unknown(conversation_id)
        return read

    def turn_count(self, conversation_id: str) -> int:
        collection = self._collection()
        if collection is None:
            return 0
        return collection.count(Where.eq(conversation_id=conversation_id, role="assistant"))

    def messages(self, conversation_id: str) -> list[HistoryMessage]:
        """Every message of the conversation in order."""
        collection = self._collection()
        if collection is None:
            return []
        return _in_order(collection.messages(Where.eq(conversation_id=conversation_id)))

    def turns(self, conversation_id: str) -> list[AskTurn]:
        """Every turn of the conversation, as `evidence ask` printed it."""
        collection = self._collection()
        if collection is None:
            return []
        return _turns_of(collection.messages(
            Where.eq(conversation_id=conversation_id, role="assistant"), text=False))

    def save(self, turn: AskTurn, vectors: Sequence[np.ndarray]) -> None:
        """The question and its answer in one write."""
        collection = self._collection(create=True)
        common = {"vendor_id": self.vendor_id, "conversation_id": turn.conversation_id,
                  "turn": turn.turn, "asked_at": turn.asked_at}
        collection.write(
            [_message_id(turn.conversation_id, turn.turn, "user"),
             _message_id(turn.conversation_id, turn.turn, "assistant")],
            [turn.question, turn.answer],
            [{**common, "role": "user"},
             {**common, "role": "assistant", "chunk_ids": json.dumps(turn.cited_ids),
              "documents": json.dumps(turn.cited_documents),
              "turn_json": turn.model_dump_json()}],
            vectors)

    def summaries(self) -> list[ConversationSummary]:
        """One summary per conversation, oldest first."""
        collection = self._collection()
        if collection is None:
            return []
        by_id: dict[str, list[tuple[int, str, str]]] = {}
        for found in collection.messages(Where.eq(role="user")):
            m = found.metadata
            by_id.setdefault(m["conversation_id"], []).append(
                (int(m["turn"]), str(m["asked_at"]), found.text))
        summaries = []
        for conversation_id, rows in by_id.items():
            rows.sort()
            summaries.append(ConversationSummary(
                conversation_id=conversation_id, turns=len(rows), started=rows[0][1],
                last=rows[-1][1], first_question=rows[0][2]))
        return sorted(summaries, key=lambda s: (s.started, s.conversation_id))


class ConversationRead:
    """One conversation's messages as one read found them, with their vectors: what a turn
    asks of its conversation (its turns, the history in view, the messages nearest a
    question) without reading the store again. Answers as `Conversations` does."""

    def __init__(self, conversation_id: str, records: Sequence[MessageRecord]) -> None:
        self.conversation_id = conversation_id
        self.records = list(records)

    def turn_count(self) -> int:
        return sum(1 for r in self.records if r.metadata.get("role") == "assistant")

    def turns(self) -> list[AskTurn]:
        """Every turn, as `evidence ask` printed it."""
        return _turns_of(r for r in self.records if r.metadata.get("role") == "assistant")

    def messages(self, conversation_id: str) -> list[HistoryMessage]:
        """Every message in order."""
        return _in_order(self._of(conversation_id))

    def similar(self, conversation_id: str, embedding: np.ndarray, n: int,
                exclude_turns: set[int]) -> list[HistoryMessage]:
        """The messages nearest the question by cosine, best first, leaving out turns (ranked
        exactly: a conversation is read whole, with every message's vector)."""
        records = [r for r in self._of(conversation_id) if r.vector is not None
                   and int(r.metadata["turn"]) not in exclude_turns]
        if not records or n <= 0:
            return []
        vectors = np.asarray([r.vector for r in records], dtype=np.float32)
        question = np.asarray(embedding, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1) * float(np.linalg.norm(question))
        cosine = (vectors @ question) / np.where(norms > 0, norms, 1.0)
        order = np.argsort(-cosine, kind="stable")[:n]
        return [HistoryMessage(turn=int(records[i].metadata["turn"]),
                               role=records[i].metadata["role"], text=records[i].text,
                               why="similar") for i in order]

    def _of(self, conversation_id: str) -> list[MessageRecord]:
        if conversation_id != self.conversation_id:
            raise ValueError(f"this read holds conversation {self.conversation_id}, "
                             f"not {conversation_id}")
        return self.records


def _in_order(records: Iterable[MessageRecord]) -> list[HistoryMessage]:
    """Stored messages as history, in order: by turn, each question before its answer."""
    messages = [HistoryMessage(turn=int(r.metadata["turn"]), role=r.metadata["role"],
                               text=r.text) for r in records]
    return sorted(messages, key=lambda m: (m.turn, m.role != "user"))


def _turns_of(answers: Iterable[MessageRecord]) -> list[AskTurn]:
    """The turns the answers' records keep, in order."""
    turns = [AskTurn.model_validate_json(r.metadata["turn_json"]) for r in answers]
    return sorted(turns, key=lambda t: t.turn)
