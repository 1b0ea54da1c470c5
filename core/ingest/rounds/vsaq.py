"""Google VSAQ answer files: the answers a vendor saved from a VSAQ questionnaire, read with
the questionnaire that asks them.

A VSAQ answers file is one flat JSON object, item id -> value: the text of a line or box
item, "yes"/"no" for a yes-no item, and "checked" (or "") under the id of each choice of a
radio or check group. It holds no question text, so the questionnaire definition it answers
(VSAQ's own JSON, `{"questionnaire": [...]}`, which VSAQ ships with `//` comment lines) must
be beside it: the file named after it (`answers_webapp` answers `webapp.json`) or the one
definition in the folder. Each answered item becomes one answer whose question id is the
item's id (a choice's group id), whose question is the item's text, and whose answer is the
text given or the label of each choice checked."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import UserInputError, shown_path
from core.ingest import decode_utf8, read_user_file
from core.ingest.rounds.answers import Layout, LayoutAnswer, LayoutRead

MAX_VSAQ_BYTES = 5_000_000
_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
_CONCATENATION = re.compile(r'"\s*\+\s*\n\s*"')
_CHOICE_GROUPS = {"radiogroup", "checkgroup"}
_PAYLOAD_KEYS = {"vendor_id", "round_number", "timestamp", "responses"}
_TEXT_ITEMS = {"line", "box", "yesno", "tip", "upload"}
VSAQ_LAYOUT = Layout(key="vsaq", family="VSAQ", id_pattern=re.compile(".*"), headers={},
                     required=())


def vsaqon(text: str) -> Any:
    """VSAQ's JSON with its `//` comment lines and `" +` string concatenations, parsed."""
    cleaned = _CONCATENATION.sub("", _COMMENT.sub("", text))
    return json.loads(cleaned)


def is_answers(data: Any) -> bool:
    """A flat object of strings that is not a bulk payload: what VSAQ saves."""
    return (isinstance(data, dict) and bool(data) and not set(data) & _PAYLOAD_KEYS
            and all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()))


@dataclass(frozen=True)
class _Question:
    id: str
    text: str
    choice: str | None = None  # the label, for a choice of a group


def _questions(items: list[Any], found: dict[str, _Question]) -> None:
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "block" and isinstance(item.get("items"), list):
            _questions(item["items"], found)
            continue
        identifier, text = item.get("id"), " ".join(str(item.get("text") or "").split())
        if not isinstance(identifier, str):
            continue
        if kind in _CHOICE_GROUPS:
            for choice in item.get("choices") or []:
                if isinstance(choice, dict):
                    for choice_id, label in choice.items():
                        found[choice_id] = _Question(identifier, text, str(label))
        elif kind in _TEXT_ITEMS:
            found[identifier] = _Question(identifier, text or identifier)


def read_answers(path: Path) -> dict[str, str] | None:
    """A VSAQ answers file's answers (a flat object of strings, what VSAQ saves), or None
    for anything else, which is read as a JSON round and refused as one if it is not."""
    try:
        data = json.loads(read_user_file(path, max_bytes=MAX_VSAQ_BYTES).decode("utf-8-sig"))
    except (UserInputError, ValueError, RecursionError):  # read as a JSON round, refused so
        return None
    return data if is_answers(data) else None


def definition_for(answers_path: Path) -> Path | None:
    """The questionnaire beside an answers file: named after it, or the only one there."""
    folder = answers_path.parent
    stem = answers_path.stem.removeprefix("answers_")
    named = [p for p in (folder / f"{stem}.json", folder / stem) if p.is_file()
             and p != answers_path]
    if named:
        return named[0]
    found = []
    for path in sorted(folder.glob("*.json")):
        if path == answers_path:
            continue
        try:
            data = vsaqon(decode_utf8(path, read_user_file(path, max_bytes=MAX_VSAQ_BYTES)))
        except (UserInputError, ValueError, RecursionError):
            continue
        if isinstance(data, dict) and isinstance(data.get("questionnaire"), list):
            found.append(path)
    return found[0] if len(found) == 1 else None


def read_vsaq(answers_path: Path, answers: dict[str, str]) -> LayoutRead:
    """The answers of a VSAQ answers file, with their questions from the definition beside
    it; refused in one sentence when there is none."""
    shown = shown_path(answers_path)
    definition = definition_for(answers_path)
    if definition is None:
        raise UserInputError(
            f"{shown} is a VSAQ answers file, which holds no question text; put the VSAQ "
            f"questionnaire it answers ({answers_path.stem.removeprefix('answers_')}.json) "
            "beside it.")
    try:
        data = vsaqon(decode_utf8(definition, read_user_file(definition,
                                                             max_bytes=MAX_VSAQ_BYTES)))
    except (ValueError, RecursionError) as exc:
        raise UserInputError(f"{shown_path(definition)} is not a VSAQ questionnaire (its JSON "
                             f"cannot be read: {exc}).") from None
    if not isinstance(data, dict) or not isinstance(data.get("questionnaire"), list):
        raise UserInputError(f"{shown_path(definition)} is not a VSAQ questionnaire (it has no "
                             "questionnaire list).")
    questions: dict[str, _Question] = {}
    _questions(data["questionnaire"], questions)
    by_id: dict[str, tuple[str, list[str]]] = {}
    unknown = []
    for key, value in answers.items():
        question = questions.get(key)
        if question is None:
            if value.strip():
                unknown.append(key)
            continue
        if question.choice is not None:
            if value != "checked":
                continue
            answer = question.choice
        else:
            answer = value.strip()
            if not answer:
                continue
        by_id.setdefault(question.id, (question.text, []))[1].append(answer)
    notes = [f"Read as VSAQ with the questionnaire {shown_path(definition)}."]
    if unknown:
        notes.append(f"{len(unknown)} answer(s) name items the questionnaire does not have and "
                     f"were not read ({', '.join(unknown[:5])}).")
    read = [LayoutAnswer(questionnaire_id=identifier, question=text, answer="; ".join(given),
                         sheet="", row=0, extras={})
            for identifier, (text, given) in by_id.items()]
    return LayoutRead(layout=VSAQ_LAYOUT, name=f"VSAQ {definition.stem}", sheets=[],
                      answers=read, notes=notes)
