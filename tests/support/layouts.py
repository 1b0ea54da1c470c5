"""A trace's parts in the seeds' layout. The seeds' strategies print exactly that; the
project's own (precedence, hybrid) lead their context and prompt with the criterion's
current answer and label every answer, so the seed scenarios read their parts in the seeds'
layout and hold them to the seeds' choice of parts and order (their own layout is tested in
tests/test_newest_answer.py)."""

from __future__ import annotations

from core.models import RetrievalTrace
from core.retrieval.strategies import get_strategy
from core.trace.context import format_context_xml, format_prompt


def seed_context(trace: RetrievalTrace) -> str:
    """The context as the seeds lay the trace's excerpts and follow-ups out."""
    if get_strategy(trace.strategy).leads_with_current_answer:
        return format_context_xml(trace.evidence, trace.followups)
    return trace.context


def seed_prompt(trace: RetrievalTrace) -> str:
    """The seed-003 prompt of the trace's excerpts and follow-ups."""
    if get_strategy(trace.strategy).leads_with_current_answer:
        return format_prompt(trace.criterion, trace.evidence, trace.followups)
    return trace.prompt
