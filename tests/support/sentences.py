"""Whether a message meant for a person (a refusal of the command, the workbench or the
dashboard) is one plain sentence, and which names it gives."""

from __future__ import annotations

import re

# A second sentence begins: a full stop, question or exclamation mark, a space, and then a
# capital, or anything when the stop is not the end of an ellipsis (a quote cut short).
_SECOND_SENTENCE = re.compile(r"[.!?] [A-Z]|(?<!\.\.)[.!?] ")


def one_sentence(text: str, *, quotes_input: bool = False) -> bool:
    """Whether `text` is one plain sentence: not blank, on one line, with no traceback in it,
    ending in a full stop, and no second sentence after a stop. A message that `quotes_input`
    (which may hold any text, stops included) is not checked for a second sentence."""
    return (bool(text.strip()) and "\n" not in text and "Traceback" not in text
            and text.endswith(".") and (quotes_input or not _SECOND_SENTENCE.search(text)))


def assert_one_sentence(message: str, *names: str, quotes_input: bool = False,
                        any_case: bool = False) -> None:
    """`message` is one plain sentence (`one_sentence`) naming each of `names`, letter for
    letter, or in any case when `any_case`."""
    assert one_sentence(message, quotes_input=quotes_input), f"not one sentence: {message!r}"
    for name in names:
        found = name.lower() in message.lower() if any_case else name in message
        assert found, f"{name!r} not named in {message!r}"
