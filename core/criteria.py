"""The one check a criterion or a question passes before anything is retrieved for it."""

from __future__ import annotations

from dataclasses import dataclass

from core.config import MAX_CRITERION_CHARS
from core.errors import UserInputError


@dataclass(frozen=True)
class CriterionEntry:
    """One criterion of a criteria list: its text, the id the reviewer gave it (echoed in
    every output), and the question to send the vendor when it differs from the text."""

    text: str
    id: str | None = None
    question: str | None = None
    # The questionnaire ids whose answers answer this criterion (a criteria file's
    # questionnaire_ids column): they link to it as a hash match does.
    questionnaire_ids: tuple[str, ...] = ()
    # The controls that answer it, as a reviewer gave them (a criteria file's controls
    # column): answers keyed by them link to it, accepted.
    controls: tuple[str, ...] = ()
    # Whether the file gave a controls cell at all (an empty one decides "no control").
    controls_given: bool = False

    @property
    def asked(self) -> str:
        """The question a questionnaire round puts to the vendor for this criterion."""
        return self.question or self.text


def _check_text(text: object, what: str, empty: str) -> str:
    if not isinstance(text, str):
        raise UserInputError(f"The {what} must be text, not {type(text).__name__}.")
    if not text.strip():
        raise UserInputError(f"The {what} is empty; {empty}.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UserInputError(
            f"The {what} holds a character that is not valid Unicode text (a lone "
            "surrogate).") from None
    if "\x00" in text:
        raise UserInputError(f"The {what} contains a NUL byte.")
    if len(text) > MAX_CRITERION_CHARS:
        raise UserInputError(
            f"The {what} is {len(text)} characters long; at most {MAX_CRITERION_CHARS} "
            "are allowed.")
    return text.strip()


def check_criterion(criterion: object) -> str:
    """The criterion with its ends trimmed, or a one-sentence refusal."""
    return _check_text(criterion, "criterion", "give the criterion question to retrieve for")


def check_question(question: object) -> str:
    """A reviewer's question with its ends trimmed, or a one-sentence refusal (the same
    limits as a criterion: both are searched the same way)."""
    return _check_text(question, "question", "type what you want to know about the vendor")
