"""Vendor and reviewer text made safe to show: never read as markdown or HTML."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from datetime import UTC

from core.models import parse_iso_timestamp
from core.trace.analysis import answer_diff
from dashboard.styles import ADDED_STYLE, REMOVED_STYLE

# A hyphen inside a word ("AES-256") can start no list, rule or heading: it is left as typed.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+.!|<>$~:=^]|(?<!\w)-|-(?!\w))")


def minute_utc(timestamp: str, otherwise: str) -> str:
    """An ISO 8601 time converted to UTC, as 'YYYY-MM-DD HH:MM UTC' (no zone is taken as
    UTC); `otherwise` when it is not one."""
    try:
        return parse_iso_timestamp(timestamp).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return otherwise


def rounds_label(rounds: Sequence[int]) -> str:
    """'rounds 1, 2, 3', 'round 2', or 'none'."""
    distinct = sorted(set(rounds))
    if not distinct:
        return "none"
    return ("round " if len(distinct) == 1 else "rounds ") + ", ".join(map(str, distinct))


def plain(text: str) -> str:
    """Text for st.markdown with every markdown character escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def diff_html(previous: str, current: str) -> str:
    """The current answer with what changed marked: removed words struck through in red,
    added words in green; all vendor text HTML-escaped."""
    pieces = []
    for op, text in answer_diff(previous, current):
        safe = html.escape(text)
        if op == "insert":
            pieces.append(f'<ins style="{ADDED_STYLE}">{safe}</ins>')
        elif op == "delete":
            pieces.append(f'<del style="{REMOVED_STYLE}">{safe}</del>')
        else:
            pieces.append(safe)
    return " ".join(pieces)
