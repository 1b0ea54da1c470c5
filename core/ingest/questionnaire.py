"""Follow-up questionnaire rounds: the seed-003 bulk payload, validated whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.errors import UserInputError
from core.hashing import content_hash, criterion_question_hash, format_embedding_content
from core.ingest import decode_utf8, read_user_file
from core.models import (
    FOLLOWUP_SOURCE_TYPE,
    QuestionnairePayload,
    StoredRecord,
    followup_type,
)


def followup_record_id(vendor_id: str, content_key: str, round_number: int) -> str:
    """Seed 003's external id: one record per (vendor, content_hash, round)."""
    return f"followup-{vendor_id}-{content_key}-round{round_number}"


def followup_source(round_number: int) -> str:
    return f"Follow-up Questionnaire Round {round_number}"


def parse_payload(data: Any, *, where: str = "payload", max_responses: int = 100
                  ) -> QuestionnairePayload:
    """Validate a decoded payload; refuse it whole in one sentence naming the field."""
    if not isinstance(data, dict):
        raise UserInputError(f"{where} must be a JSON object, not {_json_kind(data)}.")
    responses = data.get("responses")
    if isinstance(responses, list) and len(responses) > max_responses:
        raise UserInputError(
            f"{where}: responses holds {len(responses)} entries; at most {max_responses} "
            "are allowed in one round."
        )
    try:
        return QuestionnairePayload.model_validate(data)
    except ValidationError as exc:
        raise UserInputError(f"{where}: {_first_error(exc)}") from None


def load_payload_file(path: Path, *, max_responses: int = 100) -> QuestionnairePayload:
    """Read and validate one questionnaire file."""
    raw = read_user_file(path)
    try:
        data = json.loads(decode_utf8(path, raw))
    except json.JSONDecodeError as exc:
        raise UserInputError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})."
        ) from None
    return parse_payload(data, where=str(path), max_responses=max_responses)


def payload_records(payload: QuestionnairePayload) -> list[StoredRecord]:
    """One record per response: embedded Q&A text plus seed 003's metadata."""
    timestamp = payload.timestamp_utc
    records = []
    for response in payload.responses:
        key = content_hash(response.criterion_question_text, response.question_text)
        metadata: dict[str, str | int | float | bool] = {
            "source_type": FOLLOWUP_SOURCE_TYPE,
            "type": followup_type(payload.round_number),
            "source": followup_source(payload.round_number),
            "content_hash": key,
            "original_criterion_question_text": response.criterion_question_text or "",
            "question_text": response.question_text,
            "answer_text": response.answer_text,
            "vendor_id": payload.vendor_id,
            "round_number": payload.round_number,
            "timestamp": payload.timestamp,
            "timestamp_epoch": timestamp.timestamp(),
        }
        linked = criterion_question_hash(response.criterion_question_text)
        if linked is not None:  # ChromaDB metadata cannot hold None: ad-hoc omits the key
            metadata["criterion_question_hash"] = linked
        records.append(StoredRecord(
            id=followup_record_id(payload.vendor_id, key, payload.round_number),
            text=format_embedding_content(response.question_text, response.answer_text),
            metadata=metadata,
        ))
    return records


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    field = ""
    for part in error["loc"]:
        field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
    message = error["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    kind = error["type"]
    if kind == "missing":
        return f"field {field} is missing."
    if kind.endswith("_type") or kind == "string_type":
        return f"field {field} must be {_expected(kind)}, not {_json_kind(error.get('input'))}."
    if kind == "greater_than_equal":
        return f"field {field} must be 1 or more, not {error.get('input')!r}."
    return f"field {field} {message.rstrip('.')}."


def _expected(kind: str) -> str:
    return {
        "string_type": "a string", "int_type": "an integer", "list_type": "a list",
        "dict_type": "an object", "model_type": "an object",
    }.get(kind, kind.replace("_type", ""))


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"
