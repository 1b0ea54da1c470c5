"""Seed 001's history merge: what the reformulation sees of the conversation so far.

The last user and assistant messages are always in view (a vague "Can you elaborate?" would
not find them by similarity); earlier messages fill the window of `history_window` in the
order of one rank fusion of their semantic and their lexical similarity to the question,
each message at most once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.retrieval.fusion import reciprocal_rank_fusion
from core.review.conversation.continuation import subject_words
from core.review.conversation.models import HistoryMessage
from core.review.conversation.store import ConversationRead


def _key(message: HistoryMessage) -> str:
    return f"{message.turn}:{message.role}"


def lexical_order(question: str, messages: Sequence[HistoryMessage]) -> list[HistoryMessage]:
    """Messages sharing subject words with the question, most shared first."""
    wanted = set(subject_words(question))
    scored = [(len(wanted & set(subject_words(m.text))), m) for m in messages]
    return [m for shared, m in sorted(scored, key=lambda pair: -pair[0]) if shared]


def merge_history(read: ConversationRead, conversation_id: str,
                  question: str, embedding: np.ndarray, *, window: int, recent: int,
                  rrf_k: int) -> list[HistoryMessage]:
    """The messages in view, most recent first: the recent ones, then the similar ones."""
    messages = read.messages(conversation_id)
    if not messages:
        return []
    kept = list(reversed(messages[-recent:])) if recent else []
    seen = {_key(m) for m in kept}
    room = window - len(kept)
    if room <= 0:
        return kept[:window]
    earlier = [m for m in messages if _key(m) not in seen]
    recent_turns = {m.turn for m in kept if m.role == "user"} & {
        m.turn for m in kept if m.role == "assistant"}
    semantic = read.similar(conversation_id, embedding, room * 2, recent_turns)
    semantic = [m for m in semantic if _key(m) not in seen]
    lexical = lexical_order(question, earlier)
    by_key = {_key(m): m for m in [*semantic, *lexical]}
    fused = reciprocal_rank_fusion([[_key(m) for m in semantic], [_key(m) for m in lexical]],
                                   rrf_k)
    ordered = sorted(fused, key=lambda key: -fused[key])[:room]
    return kept + [by_key[key].model_copy(update={"why": "similar"}) for key in ordered]
