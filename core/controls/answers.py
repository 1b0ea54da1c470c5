"""What a follow-up answer's control is: read from the id the vendor keyed it by (and the
questionnaire's layout, which tells a SIG id from an ISO one), kept in the answer's metadata
and in its link, and joined to the text the answer is searched by.

The catalog's title and statement join the searched text only: the embedding of an answer
keyed by AC-7 reads "AC-7 Unsuccessful Logon Attempts. Enforce a limit of ... consecutive
invalid logon attempts ..." before the vendor's words, so plain search meets it for "wrong
passwords" even where the vendor wrote "NA - delegated to the customer's identity provider".
What is stored, shown and quoted stays the vendor's answer as sent."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from core.controls.catalog import nist_catalog
from core.controls.ids import ControlRef, parse_control_id
from core.models import AnswerControl

NIST_PREFIX = "sp800-53:"
# The catalog words joined to an answer's searched text, at most.
SEARCH_WORDS = 60


@lru_cache(maxsize=65536)
def answer_control(questionnaire_id: str | None, layout: str | None = None
                   ) -> ControlRef | None:
    """The control an answer keyed by this id is, under this layout; None for an id of no
    known framework (a HECVAT id, a vendor's own numbering)."""
    if not questionnaire_id:
        return None
    return parse_control_id(str(questionnaire_id), layout)


def control_question(control_id: str) -> str:
    """The question an answer keyed by a control id answers, where its file asks none (a
    responsibility matrix, a control implementation statement): the id as the file writes
    it, and the control's title where the catalog has it ("AC-7 Unsuccessful Logon
    Attempts")."""
    ref = answer_control(control_id.strip())
    return f"{control_id.strip()} {ref.title}" if ref is not None and ref.title else (
        control_id.strip())


def control_metadata(questionnaire_id: str | None, layout: str | None
                     ) -> dict[str, str]:
    """The metadata keys an answer keyed by a known control carries (none otherwise)."""
    ref = answer_control(questionnaire_id, layout)
    if ref is None:
        return {}
    found = {"control_key": ref.key, "control_framework": ref.framework, "control_id": ref.id}
    if ref.title:
        found["control_title"] = ref.title
    if ref.part:
        found["control_part"] = ref.part
    return found


def stored_control_key(metadata: Mapping[str, Any]) -> str | None:
    """The control key of a stored answer or link: the one written with it, or, for one
    written before answers knew their control, read from its questionnaire id."""
    key = metadata.get("control_key")
    if key:
        return str(key)
    ref = answer_control(metadata.get("questionnaire_id") or None,
                         metadata.get("origin_layout") or None)
    return ref.key if ref is not None else None


def control_of(metadata: Mapping[str, Any]) -> AnswerControl | None:
    """The control a stored answer is keyed by, as traces show it."""
    if metadata.get("control_key"):
        return AnswerControl(framework=str(metadata.get("control_framework") or ""),
                             id=str(metadata.get("control_id") or ""),
                             title=metadata.get("control_title") or None)
    ref = answer_control(metadata.get("questionnaire_id") or None,
                         metadata.get("origin_layout") or None)
    if ref is None:
        return None
    return AnswerControl(framework=ref.framework, id=ref.id, title=ref.title)


def catalog_words(metadata: Mapping[str, Any]) -> str:
    """What the catalog says of the 800-53 control an answer is keyed by (its id, title and
    the start of its statement); "" for a record of no such control."""
    key = metadata.get("control_key")
    if not key or not str(key).startswith(NIST_PREFIX):
        return ""
    control = nist_catalog().get(str(key)[len(NIST_PREFIX):])
    return control.search_text(SEARCH_WORDS) if control is not None else ""


def searched_text(text: str, metadata: Mapping[str, Any]) -> str:
    """The text a record is embedded from: an answer keyed by an 800-53 control has the
    catalog's words on it ahead of its own text; any other record is its text."""
    words = catalog_words(metadata)
    return f"{words}\n{text}" if words else text
