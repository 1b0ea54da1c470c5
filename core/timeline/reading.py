"""A document's facts read from its text at ingest: what it is (`identity`), its dates as its
kind states them, and for an auditor's report its opinion and matters (`opinions`).

- A report: the period it covers (the period its text names most, counted double where the
  words around it say so: "throughout the period", "for the period"), else the date it is
  as of (a point-in-time report), a key ceremony's day, or its own date.
- A certificate: its issue date and its expiry, by their labels ("Date of issue", "Valid
  until", "Expiry date") or a validity period ("valid from X until Y").
- A policy: its version, effective date and last review, by their labels or from its
  revision history table (the newest row).
- A letter: its date, and the period a bridge letter covers."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import date

from core.models import DocumentFacts, DocumentKind
from core.timeline.dates import FoundDate, dates_after, find_dates, find_month, find_periods
from core.timeline.identity import (
    opening,
    read_family,
    read_issuer,
    read_kind,
    read_scope,
    read_title,
)
from core.timeline.opinions import read_matters, read_opinion

# The reading's version: when it learns to read more, a file ingested again has its facts read
# anew (its chunks, unchanged, are kept).
FACTS_VERSION = 1


def _label(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.replace(" ", r"\s+"), re.IGNORECASE)


_PERIOD_WORDS = _label(r"(?:period|throughout|during|covering|covers|review period|"
                       r"examination period|testing period|for the year)")
_AS_OF = _label(r"\bas (?:of|at)\b")
_CEREMONY_DAY = _label(r"\b(?:ceremony|ceremonies)\b[^.]{0,200}?\bon\b|\bon\b(?=[^.]{0,40}"
                       r"(?:19|20)\d\d[^.]{0,120}\bceremony)")
_REPORT_DATE = _label(r"\b(?:report date|date of (?:the )?report|report issued|issued on|"
                      r"issue date|date of issue|dated|completion date|completed on|"
                      r"assessment end date)\b")
_ISSUED = _label(r"\b(?:date of issue|issue date|issued on|issued|granted(?: on)?|date of "
                 r"(?:current )?(?:certification|issuance|registration)|current "
                 r"(?:issue|certificate) date|certification date|effective date|effective "
                 r"from|valid from|date of grant|granted on|re-?issue date|approval date)\b")
# A date that is not the certificate's own: the first certification, an earlier cycle's.
_ORIGINAL = _label(r"\b(?:original|initial|first|previous|prior|last certification cycle|"
                   r"certified by .{0,40} since|since)\b")
_EXPIRES = _label(r"\b(?:valid until|valid till|valid to|valid through|date of expiry|expiry "
                  r"date|expiration date|expiry|expires(?: on)?|expiration|certificate expiry|"
                  r"until)\b")
_VALID_FROM = _label(r"\bvalid(?:ity)? (?:from|period)\b")
_EFFECTIVE = _label(r"\b(?:effective date|effective(?: as of| from| on)?|date effective|"
                    r"policy effective date|approved(?: on)?|approval date|date approved|"
                    r"publication date|published)\b")
_REVIEWED = _label(r"\b(?:date of last review|last review(?:ed)?(?: date| on)?|reviewed(?: on)?|"
                   r"review date|last (?:updated|revised|modified)|updated(?: on)?|revised"
                   r"(?: on)?|revision date)\b")
_NEXT_REVIEW = _label(r"\bnext (?:review|revision)(?: date)?\b")
_VERSION = re.compile(r"\b(?:version|ver\.?|revision|rev\.?|document version|policy version)"
                      r"\s*(?:number|no\.?)?\s*[:#]?[\s|*]*"
                      r"(?P<version>v?\d{1,3}(?:\.\d{1,3}){0,3})\b", re.IGNORECASE)
_TABLE_ROW = re.compile(r"^\s*\|?(?P<row>.*\|.*)$", re.MULTILINE)
_ROW_VERSION = re.compile(r"(?:^|\|)\s*v?(?P<version>\d{1,3}(?:\.\d{1,3}){0,3})\s*(?:\||$)")
_LETTER_DATE = _label(r"\b(?:date|dated)\b")


def _iso(day: date | None) -> str | None:
    return day.isoformat() if day else None


def _covered_period(text: str, dates: list[FoundDate]) -> tuple[date, date] | None:
    """The period the report covers: the one it names most, a naming counted double where
    the words just before it speak of a period."""
    score: Counter[tuple[date, date]] = Counter()
    first: dict[tuple[date, date], int] = {}
    for period in find_periods(text, dates):
        before = text[max(0, period.at - 80):period.at]
        score[(period.start, period.end)] += 2 if _PERIOD_WORDS.search(before) else 1
        first.setdefault((period.start, period.end), period.at)
    if not score:
        return None
    # On a tie, the period named first: a report names the period it covers before any
    # other (a bridge letter's, the next examination's).
    return max(score, key=lambda p: (score[p], -first[p]))


def _most_named(found: list[FoundDate]) -> date | None:
    """The date named most among these, the later on a tie."""
    if not found:
        return None
    counts = Counter(d.day for d in found)
    return max(counts, key=lambda d: (counts[d], d))


def _labelled(text: str, label: re.Pattern[str], dates: list[FoundDate], *,
              reach: int = 60, skip: re.Pattern[str] | None = None) -> list[FoundDate]:
    """The dates that follow this label (those that also follow `skip`, such as an original
    certification date, left out)."""
    found = []
    for day, m in dates_after(text, label, reach=reach, dates=dates):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if skip is not None and skip.search(text[line_start:m.end() + 1]):
            continue
        found.append(day)
    return found


def _report_dates(text: str, head: str, family: str | None, dates: list[FoundDate]
                  ) -> dict[str, str | None]:
    period = _covered_period(text, dates)
    if period is not None:
        return {"period_start": _iso(period[0]), "period_end": _iso(period[1])}
    as_of = _most_named(_labelled(text, _AS_OF, dates, reach=12))
    if as_of is None and family == "key ceremony":
        as_of = _most_named(_labelled(text, _CEREMONY_DAY, dates, reach=40))
    if as_of is None:
        as_of = _most_named(_labelled(text, _REPORT_DATE, dates))
    if as_of is None:
        head_dates = find_dates(head)
        as_of = head_dates[0].day if head_dates else find_month(head)
    return {"as_of": _iso(as_of)}


def _certificate_dates(text: str, dates: list[FoundDate]) -> dict[str, str | None]:
    issued = _labelled(text, _ISSUED, dates, skip=_ORIGINAL)
    expires = _labelled(text, _EXPIRES, dates, skip=_ORIGINAL)
    valid = [p for p in find_periods(text, dates)
             if _VALID_FROM.search(text[max(0, p.at - 60):p.at])]
    as_of = max((d.day for d in issued), default=None)
    until = max((d.day for d in expires), default=None)
    if valid:
        as_of = as_of or valid[-1].start
        until = until or valid[-1].end
    if until is None and as_of is None and len({d.day for d in dates}) >= 2:
        # No labels (a scanned certificate read by OCR can lose them): the latest date, when
        # it is a year or more after every other, is its expiry; the latest of the others
        # its issue.
        days = sorted({d.day for d in dates})
        if (days[-1] - days[-2]).days >= 360:
            until, as_of = days[-1], days[-2]
    if until is not None and as_of is not None and as_of >= until:
        as_of = None
    return {"as_of": _iso(as_of), "valid_until": _iso(until)}


def _revision_table(text: str) -> tuple[str | None, date | None]:
    """(version, date) of a revision history table's newest row: the row of the highest
    version number, and its date (None where that row's date is a placeholder, "X Y, 2023")."""
    best: tuple[tuple[int, ...], str, date | None] | None = None
    for m in _TABLE_ROW.finditer(text):
        row = m["row"]
        version = _ROW_VERSION.search(row)
        if version is None or not re.search(r"[A-Za-z]{3}|\d{4}", row):
            continue
        number = tuple(int(part) for part in version["version"].split("."))
        row_dates = find_dates(row)
        day = max((d.day for d in row_dates), default=None)
        if day is None and not re.search(r"(?:19|20)\d\d", row):
            continue  # a row of another table, with no date at all
        if best is None or number >= best[0]:
            best = (number, version["version"], day)
    return (best[1], best[2]) if best else (None, None)


def _policy_dates(text: str, head: str, dates: list[FoundDate]) -> dict[str, str | None]:
    version_match = _VERSION.search(head) or _VERSION.search(text[:20000])
    version = version_match["version"] if version_match else None
    # The policy's own effective date stands near its top ("Effective date: ..."); one deep
    # in its text is a clause's ("Effective February 15, 2024, CAs must ...").
    effective = max((d.day for d in _labelled(head, _EFFECTIVE, find_dates(head))),
                    default=None)
    reviewed = [d.day for d in _labelled(text, _REVIEWED, dates, skip=_NEXT_REVIEW)]
    table_version, table_day = _revision_table(text)
    if table_version is not None:
        version = version or table_version
    if table_day is not None:
        reviewed.append(table_day)
    if effective is None and not reviewed:  # a document dated only "Date: ..." at its top
        effective = max((d.day for d in _labelled(head, _LETTER_DATE, find_dates(head),
                                                  reach=20)), default=None)
    # Its last review where it states one, else its effective date.
    reviewed_on = max(reviewed, default=None) or effective
    return {"version": version.lstrip("vV") if version else None,
            "effective_on": _iso(effective), "reviewed_on": _iso(reviewed_on)}


def _letter_dates(text: str, head: str, dates: list[FoundDate]) -> dict[str, str | None]:
    periods = find_periods(text, dates)
    labelled = _labelled(head, _LETTER_DATE, find_dates(head), reach=20)
    head_dates = find_dates(head[:600])
    as_of = (labelled[0].day if labelled else head_dates[0].day if head_dates
             else max((d.day for d in dates), default=None))
    found: dict[str, str | None] = {"as_of": _iso(as_of)}
    # The period a letter covers has passed when it is written (a bridge letter's gap); a
    # period ending later is one it looks ahead to (the next report's).
    past = [p for p in periods if as_of is None or p.end <= as_of]
    if past:
        latest = max(past, key=lambda p: p.end)
        found.update(period_start=_iso(latest.start), period_end=_iso(latest.end))
    return found


def _other_dates(text: str, dates: list[FoundDate]) -> dict[str, str | None]:
    reviewed = max((d.day for d in _labelled(text, _REVIEWED, dates, skip=_NEXT_REVIEW)),
                   default=None)
    as_of = _most_named(_labelled(text, _AS_OF, dates, reach=12))
    return {"reviewed_on": _iso(reviewed), "as_of": _iso(as_of)}


_FRONT_MATTER = re.compile(r"\A\s*---[ \t]*\n(?P<body>.*?)\n---[ \t]*\n", re.DOTALL)
_FRONT_KEY = re.compile(r"^(?P<key>[A-Za-z][\w-]*)[ \t]*:[ \t]*(?P<value>.*)$", re.MULTILINE)


def _front_matter(pages: Sequence[str], headings: Sequence[str]
                  ) -> tuple[list[str], list[str]]:
    """A page's YAML front matter (a static site's page: `title:`, `last_reviewed_on:`) read
    as what it says: its title first among the headings, its keys as words ("last reviewed
    on: 2024-07-29") the labels below find."""
    found = _FRONT_MATTER.match(pages[0]) if pages else None
    if found is None:
        return list(pages), list(headings)
    lines, title = [], None
    for m in _FRONT_KEY.finditer(found["body"]):
        key, value = m["key"].replace("_", " ").replace("-", " "), m["value"].strip(" '\"")
        if key.lower() == "title" and value:
            title = value
        lines.append(f"{key}: {value}")
    rest = pages[0][found.end():]
    return (["\n".join(lines) + "\n\n" + rest, *pages[1:]],
            [title, *headings] if title else list(headings))


def read_facts(pages: Sequence[str], *, source: str, headings: Sequence[str] = ()
               ) -> DocumentFacts:
    """The facts a document states of itself: `pages` are its texts (one per PDF page, one
    for any other file), `headings` its headings in order where it has them, `source` the
    name it is stored under (read only when its text does not say what it is)."""
    pages, headings = _front_matter(pages, headings)
    text = "\n".join(pages)
    head = opening(pages)
    dates = find_dates(text)
    family = read_family(pages)
    kind: DocumentKind = read_kind(pages, headings, source, family)
    if kind == "report":
        found = _report_dates(text, head, family, dates)
    elif kind == "certificate":
        found = _certificate_dates(text, dates)
    elif kind == "policy":
        found = _policy_dates(text, head, dates)
    elif kind == "letter":
        found = _letter_dates(text, head, dates)
    else:
        found = _other_dates(text, dates)
    opinion = read_opinion(text) if kind == "report" else None
    return DocumentFacts(
        kind=kind, title=read_title(pages, headings, kind), issuer=read_issuer(pages, kind),
        family=family if kind in ("report", "certificate", "letter") else None,
        scope=read_scope(pages) if kind in ("report", "certificate") else None,
        opinion=opinion,
        matters=read_matters(pages) if kind == "report" else [],
        **{key: value for key, value in found.items() if value is not None})
