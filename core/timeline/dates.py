"""Dates as documents write them in prose: "September 1, 2024", "SEPTEMBER 1, 2022", "1st
April 2024", "2026-03-14", "14/03/2026", "14.03.2026", and periods made of two of them ("from
September 1, 2024, to August 31, 2025", "January 1 - December 31, 2024").

Only dates a reader would take as dates are found: a year from 1990 to 2099, a real day of
its month. A numeric date with slashes is read month first unless the document writes one
that can only be day first (14/03/2026): one document keeps one convention."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8,
    "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}
# A month as written, a misspelt long form included ("Septemeber"): its first four letters
# and a few more.
_MONTH = (r"(?:janu[a-z]{0,5}|jan|febr[a-z]{0,5}|feb|marc[a-z]?|mar|apri[a-z]?|apr|may|june?|"
          r"july?|augu[a-z]{0,4}|aug|sept[a-z]{0,6}|sep|octo[a-z]{0,4}|oct|nove[a-z]{0,5}|nov|"
          r"dece[a-z]{0,5}|dec)")
_DAY = r"(?:[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)\d\d"
# A space of any kind, a line break included (a PDF line may end inside a date).
_S = r"\s+"

_PATTERNS = (
    # September 1, 2024 / Sept. 1 2024 / SEPTEMBER 1, 2022
    ("mdy", re.compile(rf"\b(?P<month>{_MONTH})\.?{_S}(?P<day>{_DAY}),?{_S}(?P<year>{_YEAR})\b",
                       re.IGNORECASE)),
    # 1 September 2024 / 1st of April, 2024 / 01-Apr-2024
    ("dmy", re.compile(rf"\b(?P<day>{_DAY})(?:{_S}of)?[\s\-]+(?P<month>{_MONTH})\.?,?"
                       rf"[\s\-]+(?P<year>{_YEAR})\b", re.IGNORECASE)),
    # 2026-03-14 / 2026/03/14 / 2026.03.14
    ("iso", re.compile(rf"\b(?P<year>{_YEAR})(?P<sep>[-/.])(?P<month>[01]?\d)(?P=sep)"
                       r"(?P<day>[0-3]?\d)\b")),
    # 14/03/2026, 03/14/2026, 14.03.2026, 14-03-2026
    ("numeric", re.compile(rf"(?<![\d.])(?<!version )(?<!v)\b(?P<first>[0-3]?\d)(?P<sep>[/.\-])"
                           rf"(?P<second>[01]?\d)(?P=sep)(?P<year>{_YEAR})\b(?!\.\d)",
                           re.IGNORECASE)),
)
# A month and day without a year, as the start of a period whose end gives the year
# ("January 1 to December 31, 2024").
_PARTIAL = re.compile(rf"\b(?P<month>{_MONTH})\.?{_S}(?P<day>{_DAY})\b", re.IGNORECASE)
_PARTIAL_DMY = re.compile(rf"\b(?P<day>{_DAY}){_S}(?P<month>{_MONTH})\b", re.IGNORECASE)
# What joins the two dates of a period: "to", "through", "until", a dash; "and" after
# "between".
_JOINER = re.compile(r"\s*,?\s*(?:to|through|thru|until|till|and|up to|[-\u2013\u2014])"
                     r"\s*", re.IGNORECASE)


@dataclass(frozen=True)
class FoundDate:
    """A date found in a text: the day, and where it stands in the text."""

    day: date
    start: int
    end: int


@dataclass(frozen=True)
class Period:
    """Two dates joined as a period ("from X to Y"), the first no later than the second."""

    start: date
    end: date
    at: int  # where the first date starts in the text
    stop: int  # where the second date ends


def _month(text: str) -> int:
    return _MONTHS[text[:3].lower()]


def _day(text: str) -> int:
    return int(re.match(r"\d+", text).group())  # type: ignore[union-attr]


def _make(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def day_first(text: str) -> bool:
    """Whether the text's numeric dates with slashes are written day first: one of them can
    only be read so (its first number is over 12), and none can only be read month first."""
    firsts = [(int(m["first"]), int(m["second"])) for m in _PATTERNS[3][1].finditer(text)
              if m["sep"] == "/"]
    return any(a > 12 for a, _ in firsts) and not any(b > 12 for _, b in firsts)


def find_dates(text: str) -> list[FoundDate]:
    """Every date the text writes, in the order they stand (overlapping readings: the one
    that starts first and is longest)."""
    dayfirst = day_first(text)
    found: list[FoundDate] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            year = int(m["year"])
            if kind in ("mdy", "dmy"):
                day = _make(year, _month(m["month"]), _day(m["day"]))
            elif kind == "iso":
                day = _make(year, int(m["month"]), int(m["day"]))
            else:
                a, b = int(m["first"]), int(m["second"])
                # Dots and dashes are written day first (14.03.2026); slashes as the document
                # writes them.
                first_is_day = m["sep"] != "/" or dayfirst or a > 12
                day = _make(year, b, a) if first_is_day else _make(year, a, b)
            if day is not None:
                found.append(FoundDate(day, m.start(), m.end()))
    found.sort(key=lambda d: (d.start, -(d.end - d.start)))
    kept: list[FoundDate] = []
    for item in found:
        if kept and item.start < kept[-1].end:
            continue
        kept.append(item)
    return kept


_MONTH_YEAR = re.compile(rf"\b(?P<month>{_MONTH})\.?,?{_S}(?P<year>{_YEAR})\b|"
                         rf"\b(?P<mm>0?[1-9]|1[0-2])[./](?P<yyyy>{_YEAR})\b", re.IGNORECASE)


def find_month(text: str) -> date | None:
    """The first month a text names with its year and no day ("September 2018", "09.2018"),
    as its first day: a document dated by no full date is dated to its month."""
    for m in _MONTH_YEAR.finditer(text):
        if m["month"]:
            return _make(int(m["year"]), _month(m["month"]), 1)
        return _make(int(m["yyyy"]), int(m["mm"]), 1)
    return None


def _partial_before(text: str, end_date: FoundDate, joiner_start: int) -> FoundDate | None:
    """A month and day without a year just before the joiner, dated by the period's end."""
    head = text[max(0, joiner_start - 20):joiner_start]
    for pattern in (_PARTIAL, _PARTIAL_DMY):
        for m in pattern.finditer(head):
            if m.end() != len(head):
                continue
            month, day = _month(m["month"]), _day(m["day"])
            year = end_date.day.year
            start = _make(year, month, day)
            if start is not None and start > end_date.day:
                start = _make(year - 1, month, day)
            if start is not None:
                offset = joiner_start - len(head) + m.start()
                return FoundDate(start, offset, joiner_start)
    return None


def find_periods(text: str, dates: list[FoundDate] | None = None) -> list[Period]:
    """Every period the text writes as two dates joined by "to", "through", "until", "and" or
    a dash, the first no later than the second and at most three years apart."""
    dates = find_dates(text) if dates is None else dates
    periods: list[Period] = []
    for i, second in enumerate(dates):
        first = dates[i - 1] if i else None
        if first is not None:
            joiner = _JOINER.fullmatch(text, first.end, second.start)
            if joiner is not None:
                if first.day < second.day <= _add_years(first.day, 3):
                    periods.append(Period(first.day, second.day, first.start, second.end))
                continue
        # "January 1 - December 31, 2024": the first date has no year of its own.
        gap = text[max(0, second.start - 12):second.start]
        joiner_match = re.search(r"\s*,?\s*(?:to|through|thru|until|and|[-\u2013\u2014])"
                                 r"\s*$", gap, re.IGNORECASE)
        if joiner_match is not None:
            at = second.start - len(gap) + joiner_match.start()
            start = _partial_before(text, second, at)
            if start is not None and start.day < second.day and (
                    first is None or first.end <= start.start):
                periods.append(Period(start.day, second.day, start.start, second.end))
    return periods


def _add_years(day: date, years: int) -> date:
    try:
        return day.replace(year=day.year + years)
    except ValueError:  # 29 February
        return day.replace(year=day.year + years, day=28)


def dates_after(text: str, label: re.Pattern[str], *, reach: int = 60,
                dates: list[FoundDate] | None = None) -> Iterator[tuple[FoundDate, re.Match]]:
    """Each date that follows a match of `label` within `reach` characters, with nothing but
    punctuation, spaces and a few joining words between them ("Valid until: 2026-03-14",
    "Date of Last Review\\nJune 18, 2025", "Effective as of March 3, 2025")."""
    dates = find_dates(text) if dates is None else dates
    starts = [d.start for d in dates]
    for m in label.finditer(text):
        at = bisect.bisect_left(starts, m.end())
        if at >= len(dates):
            continue
        found = dates[at]
        between = text[m.end():found.start]
        if found.start - m.end() <= reach and _FILLER.fullmatch(between):
            yield found, m


# What may stand between a label and its date.
_FILLER = re.compile(r"[\s:;,.\-\u2013\u2014|*_#()\[\]]*(?:(?:is|was|on|of|as of|as at|"
                     r"date|dated|from|the|this|effective|certificate|certification|"
                     r"registration|report|policy|document|:)[\s:;,.\-|*_]*)*",
                     re.IGNORECASE)
