"""An auditor's opinion and the matters an auditor's report names, read from the auditor's own
words.

The opinion is read from the auditor's opinion paragraph ("In our opinion, ...") and from its
headings ("Qualified Opinion", "Disclaimer of Opinion"), never from management's assertion,
which may say "except for the matters described below" above a clean opinion. The matters are
the paragraphs headed "Emphasis of Matter" and "Other Matter(s)", and the exceptions the tests
of controls found, each as one sentence a reviewer can read."""

from __future__ import annotations

import re
from collections.abc import Sequence

from core.models import Opinion

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"\u201c])")
_OPINION_SENTENCE = re.compile(r"\bin\s+our\s+opinion\b", re.IGNORECASE)
# Headings an auditor's report carries when its opinion is modified.
_MODIFIED_HEADINGS: tuple[tuple[Opinion, re.Pattern[str]], ...] = (
    ("disclaimer", re.compile(r"^[\s#*]*disclaimer\s+of\s+opinion\b",
                              re.IGNORECASE | re.MULTILINE)),
    ("adverse", re.compile(r"^[\s#*]*(?:basis\s+for\s+)?adverse\s+"
                           r"opinion\b", re.IGNORECASE | re.MULTILINE)),
    ("qualified", re.compile(r"^[\s#*]*(?:basis\s+for\s+)?qualified\s+"
                             r"opinion\b", re.IGNORECASE | re.MULTILINE)),
)
# A disclaimer says why the auditor could not conclude; "we do not express an opinion ... on its
# cybersecurity risk management program" alone is a clean report's limit, not a disclaimer.
_DISCLAIMS = re.compile(r"\b(?:not|unable)\s+(?:been\s+)?able\s+to"
                        r"\s+obtain\s+sufficient\s+appropriate"
                        r"\s+evidence\b.{0,600}?\bdo\s+not\s+express"
                        r"\s+an\s+opinion\b", re.IGNORECASE | re.DOTALL)
_EXCEPT_FOR = re.compile(r"\bexcept\s+for\b", re.IGNORECASE)
_ADVERSE_WORDS = re.compile(
    r"\bbecause\s+of\s+the\s+(?:significance|effects?)\b.{0,400}?\b"
    r"(?:not|did\s+not|does\s+not|were\s+not|was\s+not)\b",
    re.IGNORECASE | re.DOTALL)
_IN_ALL_MATERIAL = re.compile(r"\bin\s+all\s+material\s+respects\b",
                              re.IGNORECASE)
_MATTER_HEADING = re.compile(
    r"^[\s#*]*(?P<kind>emphasis\s+of\s+(?:a\s+)?matters?|other"
    r"\s+matters?)[\s*:.]*$", re.IGNORECASE | re.MULTILINE)
# A test of controls that found something: "Exception noted.", "Deviations were identified",
# a paragraph headed "Deviation." or "Exception:". "No exceptions noted." is not one.
_EXCEPTION = re.compile(
    r"\b(?:exceptions?|deviations?)\s+(?:were\s+|was\s+)?(?:noted|"
    r"identified|found)\b|(?P<head>^[\s*#|-]*(?:exceptions?|deviations?)\s*[.:]"
    r"\s+(?=\S))", re.IGNORECASE | re.MULTILINE)
# A line that names a part of the report (its contents, a heading), not a finding.
_PART_NAME = re.compile(r"^[\s*#|-]*(?:appendix|section|contents|item\s+\d+"
                        r"\s*$)", re.IGNORECASE)
_NO_EXCEPTION = re.compile(r"\bno\s+(?:relevant\s+)?(?:exceptions?|deviations?)"
                           r"\b|\bnot\s+identify\s+any\b", re.IGNORECASE)
# A sentence that only says where exceptions are described is not one of them.
_POINTER = re.compile(r"\b(?:are|is|were)\s+(?:described|listed|presented|summari[sz]ed|"
                      r"included)\s+in\b|\bmeans\s+that\b", re.IGNORECASE)
MAX_MATTERS = 12
MAX_MATTER_CHARS = 400


def _sentences(text: str) -> list[str]:
    return [" ".join(s.split()) for s in _SENTENCE_END.split(text) if s.strip()]


def _sentence_at(text: str, at: int) -> str:
    """The sentence of the text that holds position `at`."""
    start = max(text.rfind(". ", 0, at), text.rfind("\n\n", 0, at), text.rfind(".\n", 0, at))
    start = 0 if start < 0 else start + 2
    tail = _sentences(text[start:start + 1200])
    return tail[0] if tail else ""


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MATTER_CHARS else text[:MAX_MATTER_CHARS - 3].rstrip() + "..."


def opinion_sentences(text: str) -> list[str]:
    """The sentences of the text that give the auditor's opinion ("In our opinion, ...")."""
    found = []
    for m in _OPINION_SENTENCE.finditer(text):
        tail = text[m.start():m.start() + 1500]
        sentence = _sentences(tail)[0] if tail.strip() else ""
        found.append(sentence)
    return found


def read_opinion(text: str) -> Opinion | None:
    """The auditor's opinion: a modified opinion's heading or words first, else unmodified
    where an opinion paragraph says "in all material respects" without an exception; None
    where the text gives no auditor's opinion."""
    for opinion, heading in _MODIFIED_HEADINGS:
        if heading.search(text):
            return opinion
    if _DISCLAIMS.search(text):
        return "disclaimer"
    sentences = opinion_sentences(text)
    if not sentences:
        return None
    if any(_ADVERSE_WORDS.search(s) for s in sentences):
        return "adverse"
    if any(_EXCEPT_FOR.search(s) for s in sentences):
        return "qualified"
    if any(_IN_ALL_MATERIAL.search(s) or "fairly" in s.lower() or "suitably" in s.lower()
           or "effective" in s.lower() for s in sentences):
        return "unmodified"
    return None


def read_matters(pages: Sequence[str]) -> list[str]:
    """The matters the report names, each one sentence: an emphasis of matter or other
    matter paragraph (its first sentence), then each exception its tests found (with its
    page where the report has pages), at most MAX_MATTERS."""
    matters: list[str] = []
    numbered = len(pages) > 1
    for number, page in enumerate(pages, start=1):
        where = f" (page {number})" if numbered else ""
        for m in _MATTER_HEADING.finditer(page):
            body = page[m.end():m.end() + 2000]
            first = next((s for s in _sentences(body) if len(s.split()) > 4), None)
            if first:
                kind = "Emphasis of matter" if m["kind"].lower().startswith("emphasis") \
                    else "Other matter"
                matters.append(_clip(f"{kind}{where}: {first}"))
        for m in _EXCEPTION.finditer(page):
            line_start = page.rfind("\n", 0, m.start()) + 1
            line_end = page.find("\n", m.end())
            line = page[line_start:line_end if line_end >= 0 else len(page)]
            if _NO_EXCEPTION.search(line):
                continue
            if m["head"]:  # a paragraph headed "Deviation.": its first sentence, after the
                # heading above it where that names the control ("Item 1 - CC6.2 ...")
                above = page[:line_start].rstrip().rsplit("\n", 1)[-1].strip(" #*")
                sentence = (_sentences(page[m.end():m.end() + 1200]) or [""])[0]
                named = re.sub(r"^item\s+\d+\s*[-\u2013:]\s*", "",
                               above, flags=re.IGNORECASE)
                detail = f"{named}: {sentence}" if named and len(named) < 120 else sentence
            elif _PART_NAME.match(line):
                continue
            elif line.count("|") >= 2:  # a row of a results table: the control and its result
                cells = [" ".join(c.split()) for c in line.split("|") if c.strip()]
                detail = f"{cells[0]} {cells[1]} Result: {cells[-1]}" if len(cells) >= 3 \
                    else " ".join(cells)
            else:
                detail = _sentence_at(page, m.start())
            if detail and not _POINTER.search(detail) and len(detail.split()) > 3:
                matters.append(_clip(f"Exception in testing{where}: {detail}"))
    unique = list(dict.fromkeys(matters))
    if len(unique) > MAX_MATTERS:
        left = len(unique) - MAX_MATTERS + 1
        unique = unique[:MAX_MATTERS - 1] + [f"{left} more matters are named in the report."]
    return unique
