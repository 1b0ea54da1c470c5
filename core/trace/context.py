"""The LLM context (seed 000's XML) and prompt (seed 003), with vendor text escaped."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from core.models import Candidate, FollowupHit, by_round, parse_iso_timestamp

# Characters XML 1.0 cannot carry at all; they become U+FFFD so the context always parses.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# Every XML parser reads CR LF and a lone CR as LF; doing it here keeps the context as
# written identical to the context as read.
_CARRIAGE_RETURN = re.compile("\r\n?")
# The line breaks a reader may honour that XML 1.0 can carry (the rest are already U+FFFD).
_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")


def xml_text(text: str) -> str:
    """Text safe inside an XML element: markup escaped, illegal characters replaced by U+FFFD,
    CR LF and CR read as LF."""
    return escape(_CARRIAGE_RETURN.sub("\n", _NOT_XML.sub("\ufffd", text)))


def _indented(text: str) -> str:
    """Vendor text inside the multi-round entry: every line break becomes LF plus two spaces,
    so no line a vendor writes can start a `[Round k]`, `Question:` or `Answer:` line."""
    return _LINE_BREAK.sub("\n  ", _NOT_XML.sub("\ufffd", text))


def source_label(source: str, section: str | None, page: int | None,
                 ocr: bool = False) -> str:
    """Where an excerpt comes from: the document, then its section ("policy.docx \u00a7
    Access control > Passwords") or its PDF page, marked when OCR read it."""
    label = f"{source} \u00a7 {section}" if section else source
    if page:
        return f"{label} (page {page}, read by OCR)" if ocr else f"{label} (page {page})"
    return f"{label} (read by OCR)" if ocr else label


def evidence_source(candidate: Candidate) -> str:
    """An excerpt's label, as its <source> and its prompt header show it."""
    return source_label(candidate.source, candidate.section, candidate.page, candidate.ocr)


@dataclass(frozen=True)
class ContextEntry:
    """One <index_N> of the context: what it holds and where that came from."""

    index: int
    kind: str  # "excerpt" | "follow-ups"
    source: str  # the document (or questionnaire) it came from
    ids: tuple[str, ...]
    types: tuple[str, ...]
    pages: tuple[int, ...]
    rounds: tuple[int, ...]
    label: str = ""  # the entry's <source> text
    excerpt: Candidate | None = None
    followups: tuple[FollowupHit, ...] = ()


def context_entries(evidence: Sequence[Candidate], followups: Sequence[FollowupHit]
                    ) -> list[ContextEntry]:
    """The context's layout, in one place: excerpts as entries 1..N, then the linked
    follow-ups as one entry N+1, in ascending rounds (seed 000)."""
    entries = [
        ContextEntry(i, "excerpt", c.source, (c.id,), (c.type,),
                     (c.page,) if c.page else (), (c.round_number,) if c.round_number else (),
                     label=evidence_source(c), excerpt=c)
        for i, c in enumerate(evidence, start=1)
    ]
    if followups:
        ordered = tuple(by_round(followups))
        source = followups_label(ordered)
        entries.append(ContextEntry(
            len(evidence) + 1, "follow-ups", source, tuple(f.id for f in ordered),
            tuple(f"followup_response:{f.round_number}" for f in ordered), (),
            tuple(f.round_number for f in ordered), label=source, followups=ordered))
    return entries


def followups_label(ordered: Sequence[FollowupHit]) -> str:
    """The <source> of the follow-up entry: the latest answer's source, marked "(Multiple
    Rounds)" when several rounds answer (seed 000). Answers that carry questionnaire ids
    name every id they hold (one question asked under BCR-01.2 and CCC-01.2 is two answers),
    the ids after the file and sheet they share."""
    rounds = len({hit.round_number for hit in ordered})
    several = " (Multiple Rounds)" if len(ordered) > 1 and (
        rounds > 1 or not any(hit.questionnaire_id for hit in ordered)) else ""
    ids = list(dict.fromkeys(hit.questionnaire_id for hit in ordered if hit.questionnaire_id))
    if len(ids) < 2:
        return ordered[-1].source + several
    places = list(dict.fromkeys(hit.source.rsplit(" › ", 1)[0] for hit in ordered
                                if hit.questionnaire_id))
    if len(places) == 1:
        return f"{places[0]} › {', '.join(ids)}{several}"
    return "; ".join(dict.fromkeys(hit.source for hit in ordered)) + several


def _round_heading(hit: FollowupHit) -> str:
    """[Round 3], or [Round 3 › CEK-12.1] for an answer with a questionnaire id."""
    return (f"[Round {hit.round_number} › {one_line(hit.questionnaire_id)}]"
            if hit.questionnaire_id else f"[Round {hit.round_number}]")


def _entry_xml(entry: ContextEntry) -> str:
    if entry.excerpt is not None:
        content = entry.excerpt.text
    elif len(entry.followups) == 1:
        content = entry.followups[0].content
    else:  # several rounds: a progression, every vendor line indented
        content = "\n\n".join(
            f"{_round_heading(h)}\nQuestion: {_indented(h.question_text)}\n"
            f"Answer: {_indented(h.answer_text)}"
            for h in entry.followups
        )
    return (f"<index_{entry.index}>\n<source>{xml_text(entry.label)}</source>\n<content>\n"
            f"{xml_text(content)}\n</content>\n</index_{entry.index}>")


def format_context_xml(evidence: Sequence[Candidate], followups: Sequence[FollowupHit]) -> str:
    """Evidence excerpts as <index_1>..<index_N>, the linked follow-ups last as <index_N+1>."""
    return "\n".join(_entry_xml(e) for e in context_entries(evidence, followups))


_PROMPT_HEAD = """You are a security assessor evaluating vendor compliance.

**Source 1: Direct Vendor Responses (HIGHEST PRIORITY)**
The vendor provided these responses across multiple follow-up rounds.
Responses are shown in reverse chronological order (most recent first).

IMPORTANT: If responses from different rounds conflict, prefer the MOST RECENT
response as it represents the vendor's latest position on this topic."""

_PROMPT_TAIL = """Assess whether this criterion is MET, NOT_MET, or INCONCLUSIVE.
If you observe contradictions between follow-up rounds, note this in your reasoning."""

NO_RESPONSES = "No direct vendor responses available for this criterion."
NO_DOCUMENTS = "No supporting documentation was retrieved for this criterion."


def quoted(text: str) -> str:
    """Vendor text in the prompt: every continuation line indented, so no line it writes
    can start at column 0, where the prompt's own section markers live."""
    # splitlines() knows every line break a reader may honour (CR, NEL, U+2028, U+2029...).
    lines = _NOT_XML.sub("\ufffd", text).splitlines() or [""]
    return "\n  ".join(line.rstrip() for line in lines)


def one_line(text: str) -> str:
    """Vendor text that must stay on its line (a document name in its header): every run of
    white space, line breaks included, becomes one space."""
    return " ".join(_NOT_XML.sub("\ufffd", text).split())


def response_date(timestamp: str) -> str:
    """The day of an ISO 8601 timestamp as YYYY-MM-DD, whatever ISO form the vendor sent."""
    try:
        return parse_iso_timestamp(timestamp).date().isoformat()
    except ValueError:
        return one_line(timestamp[:10])


def format_followups_prompt(followups: Sequence[FollowupHit]) -> str:
    """Seed 003: newest round first, the first one marked MOST RECENT."""
    if not followups:
        return NO_RESPONSES
    newest_first = by_round(followups, newest_first=True)
    parts = []
    for i, hit in enumerate(newest_first):
        label = "MOST RECENT - " if i == 0 else ""
        place = f" - {one_line(hit.source)}" if hit.questionnaire_id else ""
        parts.append(
            f"[{label}ROUND {hit.round_number} - {response_date(hit.timestamp)}{place}]\n"
            f"Question: {quoted(hit.question_text)}\n"
            f"Vendor Response: {quoted(hit.answer_text)}"
        )
    return "\n\n---\n\n".join(parts)


def format_documents_prompt(evidence: Sequence[Candidate]) -> str:
    """The excerpts as numbered documents, numbered as their context entries are."""
    if not evidence:
        return NO_DOCUMENTS
    return "\n\n".join(
        f"[Document {e.index}: {one_line(e.label)}]\n  {quoted(e.excerpt.text)}"
        for e in context_entries(evidence, []) if e.excerpt is not None
    )


def format_prompt(criterion: str, evidence: Sequence[Candidate],
                  followups: Sequence[FollowupHit]) -> str:
    """The full seed-003 prompt: responses, documentation, then the criterion."""
    return "\n\n".join([
        _PROMPT_HEAD,
        format_followups_prompt(followups),
        "**Source 2: General Documentation**\n"
        "Supporting evidence from vendor policies, SOC2 reports, and other documents.",
        format_documents_prompt(evidence),
        f"**Criterion to Evaluate:**\n{quoted(criterion)}",
        _PROMPT_TAIL,
    ])
