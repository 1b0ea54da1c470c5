"""Questionnaire rounds as the tests build them: one payload of the Bulk Ingestion API (a
vendor's round: vendor_id, round_number, timestamp, responses) and its responses.

The keys come in the order the API documents them, so that a payload written to a file, or
hashed, is the same whichever test built it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Response = dict[str, Any]


def monthly(round_number: int) -> str:
    """The default timestamp: round N was answered on the 15th of month N of 2024."""
    return f"2024-{round_number:02d}-15T10:30:00Z"


def response(question: str, answer: str, criterion: str | None = None) -> Response:
    """One answer; `criterion` is the criterion question it is linked to (None: ad hoc)."""
    return {"criterion_question_text": criterion, "question_text": question,
            "answer_text": answer}


def numbered(count: int, question: str, answer: str, /, *,
             criterion: str | None | Mapping[int, str] = None, start: int = 0,
             **fields: Any) -> list[Response]:
    """`count` responses numbered i = start, start + 1, ...: `question` and `answer` are
    templates formatted with `i` and `fields`; `criterion` links every response to one
    criterion, or (a mapping) response i to `criterion.get(i)`."""
    def linked(i: int) -> str | None:
        return criterion.get(i) if isinstance(criterion, Mapping) else criterion

    return [response(question.format(i=i, **fields), answer.format(i=i, **fields), linked(i))
            for i in range(start, start + count)]


def round_payload(round_number: int, responses: Iterable[Response], *, vendor: str = "acme",
                  timestamp: str | None = None) -> dict[str, Any]:
    """A vendor's questionnaire round; the timestamp is `monthly(round_number)` unless given."""
    return {"vendor_id": vendor, "round_number": round_number,
            "timestamp": monthly(round_number) if timestamp is None else timestamp,
            "responses": list(responses)}


def one_answer(round_number: int, answer: str, *, criterion: str | None,
               question: str | None = None, vendor: str = "acme",
               timestamp: str | None = None) -> dict[str, Any]:
    """A round of one response: `answer` to `question` (the criterion word for word unless
    given), linked to `criterion` (None: ad hoc)."""
    asked = criterion if question is None else question
    return round_payload(round_number, [response(asked, answer, criterion)], vendor=vendor,
                         timestamp=timestamp)
