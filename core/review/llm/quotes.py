"""What a language model quotes from the prompt it was shown, checked: each quote must be the
very words of the source it names (typography, case and white space folded; whole words only),
and each source is either the vendor's own statement or independently attested (judged from
its name, and a SOC report's excerpt from the auditor's voice). The rules in full are in
docs/review.md."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, Field

from core.hashing import fold_typography
from core.models import Candidate, CurrentAnswer, FollowupHit, by_round
from core.trace.context import context_entries, one_line, quoted

SourceKind = Literal["vendor_statement", "attested"]
SOURCE_KINDS: tuple[SourceKind, ...] = ("attested", "vendor_statement")
MIN_QUOTE_WORDS = 3
MIN_QUOTE_CHARS = 12

_WRAPPING = " \"'`.\u2026"
_ROUND_NAME = re.compile(r"^\W*(?:most recent\W+)?round\W*(\d+)\b")
_DOCUMENT_NAME = re.compile(r"^\W*(?:document|doc)\W*(\d+)\b")

_BY_THE_VENDOR = re.compile(
    r"\b(?:self|internal|bridge letter|management'?s? (?:assertion|response|letter)|"
    r"polic(?:y|ies)|plans?|procedures?|standards?|programmes?|programs?|guidelines?|"
    r"overview|roadmap|faq|white ?paper)\b")
_SOC_REPORT = re.compile(
    r"\bsoc ?(?:[123](?!\d)|i{1,3}\b)|\bssae ?1[68]\b|\bisae ?(?:3402|3000)\b|"
    r"\bservice organi[sz]ation controls?\b")
_AUDITORS_VOICE = re.compile(
    r"\bin our opinion\b|\bwe have (?:examined|tested|inspected|performed|audited|observed)\b|"
    r"\bwe (?:examined|tested|inspected|observed|performed|audited)\b|"
    r"\bour (?:examination|tests|testing|audit|opinion)\b|"
    r"\bno (?:exceptions|deviations) (?:were )?(?:noted|identified)\b")
_CERTIFICATE = re.compile(r"\b(?:certificates?|certs?|certification)\b")
_PEN_TEST = re.compile(r"\b(?:pen ?tests?|pen ?testing|penetration test(?:s|ing)?)\b")
_PEN_TEST_ATTESTED = re.compile(r"\b(?:attestation|letter|third party|independent)\b")
_ATTESTATION = re.compile(
    r"\b(?:attestation|aoc|auditor'?s? (?:report|opinion|letter)|"
    r"independent (?:audit|auditor|assessment|assessor)s?)\b")


def fold_for_quotes(text: str) -> str:
    """Text as quotes are compared: typography folded, case-folded, white space collapsed."""
    return " ".join(fold_typography(text).casefold().split())


def _folded_quote(quote: str) -> str:
    """The quote folded, without the quote marks or ellipsis a model may put around it."""
    return fold_for_quotes(quote).strip(_WRAPPING)


def _folded_name(name: str) -> str:
    """A source's name as the kind rules read it: folded, with every run of characters other
    than letters, digits and the apostrophe read as one space."""
    return " ".join(re.sub(r"[^\w']+|_", " ", fold_for_quotes(name)).split())


def occurs(quote: str, folded_text: str) -> bool:
    """Whether the folded quote occurs in the folded text, starting and ending on whole
    words wherever the quote starts or ends with a letter or digit: not next to a letter or
    digit, nor to an apostrophe or hyphen that joins it to one."""
    if not quote:
        return False
    start = r"(?<!\w)(?<!\w['-])" if quote[0].isalnum() else ""
    end = r"(?!\w)(?!['-]\w)" if quote[-1].isalnum() else ""
    return re.search(start + re.escape(quote) + end, folded_text) is not None


def source_kind(name: str, excerpt: str = "", *, followup: bool = False) -> SourceKind:
    """Whether a source is the vendor's own statement or independently attested, from its name
    and excerpt, by the rules of this module's docstring."""
    if followup:
        return "vendor_statement"
    folded = _folded_name(name)
    if _BY_THE_VENDOR.search(folded):
        return "vendor_statement"
    if _SOC_REPORT.search(folded):
        voice = _AUDITORS_VOICE.search(fold_for_quotes(excerpt))
        return "attested" if voice else "vendor_statement"
    if _CERTIFICATE.search(folded) or _ATTESTATION.search(folded):
        return "attested"
    if _PEN_TEST.search(folded) and _PEN_TEST_ATTESTED.search(folded):
        return "attested"
    return "vendor_statement"


@dataclass(frozen=True)
class PromptSource:
    """One source of the prompt: a round's response or a document's excerpt, with the words
    the prompt shows of it."""

    kind: Literal["round", "document"]
    number: int  # the round's number, or the document's as the prompt numbers it
    label: str  # as the prompt heads it, e.g. "Round 3" or "Document 2: policy.md"
    name: str  # the document's or questionnaire's file name
    id: str  # the chunk's or follow-up's id
    text: str  # as the prompt shows it
    source_kind: SourceKind

    @property
    def heading(self) -> str:
        """How a quote names it: "Round 3" or "Document 2"."""
        return f"{'Round' if self.kind == 'round' else 'Document'} {self.number}"

    @cached_property
    def folded(self) -> str:
        """The text as quotes are compared with it."""
        return fold_for_quotes(self.text)


def prompt_sources(evidence: Sequence[Candidate], followups: Sequence[FollowupHit], *,
                   current: CurrentAnswer | None = None, leads_with_current: bool = False
                   ) -> list[PromptSource]:
    """The sources of a prompt built from these excerpts and follow-ups: every round's
    response (the current answer first in the project's layout, and every answer among the
    excerpts, which that layout shows with the responses), then every document, numbered as
    the prompt numbers them. In the seeds' layout an answer among the excerpts is a document
    and also its round's source, so a quote naming its round is read against it."""
    answers = [e for e in context_entries(evidence, []) if e.excerpt is not None
               and e.excerpt.is_followup and e.excerpt.round_number is not None]
    rounds = []
    if leads_with_current and current is not None:
        rounds.append(PromptSource("round", current.round_number,
                                   f"Round {current.round_number}: {one_line(current.source)}",
                                   current.source, current.id, quoted(current.answer_text),
                                   "vendor_statement"))
    rounds += [
        PromptSource("round", hit.round_number,
                     f"Round {hit.round_number}: {one_line(hit.source)}", hit.source, hit.id,
                     quoted(hit.answer_text), "vendor_statement")
        for hit in by_round(followups)
        if not (leads_with_current and current is not None and hit.id == current.id)
    ]
    rounds += [
        PromptSource("round", entry.excerpt.round_number or 0,
                     f"Round {entry.excerpt.round_number}: {one_line(entry.excerpt.source)}",
                     entry.excerpt.source, entry.excerpt.id,
                     quoted(str(entry.excerpt.metadata.get("answer_text") or entry.excerpt.text)
                            if leads_with_current else entry.excerpt.text),
                     "vendor_statement")
        for entry in answers
    ]
    documents = [
        PromptSource("document", entry.index,
                     f"Document {entry.index}: {one_line(entry.label)}", entry.excerpt.source,
                     entry.excerpt.id, quoted(entry.excerpt.text),
                     source_kind(entry.label, entry.excerpt.text,
                                 followup=entry.excerpt.is_followup))
        for entry in context_entries(evidence, []) if entry.excerpt is not None
        and not (leads_with_current and entry in answers)
    ]
    return rounds + documents


def named_sources(name: str, sources: Sequence[PromptSource]) -> list[PromptSource]:
    """The sources a quote's `source` names: "Round N", "Document N" (as the prompt heads
    them), or a document's label or file name exactly."""
    folded = fold_for_quotes(name)
    numbered = _ROUND_NAME.match(folded) or _DOCUMENT_NAME.match(folded)
    if numbered is not None:
        kind = "round" if numbered.re is _ROUND_NAME else "document"
        return [s for s in sources if s.kind == kind and s.number == int(numbered.group(1))]
    bare = folded.strip("[] ")
    return [s for s in sources
            if bare and bare in {fold_for_quotes(s.name), fold_for_quotes(s.label),
                                 fold_for_quotes(s.label.split(": ", 1)[-1])}]


class VerdictQuote(BaseModel):
    """One quote a verdict relies on, as the language model gives it."""

    source: str = Field(
        description="the source quoted, named as the prompt heads it: 'Round 3' for the "
                    "vendor's response in round 3, 'Document 2' for document 2")
    quote: str = Field(
        description="the exact words relied on, copied character for character from that "
                    "source's text (the vendor's response for a round, the excerpt for a "
                    "document): one contiguous span of at least three words, with nothing "
                    "added, left out or paraphrased and no ellipsis")


class CheckedQuote(BaseModel):
    """A quote of the verdict, and whether it is the very words of the source it names."""

    source: str = Field(description="the source as the model named it")
    quote: str = Field(description="the quote as the model wrote it")
    verified: bool = Field(description="the quote is the words of the source it names")
    source_kind: SourceKind | None = Field(
        None, description="vendor_statement or attested: the kind of the source the quote was "
                          "found in (or, when not found, of the source named); None when it "
                          "names no source of the prompt")
    source_label: str | None = Field(
        None, description="the source as the prompt heads it ('Document 2: soc2.pdf (page "
                          "3)', 'Round 3: round_3.json'); None when it names no source")
    source_id: str | None = Field(
        None, description="the chunk's or follow-up's id the quote was found in; None when "
                          "not verified")


class UnverifiedQuote(BaseModel):
    """Why a verdict is not verified: a quote that does not hold, or a quote missing."""

    source: str = Field(description="the source as the model named it; for a cited round "
                                    "with no quote, 'Round N'; '' for the verdict as a whole")
    quote: str = Field(description="the quote as the model wrote it; '' when none was given")
    reason: str = Field(description="one sentence: why it does not count")


class QuoteCheck(BaseModel):
    """Every quote of a verdict checked against the prompt, and what the verdict rests on."""

    quotes: list[CheckedQuote]
    unverified_quotes: list[UnverifiedQuote]
    verified: bool
    rests_on: list[SourceKind]


def _check_one(given: VerdictQuote, sources: Sequence[PromptSource], folded_prompt: str
               ) -> tuple[CheckedQuote, str | None]:
    """The quote checked, and why it does not count (None when it does)."""
    named = named_sources(given.source, sources)
    quote = _folded_quote(given.quote)
    found = next((s for s in named if occurs(quote, s.folded)), None)
    shown = found or (named[0] if named else None)
    checked = CheckedQuote(
        source=given.source, quote=given.quote, verified=False,
        source_kind=shown.source_kind if shown else None,
        source_label=shown.label if shown else None)
    words = [w for w in quote.split() if any(c.isalnum() for c in w)]
    if len(words) < MIN_QUOTE_WORDS or len(quote) < MIN_QUOTE_CHARS:
        return checked, (f"too short to show anything: a quote holds at least "
                         f"{MIN_QUOTE_WORDS} words and {MIN_QUOTE_CHARS} characters")
    if not named:
        return checked, ("names no source of the prompt; a source is named as the prompt "
                         "heads it, 'Round N' or 'Document N'")
    if found is not None and occurs(quote, folded_prompt):
        return checked.model_copy(update={"verified": True, "source_id": found.id}), None
    elsewhere = [s.heading for s in sources if s not in named and occurs(quote, s.folded)]
    if elsewhere:
        return checked, (f"is not in {named[0].heading}'s words but in "
                         f"{', '.join(dict.fromkeys(elsewhere))}'s: attributed to the wrong "
                         "source")
    if occurs(quote, folded_prompt):
        return checked, (f"is not in {named[0].heading}'s words; the prompt holds it outside "
                         "every source (the instructions, a heading or the criterion)")
    return checked, f"is not in {named[0].heading}'s words nor anywhere in the prompt"


def check_quotes(quotes: Sequence[VerdictQuote], *, verdict: str, cited_rounds: Sequence[int],
                 sources: Sequence[PromptSource], prompt: str) -> QuoteCheck:
    """Each quote checked against the source it names in the prompt. The verdict is verified
    when every quote holds, every cited round has a quote from its response that holds, and a
    MET or NOT_MET verdict quotes something at all."""
    folded_prompt = fold_for_quotes(prompt)
    checked: list[CheckedQuote] = []
    unverified: list[UnverifiedQuote] = []
    for given in quotes:
        result, reason = _check_one(given, sources, folded_prompt)
        checked.append(result)
        if reason is not None:
            unverified.append(UnverifiedQuote(source=given.source, quote=given.quote,
                                              reason=reason))
    quoted_rounds = {s.number for q in checked if q.verified for s in sources
                     if s.kind == "round" and s.id == q.source_id}
    tried_rounds = {s.number for q in checked if not q.verified
                    for s in named_sources(q.source, sources) if s.kind == "round"}
    held = sorted({s.number for s in sources if s.kind == "round"})
    for number in sorted(set(cited_rounds) - set(held)):
        unverified.append(UnverifiedQuote(
            source=f"Round {number}", quote="",
            reason=f"round {number} is cited, but the prompt holds no answer of round "
                   f"{number} (its rounds: {', '.join(map(str, held)) or 'none'})"))
    for number in sorted(set(cited_rounds) & set(held) - quoted_rounds - tried_rounds):
        unverified.append(UnverifiedQuote(
            source=f"Round {number}", quote="",
            reason=f"round {number} is cited but no quote from its response is given"))
    if not quotes and not unverified and verdict != "INCONCLUSIVE":
        unverified.append(UnverifiedQuote(
            source="", quote="",
            reason=f"the verdict is {verdict} but quotes nothing from the prompt"))
    kinds = {q.source_kind for q in checked if q.verified}
    return QuoteCheck(quotes=checked, unverified_quotes=unverified, verified=not unverified,
                      rests_on=[kind for kind in SOURCE_KINDS if kind in kinds])
