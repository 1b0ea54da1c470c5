"""dashboard.text: times shown in UTC, and reviewer text that stays plain."""

from __future__ import annotations

import pytest

from dashboard.text import minute_utc, plain


@pytest.mark.parametrize(("timestamp", "shown"), [
    ("2024-03-01T12:30:00+02:00", "2024-03-01 10:30 UTC"),
    ("2024-03-01T00:30:00+02:00", "2024-02-29 22:30 UTC"),  # the day before, in UTC
    ("2024-03-01T12:30:00-05:00", "2024-03-01 17:30 UTC"),
    ("2024-03-01T12:30:00Z", "2024-03-01 12:30 UTC"),
    ("2024-03-01T12:30:00", "2024-03-01 12:30 UTC"),  # no zone: taken as UTC
])
def test_a_time_is_shown_in_utc(timestamp, shown):
    assert minute_utc(timestamp, "no time") == shown


@pytest.mark.parametrize("timestamp", ["", "yesterday", "2024-13-01T00:00:00"])
def test_a_non_time_is_shown_as_otherwise(timestamp):
    assert minute_utc(timestamp, "no timestamp") == "no timestamp"


def test_plain_escapes_markdown_but_keeps_hyphens_inside_words():
    assert plain("AES-256 *bold* [link](x)") == r"AES-256 \*bold\* \[link\]\(x\)"
    assert plain("- item\n---") == "\\- item\n\\-\\-\\-"
