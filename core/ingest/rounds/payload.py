"""Follow-up questionnaire rounds: the seed-003 bulk payload, validated whole."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.controls.answers import control_metadata
from core.errors import UserInputError
from core.hashing import (
    canonical_criterion_hash,
    criterion_question_hash,
    format_embedding_content,
)
from core.ingest import decode_utf8, read_user_file, refuse_too_large, shown_path
from core.models import (
    FOLLOWUP_SOURCE_TYPE,
    PayloadLimits,
    QuestionnairePayload,
    QuestionnaireResponse,
    StoredRecord,
    followup_type,
)
from core.store import EvidenceStore


def followup_record_id(vendor_id: str, content_key: str, round_number: int) -> str:
    """Seed 003's external id: one record per (vendor, content_hash, round)."""
    return f"followup-{vendor_id}-{content_key}-round{round_number}"


def followup_source(round_number: int, response: QuestionnaireResponse | None = None) -> str:
    """How a response names itself: the file, sheet and question id it was read from
    (`Vendor CAIQ.xlsx › CAIQv4.0.3 › CEK-12.1`), or its round where it came without one."""
    origin = response.origin if response is not None else None
    if origin is None:
        label = f"Follow-up Questionnaire Round {round_number}"
        if response is not None and response.questionnaire_id:
            label += f" › {response.questionnaire_id}"
        return label
    place = response.questionnaire_id or (f"row {origin.row}" if origin.row else "")
    return " › ".join(part for part in (origin.file, origin.sheet, place) if part)


def _limits(limits: PayloadLimits | None, max_responses: int | None) -> PayloadLimits:
    limits = limits or PayloadLimits()
    if max_responses is not None:
        limits = replace(limits, max_responses=max_responses)
    return limits


def parse_payload(data: Any, *, where: str = "payload", max_responses: int | None = None,
                  limits: PayloadLimits | None = None) -> QuestionnairePayload:
    """Validate a decoded payload; refuse it whole in one sentence naming the field."""
    limits = _limits(limits, max_responses)
    if not isinstance(data, dict):
        raise UserInputError(f"{where} must be a JSON object, not {_json_kind(data)}.")
    responses = data.get("responses")
    if isinstance(responses, list) and len(responses) > limits.max_responses:
        raise UserInputError(
            f"{where}: responses holds {len(responses)} entries; at most {limits.max_responses} "
            "are allowed in one round."
        )
    try:
        return QuestionnairePayload.model_validate(data, context={"limits": limits})
    except ValidationError as exc:
        raise UserInputError(f"{where}: {first_error(exc)}") from None


def parse_payload_bytes(name: str, raw: bytes, *, max_responses: int | None = None,
                        limits: PayloadLimits | None = None) -> QuestionnairePayload:
    """Decode and validate the bytes of one payload file, from disk or from an upload."""
    limits = _limits(limits, max_responses)
    refuse_too_large(name, len(raw), limits.max_bytes, "a questionnaire round")
    text = decode_utf8(name, raw)
    repeated: list[bool] = []  # set by the hook when some object repeats a key
    try:
        data = json.loads(text, object_pairs_hook=lambda pairs: _json_object(pairs, repeated))
    except json.JSONDecodeError as exc:
        reason = exc.msg.removesuffix(" at")  # "Invalid control character at"
        raise UserInputError(
            f"{name} is not valid JSON ({reason} at line {exc.lineno}, column {exc.colno})."
        ) from None
    except RecursionError:
        raise UserInputError(
            f"{name} is not a questionnaire round (its JSON is nested too deeply to read)."
        ) from None
    except ValueError:  # an integer longer than Python converts (4,300 digits by default)
        raise UserInputError(
            f"{name} is not a questionnaire round (it holds a number too long to read)."
        ) from None
    if repeated:
        raise UserInputError(_repeated_key_problem(name, data))
    return parse_payload(data, where=name, limits=limits)


class _RepeatedKeys(dict):
    """A JSON object in which a key appears more than once (the value kept is the last, as
    `json` keeps it): the first such key and how often it appears."""

    key: str
    count: int


def _json_object(pairs: list[tuple[str, Any]], repeated: list[bool]) -> dict[str, Any]:
    """`json`'s object_pairs_hook: an object as a dict, marked when a key repeats. Nothing
    is raised here, so the parser's own refusals (depth, numbers) keep their sentences, and
    the path to the object is found once the whole document is read."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    counts = Counter(key for key, _ in pairs)
    marked = _RepeatedKeys(obj)
    marked.key = next(key for key, _ in pairs if counts[key] > 1)
    marked.count = counts[marked.key]
    repeated.append(True)
    return marked


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _shown_key(key: str) -> str:
    """A key as JSON writes it, on one line, at most 80 characters."""
    shown = json.dumps(key, ensure_ascii=False).encode("utf-8", "backslashreplace").decode()
    return shown if len(shown) <= 80 else shown[:76] + '..."'


def _repeated_key_problem(name: str, data: Any) -> str:
    """One sentence for the first object, in document order, that repeats a key."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:  # depth first without recursion: the parser allows ~1,000 levels
        value, path = stack.pop()
        if isinstance(value, _RepeatedKeys):
            where = f"in {path}" if path else (
                "in the payload's top level" if isinstance(data, dict) else "in the payload")
            times = "twice" if value.count == 2 else f"{value.count} times"
            return (f"{name}: the key {_shown_key(value.key)} appears {times} {where}; a reader "
                    "cannot tell which one is meant.")
        if isinstance(value, dict):
            children = [(child, (f"{path}.{key}" if path else key) if _PLAIN_KEY.fullmatch(key)
                         else f"{path or 'payload'}[{_shown_key(key)}]")
                        for key, child in value.items()]
        elif isinstance(value, list):
            children = [(child, f"{path or 'payload'}[{i}]") for i, child in enumerate(value)]
        else:
            continue
        stack.extend(reversed(children))
    raise AssertionError("a repeated key was marked but not found")  # pragma: no cover


def load_payload_file(path: Path, *, max_responses: int | None = None,
                      limits: PayloadLimits | None = None) -> QuestionnairePayload:
    """Read and validate one questionnaire file; an oversized file is refused unread."""
    limits = _limits(limits, max_responses)
    raw = read_user_file(path, max_bytes=limits.max_bytes, what="a questionnaire round")
    return parse_payload_bytes(shown_path(path), raw, limits=limits)


def check_batch_vendor_ids(vendor_ids: Iterable[str], store: EvidenceStore,
                           embedding_model: str) -> None:
    """Refuse, before any round of a batch is written, what would refuse a later round: a
    vendor id differing only in case from a vendor in the store or earlier in the batch, and
    a vendor in the store indexed with another embedding model."""
    earlier: list[str] = []
    for vendor_id in vendor_ids:
        if vendor_id in earlier:
            continue
        if store.existing(vendor_id):
            store.open_vendor(vendor_id, embedding_model=embedding_model)
        else:
            clash = [v for v in earlier if v.lower() == vendor_id.lower()]
            if clash:
                raise UserInputError(
                    f"Vendor id '{vendor_id}' differs only in case from '{clash[0]}' earlier "
                    "in the same batch of rounds; spell the vendor id the same way in every "
                    "round.")
        earlier.append(vendor_id)


def payload_records(payload: QuestionnairePayload) -> list[StoredRecord]:
    """One record per response: embedded Q&A text plus seed 003's metadata."""
    timestamp = payload.timestamp_utc
    records = []
    for response in payload.responses:
        key = response.key
        metadata: dict[str, str | int | float | bool] = {
            "source_type": FOLLOWUP_SOURCE_TYPE,
            "type": followup_type(payload.round_number),
            "source": followup_source(payload.round_number, response),
            "content_hash": key,
            "original_criterion_question_text": response.criterion_question_text or "",
            "question_text": response.question_text,
            "answer_text": response.answer_text,
            "vendor_id": payload.vendor_id,
            "round_number": payload.round_number,
            "timestamp": payload.timestamp,
            "timestamp_epoch": timestamp.timestamp(),
        }
        if response.questionnaire_id:
            metadata["questionnaire_id"] = response.questionnaire_id
            metadata.update(control_metadata(
                response.questionnaire_id,
                response.origin.layout if response.origin is not None else None))
        if response.origin is not None:
            origin = response.origin
            metadata["origin_file"] = origin.file
            for name, value in (("origin_sheet", origin.sheet), ("origin_row", origin.row),
                                ("origin_layout", origin.layout)):
                if value is not None:
                    metadata[name] = value
            if origin.extras:
                metadata["origin_extras"] = json.dumps(origin.extras, sort_keys=True)
        linked = criterion_question_hash(response.criterion_question_text)
        if linked is not None:  # ChromaDB metadata cannot hold None: ad-hoc omits the keys
            metadata["criterion_question_hash"] = linked
            # Beside the contract's hash: the one a pasted criterion's typography folds to.
            metadata["criterion_canonical_hash"] = canonical_criterion_hash(
                response.criterion_question_text or "")
        records.append(StoredRecord(
            id=followup_record_id(payload.vendor_id, key, payload.round_number),
            text=format_embedding_content(response.question_text, response.answer_text),
            metadata=metadata,
        ))
    return records


def first_error(exc: ValidationError) -> str:
    """A validation error's first problem as one sentence naming the payload field."""
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
    if kind == "less_than_equal":
        return (f"field {field} must be {error.get('ctx', {}).get('le')} or less, "
                f"not {error.get('input')!r}.")
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
