"""The one check a criterion passes before anything is retrieved for it."""

from __future__ import annotations

from core.config import MAX_CRITERION_CHARS
from core.errors import UserInputError


def check_criterion(criterion: object) -> str:
    """The criterion with its ends trimmed, or a one-sentence refusal."""
    if not isinstance(criterion, str):
        raise UserInputError(
            f"The criterion must be text, not {type(criterion).__name__}.")
    if not criterion.strip():
        raise UserInputError("The criterion is empty; give the criterion question to retrieve for.")
    try:
        criterion.encode("utf-8")
    except UnicodeEncodeError:
        raise UserInputError(
            "The criterion holds a character that is not valid Unicode text (a lone "
            "surrogate).") from None
    if "\x00" in criterion:
        raise UserInputError("The criterion contains a NUL byte.")
    if len(criterion) > MAX_CRITERION_CHARS:
        raise UserInputError(
            f"The criterion is {len(criterion)} characters long; at most {MAX_CRITERION_CHARS} "
            "are allowed.")
    return criterion.strip()
