"""The LLM context (seed 000's XML) and prompt (seed 003), with vendor text escaped."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from core.models import (
    Candidate,
    CurrentAnswer,
    DocumentStanding,
    FollowupHit,
    LaterAnswer,
    LaterVersion,
    by_round,
    parse_iso_timestamp,
)

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


# The project's own layout (precedence, hybrid) ----------------------------------------------
#
# A model does not read recency from order: the context and the prompt lead with the
# criterion's current answer, and every answer says its round, its date and where it stands.

def later_note(later: LaterAnswer, criterion: str = "this criterion") -> str:
    """"round 5 (2024-02-12) answered this criterion later" ("the same criterion" for an
    answer to another criterion than the one asked)."""
    return (f"round {later.round_number} ({response_date(later.answered_at)}) answered "
            f"{criterion} later")


def earlier_note(later: LaterAnswer, criterion: str = "this criterion") -> str:
    """How an earlier answer is labelled, in neutral words (a later round may answer another
    part of the criterion, not correct this one)."""
    return f"an earlier answer; {later_note(later, criterion)}"


def answer_standing(round_number: int, timestamp: str, later: LaterAnswer | None,
                    current: bool, criterion: str = "this criterion", *,
                    round_named: bool = False) -> str:
    """An answer's round, date and standing: "round 3 (2024-01-20), an earlier answer; round 5
    (2024-02-12) answered this criterion later", or "..., the current answer"; the date alone
    first where the label beside it names the round."""
    when = (response_date(timestamp) if round_named
            else f"round {round_number} ({response_date(timestamp)})")
    if later is not None:
        return f"{when}, {earlier_note(later, criterion)}"
    return f"{when}, the current answer" if current else when


_KIND_WORDS = {"report": "report", "certificate": "certificate", "policy": "policy",
               "letter": "letter", "questionnaire_page": "questionnaire page",
               "other": "document"}


def document_date(standing: DocumentStanding) -> str:
    """A document's date as a reader needs it: "report for the period 2024-04-01 to
    2025-03-31", "certificate issued 2024-05-16, valid until 2027-05-14", "policy reviewed
    2025-06-18", "document received 2026-01-05, date not stated"."""
    kind = _KIND_WORDS.get(standing.kind, "document")
    basis, day = standing.date_basis, standing.date
    if basis == "period_end" and standing.period_start:
        said = f"for the period {standing.period_start} to {day}"
    elif basis == "period_end":
        said = f"for the period ending {day}"
    elif basis == "as_of" and standing.kind == "certificate":
        said = f"issued {day}"
    elif basis == "as_of":
        said = f"dated {day}" if standing.kind == "letter" else f"as of {day}"
    elif basis == "reviewed_on":
        said = f"reviewed {day}"
    elif basis == "corrected":
        said = f"dated {day} (by a reviewer)"
    else:
        said = f"received {day}, date not stated"
    if standing.valid_until:
        said += f", valid until {standing.valid_until}"
    return f"{kind} {said}"


def version_note(standing: DocumentStanding, later: LaterVersion | None) -> str:
    """Where a document version stands, in words a model reads without order: "SUPERSEDED
    report for the period ...; the current version is soc3-2025.pdf (2025-03-31)", "CURRENT
    VERSION ..." where its series has earlier versions, "STALE: ..." where it went stale."""
    said = document_date(standing)
    if later is not None:
        said = (f"SUPERSEDED {said}; the current version is {one_line(later.source)}"
                + (f" ({later.date})" if later.date else ""))
    elif standing.earlier_versions:
        said = f"CURRENT VERSION, {said}"
    if standing.stale:
        said += f"; STALE: {standing.stale.rstrip('.')}"
    return said


def excerpt_label(candidate: Candidate, current_id: str | None = None) -> str:
    """An excerpt's label in the project's layout: a follow-up answer names its round, date
    and standing, and one brought in says whose newest answer it is; a document's excerpt
    names its date and where its version stands."""
    label = evidence_source(candidate)
    if candidate.document is not None:
        said = version_note(candidate.document, candidate.later_version)
        if candidate.brought_in and candidate.later_version is None:
            said += ", brought in ahead of an excerpt of an earlier version"
        return f"{label}: {said}"
    if not candidate.is_followup or candidate.round_number is None:
        return label
    standing = answer_standing(candidate.round_number,
                               str(candidate.metadata.get("timestamp", "")),
                               candidate.later_answer, candidate.id == current_id,
                               "the same criterion")
    if candidate.brought_in:
        standing += ", the newest answer to the criterion of the earlier answer that follows"
    elif candidate.other_sheet_of:
        standing += ", the same question answered on another sheet of the round"
    return f"{label}: {standing}"


def control_note(answer: FollowupHit | CurrentAnswer) -> str:
    """' - linked by control AC-7 (Unsuccessful Logon Attempts), proposed - sheet Cloud CRM'
    for an answer linked through a control the criterion is mapped to; nothing for another."""
    if answer.linked_by_control is None:
        return ""
    sheet = f" - answered on sheet {one_line(answer.sheet)}" if answer.sheet else ""
    return f" - {answer.linked_by_control.label()}{sheet}"


def _hit_heading(hit: FollowupHit, current_id: str | None) -> str:
    qid = f" › {one_line(hit.questionnaire_id)}" if hit.questionnaire_id else ""
    when = f"[Round {hit.round_number}{qid} ({response_date(hit.timestamp)}){control_note(hit)}"
    if hit.later_answer is not None:
        return f"{when}: {earlier_note(hit.later_answer)}]"
    return f"{when}: the current answer]" if hit.id == current_id else f"{when}]"


def _current_xml(current: CurrentAnswer) -> str:
    what = ("this criterion" if current.linked_by_control is None else
            f"a control this criterion is mapped to ({current.linked_by_control.label()}"
            f"{f', answered on sheet {one_line(current.sheet)}' if current.sheet else ''})")
    content = (f"The vendor's newest answer to {what}, round {current.round_number} "
               f"({response_date(current.answered_at)}).\n"
               f"Question: {_indented(current.question_text)}\n"
               f"Answer: {_indented(current.answer_text)}")
    return (f"<current_answer>\n<source>{xml_text(current.source)}</source>\n<content>\n"
            f"{xml_text(content)}\n</content>\n</current_answer>")


def _own_entry_xml(entry: ContextEntry, current_id: str | None) -> str:
    if entry.excerpt is not None:
        label, content = excerpt_label(entry.excerpt, current_id), entry.excerpt.text
    else:
        label = entry.label
        content = "\n\n".join(
            f"{_hit_heading(h, current_id)}\nQuestion: {_indented(h.question_text)}\n"
            f"Answer: {_indented(h.answer_text)}" for h in entry.followups)
    return (f"<index_{entry.index}>\n<source>{xml_text(label)}</source>\n<content>\n"
            f"{xml_text(content)}\n</content>\n</index_{entry.index}>")


def format_current_context_xml(current: CurrentAnswer | None, evidence: Sequence[Candidate],
                               followups: Sequence[FollowupHit]) -> str:
    """The project's context: the criterion's current answer first (<current_answer>), then
    the excerpts as <index_1>..<index_N> and the linked follow-ups as <index_N+1>, as the
    seeds lay them out, every answer labelled with its round, date and standing."""
    current_id = current.id if current else None
    parts = [_current_xml(current)] if current is not None else []
    parts += [_own_entry_xml(e, current_id) for e in context_entries(evidence, followups)]
    return "\n".join(parts)


_OWN_PROMPT_HEAD = """You are a security assessor evaluating vendor compliance.

**Source 1: Direct Vendor Responses (HIGHEST PRIORITY)**
The vendor answered follow-up questionnaires in rounds. Each response below is labelled with
its round and its date. The response labelled CURRENT ANSWER is the vendor's newest answer to
this criterion: it states the vendor's position now. A response labelled EARLIER ANSWER came
before a later round answered the same criterion. The order of the responses does not tell
which is newest; the labels do.

IMPORTANT: If an earlier answer conflicts with the current answer, the current answer is the
vendor's position; note the conflict as a contradiction.

Each document excerpt below is labelled with its date. An excerpt labelled SUPERSEDED comes
from an earlier version of a document (last year's report, a replaced certificate, a policy's
previous version); its label names the current version, which states the vendor's evidence
now. An excerpt labelled STALE is the newest version there is, but its period ended long ago
or it has expired: say so.

A response labelled "linked by control" answers a control this criterion is mapped to (NIST SP
800-53, ISO/IEC 27001), in the words of the vendor's framework: it answers the criterion as far
as that control does. "accepted" means a reviewer confirmed the mapping; "proposed" means the
workbench ranked it and no reviewer has confirmed it yet. Responses of one round answered on
several sheets (on-premises, cloud) are all current, each for its own sheet."""

_OWN_PROMPT_TAIL = """Assess whether this criterion is MET, NOT_MET, or INCONCLUSIVE.
Base the verdict on the CURRENT ANSWER where it speaks to the criterion, and on the
documentation where it does not. If you observe contradictions between rounds, or between the
current answer and the documentation, note them in your reasoning."""


def _response_block(kind: str, round_number: int, timestamp: str, place: str,
                    question: str, answer: str) -> str:
    return (f"[{kind}ROUND {round_number} - {response_date(timestamp)}{place}]\n"
            f"Question: {quoted(question)}\nVendor Response: {quoted(answer)}")


def format_current_responses_prompt(current: CurrentAnswer | None,
                                    followups: Sequence[FollowupHit],
                                    answer_excerpts: Sequence[Candidate]) -> str:
    """Source 1 of the project's prompt: the current answer first, then every other response
    newest first, each labelled; answers found by search sit here too, with their round."""
    if current is None and not followups and not answer_excerpts:
        return NO_RESPONSES
    blocks = []
    if current is not None:
        place = f" - {one_line(current.source)}" if current.questionnaire_id else ""
        place += control_note(current)
        blocks.append(_response_block("CURRENT ANSWER - ", current.round_number,
                                      current.answered_at, place, current.question_text,
                                      current.answer_text))
    current_id = current.id if current else None
    for hit in by_round(followups, newest_first=True):
        if hit.id == current_id:
            continue
        place = f" - {one_line(hit.source)}" if hit.questionnaire_id else ""
        place += control_note(hit)
        if hit.later_answer is not None:
            kind = "EARLIER ANSWER - "
            place += f" - {later_note(hit.later_answer)}"
        else:
            kind = ""
        blocks.append(_response_block(kind, hit.round_number, hit.timestamp, place,
                                      hit.question_text, hit.answer_text))
    for excerpt in answer_excerpts:
        meta = excerpt.metadata
        later = excerpt.later_answer
        kind = "EARLIER ANSWER - " if later is not None else ""
        place = f" - {one_line(excerpt.source)} - found by search"
        linked = meta.get("original_criterion_question_text")
        place += (f", answering: {one_line(str(linked))}" if linked
                  else ", an ad-hoc question")
        if later is not None:
            place += f" - {later_note(later, 'the same criterion')}"
        elif excerpt.brought_in:
            place += " - the newest answer to the criterion it answers"
        elif excerpt.other_sheet_of:
            place += " - the same question answered on another sheet of the round"
        blocks.append(_response_block(kind, int(meta["round_number"]),
                                      str(meta.get("timestamp", "")), place,
                                      str(meta.get("question_text", "")),
                                      str(meta.get("answer_text", excerpt.text))))
    return "\n\n---\n\n".join(blocks)


def format_current_prompt(criterion: str, current: CurrentAnswer | None,
                          evidence: Sequence[Candidate],
                          followups: Sequence[FollowupHit]) -> str:
    """The project's prompt: seed 003's sections, Source 1 led by the current answer and
    holding every vendor response (those found by search too), Source 2 the documents,
    numbered as their context entries are."""
    answers = [c for c in evidence if c.is_followup and c.round_number is not None]
    documents = "\n\n".join(
        f"[Document {e.index}: {one_line(excerpt_label(e.excerpt))}]\n  {quoted(e.excerpt.text)}"
        for e in context_entries(evidence, []) if e.excerpt is not None
        and not (e.excerpt.is_followup and e.excerpt.round_number is not None))
    return "\n\n".join([
        _OWN_PROMPT_HEAD,
        format_current_responses_prompt(current, followups, answers),
        "**Source 2: General Documentation**\n"
        "Supporting evidence from vendor policies, SOC2 reports, and other documents.",
        documents or NO_DOCUMENTS,
        f"**Criterion to Evaluate:**\n{quoted(criterion)}",
        _OWN_PROMPT_TAIL,
    ])
