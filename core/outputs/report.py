"""The evidence pack of one vendor: for each criterion, every linked follow-up round, the
excerpts the context holds with their sources, and the verdict given if any, as Markdown,
a self-contained HTML page, or JSON lines.

Vendor text is data in every format: escaped in HTML (Jinja2 with autoescape), quoted in
fenced code blocks or backslash-escaped on one line in Markdown, JSON-encoded in JSONL, so
no vendor can forge a heading, a list item, a verdict or markup."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from core.criteria import CriterionEntry
from core.errors import UserInputError
from core.models import RetrievalTrace, by_round
from core.outputs.files import write_output
from core.reports import VendorStatus
from core.retrieval.strategies import get_strategy
from core.review.decisions import STATUS_LABELS, Decision, DecisionLog, DecisionView, Reviewing
from core.review.verdicts import NO_VERDICT, Assessor, Verdict, VerdictStatus
from core.services import EvidenceReader
from core.trace.analysis import kind_label
from core.trace.context import (
    earlier_note,
    evidence_source,
    one_line,
    response_date,
    version_note,
)


class PackReader(EvidenceReader, Protocol):
    """What the evidence pack reads: the store's evidence, its verdicts and its decisions."""

    verdicts: Assessor
    reviews: Reviewing


ReportFormat = Literal["md", "html", "jsonl"]
REPORT_SUFFIXES: dict[str, ReportFormat] = {
    ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".jsonl": "jsonl"}
CURRENT_NOTE = "Current: the verdict answered the prompt the store gives now."
NO_ROUNDS = "No follow-up answer is linked to this criterion."
NO_EXCERPTS = "No document excerpt reached the context for this criterion."
NO_DECISION = "No reviewer has decided this criterion."


class PackRound(BaseModel):
    """One follow-up answer linked to the criterion by hash."""

    round_number: int
    date: str = Field(description="the day the round was answered, YYYY-MM-DD")
    question: str
    answer: str
    in_context: bool = Field(description="whether the answer reached the context")
    fate: str = Field(description="what the retrieval did with it: in_context, excerpt, "
                                  "round_cap, not_selected, not_found...")
    standing: str = Field("", description="\"the current answer\", or \"an earlier answer; "
                                          "round 5 (2024-02-12) answered this criterion "
                                          "later\"; \"\" for another answer of the newest "
                                          "round")


class PackExcerpt(BaseModel):
    """One excerpt of the context, numbered as its <index_N>, with its source label."""

    index: int
    source: str
    type: str
    text: str
    # A document's date and where its version stands ("SUPERSEDED report for the period ...;
    # the current version is ..."); "" for an answer.
    standing: str = ""


class PackVerdict(BaseModel):
    """The verdict shown for a criterion: current, stale, or none at all."""

    state: Literal["current", "stale", "none"]
    note: str = Field(description="one sentence: current, why stale, or that there is none")
    verdict: Verdict | None = None


class PackDecision(BaseModel):
    """The reviewer's decision on a criterion: its state now and its history, or none."""

    state: Literal["none", "current", "needs_review", "expired"]
    note: str = Field(description="one sentence: the decision and whether it holds, or none")
    decision: DecisionView | None = None


class CriterionPack(BaseModel):
    """Everything the pack says about one criterion."""

    id: str | None
    criterion: str
    criterion_hash: str
    strategy: str
    rounds: list[PackRound] = Field(description="every linked round, newest first")
    excerpts: list[PackExcerpt] = Field(description="the context's excerpts, in its order")
    verdict: PackVerdict
    decision: PackDecision = Field(default_factory=lambda: PackDecision(state="none",
                                                                        note=NO_DECISION))


class EvidencePack(BaseModel):
    """One vendor's evidence for a list of criteria, under one strategy."""

    vendor_id: str
    strategy: str
    generated_at: str
    store: VendorStatus
    criteria: list[CriterionPack]


def build_pack(workbench: PackReader, vendor_id: str, criteria: Sequence[CriterionEntry],
               strategy: str) -> EvidencePack:
    """Retrieve each criterion once and gather its rounds, excerpts and verdict; reading
    verdicts needs no language model, and none is asked."""
    get_strategy(strategy)
    if not criteria:
        raise UserInputError("The evidence pack needs at least one criterion.")
    store = workbench.status(vendor_id)[0]
    decided = DecisionLog(workbench.store, vendor_id).all()
    parts = []
    for entry in criteria:
        trace = workbench.retrieve(vendor_id, entry.text, strategy, entry.questionnaire_ids,
                                   entry.controls)
        linked = workbench.linked_followups(vendor_id, trace.criterion)
        current = trace.current_answer.id if trace.current_answer else None
        rounds = [PackRound(round_number=hit.round_number, date=response_date(hit.timestamp),
                            standing=(earlier_note(hit.later_answer) if hit.later_answer
                                      else "the current answer" if hit.id == current else ""),
                            question=hit.question_text, answer=hit.answer_text,
                            in_context=trace.fate(hit.id) in ("in_context", "excerpt"),
                            fate=trace.fate(hit.id))
                  for hit in by_round(linked, newest_first=True)]
        excerpts = [PackExcerpt(index=i, source=evidence_source(c), type=c.type, text=c.text,
                                standing=version_note(c.document, c.later_version)
                                if c.document is not None else "")
                    for i, c in enumerate(trace.evidence, start=1)]
        parts.append(CriterionPack(
            id=entry.id, criterion=trace.criterion, criterion_hash=trace.criterion_hash,
            strategy=trace.strategy, rounds=rounds, excerpts=excerpts,
            verdict=pack_verdict(workbench.verdicts.status(trace)),
            decision=pack_decision(workbench.reviews, decided, trace)))
    return EvidencePack(vendor_id=store.vendor_id, strategy=strategy,
                        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
                        store=store, criteria=parts)


def pack_decision(reviewing: Reviewing, decided: Sequence[Decision],
                  trace: RetrievalTrace) -> PackDecision:
    """The criterion's decision in the state its own strategy's context puts it now."""
    history = [d for d in decided if d.criterion_hash == trace.criterion_hash]
    if not history:
        return PackDecision(state="none", note=NO_DECISION)
    latest = history[-1]
    if latest.strategy != trace.strategy:
        trace = reviewing.retrieve(trace.vendor_id, latest.criterion, latest.strategy)
    view = reviewing.view(history, trace)
    return PackDecision(state=view.state, note=view.summary, decision=view)


def pack_verdict(status: VerdictStatus) -> PackVerdict:
    if status.verdict is None:
        return PackVerdict(state="none", note=NO_VERDICT)
    if status.stale:
        return PackVerdict(state="stale", note=f"Stale: {status.stale_reason}",
                           verdict=status.verdict)
    return PackVerdict(state="current", note=CURRENT_NOTE, verdict=status.verdict)


# Markdown ------------------------------------------------------------------------------

# Characters that mean something inline in CommonMark; text on one line after the pack's own
# prefix cannot start a block, so escaping these keeps it plain text.
_MD_INLINE = re.compile(r"([\\`*_\[\]<>&|#~!])")
_BACKTICKS = re.compile(r"`+")


def md_inline(text: str) -> str:
    """Vendor text on one line of Markdown: line breaks collapsed, markup backslash-escaped."""
    return _MD_INLINE.sub(r"\\\1", one_line(text))


def md_block(text: str) -> str:
    """Vendor text of several lines, quoted in a fenced code block whose fence is longer than
    any run of backticks in it, so no line of it can close the block or start another."""
    body = "\n".join(text.splitlines())
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"


def _store_lines(store: VendorStatus) -> list[str]:
    by_type = ", ".join(f"{md_inline(kind_label(t))} {n}"
                        for t, n in store.by_type.items()) or "none"
    rounds = ", ".join(map(str, store.rounds)) or "none"
    return [f"- Documents: {store.documents}", f"- Chunks: {store.chunks}",
            f"- Follow-up responses: {store.followup_responses}", f"- Rounds: {rounds}",
            f"- By type: {by_type}"]


def _md_verdict(verdict: PackVerdict) -> list[str]:
    lines = ["### Verdict", ""]
    if verdict.verdict is None:
        return [*lines, md_inline(verdict.note), ""]
    v = verdict.verdict
    cited = ", ".join(map(str, v.cited_rounds)) or "none"
    lines += [f"**{v.counted_text}** by {md_inline(v.model)}, assessed "
              f"{md_inline(v.assessed_at)}.",
              "", md_inline(verdict.note), "", "Reasoning:", "", md_block(v.reasoning), "",
              f"Cited rounds: {cited}", ""]
    if v.quotes:
        lines += ["Quotes:", ""]
        lines += [f"- {'found' if q.verified else 'NOT FOUND'} in {md_inline(q.source)}"
                  + (f" ({q.source_kind.replace('_', ' ')})" if q.source_kind else "")
                  + f": {md_inline(q.quote)}" for q in v.quotes]
        lines.append("")
    if v.unverified_quotes:
        lines += ["Why it is unverified:", ""]
        lines += [f"- {md_inline(u.reason)}" for u in v.unverified_quotes]
        lines.append("")
    if v.rests_on:
        lines += [f"Rests on: {', '.join(k.replace('_', ' ') for k in v.rests_on)}", ""]
    if v.contradictions:
        lines += ["Contradictions noted:", ""]
        lines += [f"- {md_inline(c)}" for c in v.contradictions]
        lines.append("")
    return lines


def _md_decision(decision: PackDecision) -> list[str]:
    lines = ["### Reviewer's decision", ""]
    view = decision.decision
    if view is None:
        return [*lines, md_inline(decision.note), ""]
    state = {"current": "Current", "needs_review": "Needs re-review",
             "expired": "Expired"}[view.state]
    lines += [f"**{STATUS_LABELS[view.status]}**"
              + (f" until {md_inline(view.until)}" if view.until else "")
              + f" by {md_inline(view.reviewer)}, {md_inline(view.decided_at)}, on the "
              f"{md_inline(view.strategy)} context (sha256 `{view.context_sha256[:16]}`).",
              "", f"State: **{state}**", ""]
    lines += [f"- {md_inline(change)}" for change in view.changes]
    if view.changes:
        lines.append("")
    if view.note:
        lines += ["Note:", "", md_block(view.note), ""]
    if view.contradictions:
        lines += ["Contradictions found without a model:", ""]
        lines += [f"- {md_inline(c)}" for c in view.contradictions]
        lines.append("")
    if len(view.history) > 1:
        lines += ["History, oldest first:", ""]
        lines += [f"- {md_inline(d.decided_at)}: {STATUS_LABELS[d.status]} by "
                  f"{md_inline(d.reviewer)}" for d in view.history]
        lines.append("")
    return lines


def render_markdown(pack: EvidencePack) -> str:
    """The pack as Markdown; vendor text is quoted, never read as Markdown."""
    lines = [f"# Evidence pack: vendor {md_inline(pack.vendor_id)}", "",
             f"Generated {md_inline(pack.generated_at)} with the {md_inline(pack.strategy)} "
             "strategy.", "", "## What the store holds", "", *_store_lines(pack.store), ""]
    for number, c in enumerate(pack.criteria, start=1):
        lines += [f"## {number}. {md_inline(c.criterion)}", ""]
        if c.id:
            lines.append(f"- Id: {md_inline(c.id)}")
        lines += [f"- Criterion hash: {c.criterion_hash}",
                  f"- Strategy: {md_inline(c.strategy)}", ""]
        lines += _md_verdict(c.verdict)
        lines += _md_decision(c.decision)
        lines += ["### Follow-up rounds, newest first", ""]
        if not c.rounds:
            lines += [NO_ROUNDS, ""]
        for r in c.rounds:
            reached = "in the context" if r.in_context else f"not in the context ({r.fate})"
            standing = f" ({md_inline(r.standing)})" if r.standing else ""
            lines += [f"#### Round {r.round_number}, {md_inline(r.date)}{standing}: {reached}", "",
                      f"Question: {md_inline(r.question)}", "", "Answer:", "",
                      md_block(r.answer), ""]
        lines += ["### Excerpts in the context", ""]
        if not c.excerpts:
            lines += [NO_EXCERPTS, ""]
        for e in c.excerpts:
            lines += [f"#### [{e.index}] {md_inline(e.source)}", ""]
            if e.standing:
                lines += [f"Standing: {md_inline(e.standing)}", ""]
            lines += [md_block(e.text), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# HTML ----------------------------------------------------------------------------------

_HTML = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Evidence pack: {{ pack.vendor_id }}</title>
<style>
body { font: 15px/1.5 system-ui, sans-serif; color: #1d2430; max-width: 60rem;
       margin: 2rem auto; padding: 0 1rem; }
h1, h2, h3, h4 { line-height: 1.25; }
h2 { border-top: 2px solid #d5dbe3; padding-top: 1rem; margin-top: 2.5rem; }
.meta, .note { color: #4a5566; }
.quoted { white-space: pre-wrap; overflow-wrap: anywhere; background: #f5f7fa;
          border-left: 3px solid #b8c2d0; padding: .5rem .75rem; margin: .25rem 0 1rem; }
.verdict { border: 1px solid #d5dbe3; border-radius: 6px; padding: .75rem 1rem; }
.verdict.current { border-color: #3f8f5b; }
.verdict.stale { border-color: #c48a1c; background: #fff9ec; }
.verdict.none { color: #4a5566; }
.verdict.needs_review, .verdict.expired { border-color: #c48a1c; background: #fff9ec; }
.label { font-weight: 700; letter-spacing: .03em; }
.badge { font-size: .8rem; font-weight: 400; padding: .1rem .45rem; border-radius: 4px;
         background: #e7ebf0; }
.badge.in { background: #dff1e5; }
table { border-collapse: collapse; }
td, th { text-align: left; padding: .15rem 1rem .15rem 0; }
code { font-size: .9em; }
</style>
</head>
<body>
<h1>Evidence pack: {{ pack.vendor_id }}</h1>
<p class="meta">Generated {{ pack.generated_at }} with the <code>{{ pack.strategy }}</code>
strategy.</p>
<section>
<h2>What the store holds</h2>
<table>
<tr><th>Documents</th><td>{{ pack.store.documents }}</td></tr>
<tr><th>Chunks</th><td>{{ pack.store.chunks }}</td></tr>
<tr><th>Follow-up responses</th><td>{{ pack.store.followup_responses }}</td></tr>
<tr><th>Rounds</th><td>{{ pack.store.rounds | join(", ") or "none" }}</td></tr>
{% for type, count in pack.store.by_type.items() %}
<tr><th>{{ kind_label(type) }}</th><td>{{ count }}</td></tr>
{% endfor %}
</table>
</section>
{% for c in pack.criteria %}
<section class="criterion" id="criterion-{{ loop.index }}">
<h2>{{ loop.index }}. {{ c.criterion }}</h2>
<p class="meta">{% if c.id %}Id {{ c.id }} &middot; {% endif %}hash
<code>{{ c.criterion_hash }}</code> &middot; strategy <code>{{ c.strategy }}</code></p>
<h3>Verdict</h3>
<div class="verdict {{ c.verdict.state }}">
{% if c.verdict.verdict %}{% set v = c.verdict.verdict %}
<p><span class="label">{{ v.counted_text }}</span> by {{ v.model }}, assessed
{{ v.assessed_at }}.</p>
<p class="note">{{ c.verdict.note }}</p>
<p>Reasoning:</p>
<div class="quoted">{{ v.reasoning }}</div>
<p>Cited rounds: {{ v.cited_rounds | join(", ") or "none" }}</p>
{% if v.quotes %}<p>Quotes:</p>
<ul>{% for q in v.quotes %}
<li>{{ "found" if q.verified else "NOT FOUND" }} in {{ q.source }}{% if q.source_kind %}
({{ q.source_kind | replace("_", " ") }}){% endif %}: {{ q.quote }}</li>
{% endfor %}</ul>{% endif %}
{% if v.unverified_quotes %}<p>Why it is unverified:</p>
<ul>{% for u in v.unverified_quotes %}<li>{{ u.reason }}</li>{% endfor %}</ul>{% endif %}
{% if v.rests_on %}<p>Rests on: {{ v.rests_on | join(", ") | replace("_", " ") }}</p>{% endif %}
{% if v.contradictions %}<p>Contradictions noted:</p>
<ul>{% for item in v.contradictions %}<li>{{ item }}</li>{% endfor %}</ul>{% endif %}
{% else %}
<p>{{ c.verdict.note }}</p>
{% endif %}
</div>
<h3>Reviewer's decision</h3>
<div class="verdict {{ c.decision.state }}">
{% if c.decision.decision %}{% set d = c.decision.decision %}
<p><span class="label">{{ labels[d.status] }}</span>{% if d.until %} until {{ d.until }}{% endif %}
by {{ d.reviewer }}, {{ d.decided_at }}, on the {{ d.strategy }} context.</p>
<p class="note">{{ c.decision.note }}</p>
{% if d.changes %}<ul>{% for item in d.changes %}<li>{{ item }}</li>{% endfor %}</ul>{% endif %}
{% if d.note %}<p>Note:</p><div class="quoted">{{ d.note }}</div>{% endif %}
{% if d.contradictions %}<p>Contradictions found without a model:</p>
<ul>{% for item in d.contradictions %}<li>{{ item }}</li>{% endfor %}</ul>{% endif %}
{% if d.history | length > 1 %}<p>History, oldest first:</p>
<ul>{% for h in d.history %}
<li>{{ h.decided_at }}: {{ labels[h.status] }} by {{ h.reviewer }}</li>
{% endfor %}</ul>{% endif %}
{% else %}
<p>{{ c.decision.note }}</p>
{% endif %}
</div>
<h3>Follow-up rounds, newest first</h3>
{% for r in c.rounds %}
<article class="round">
<h4>Round {{ r.round_number }}, {{ r.date }}{% if r.standing %} ({{ r.standing }}){% endif %}
{% if r.in_context %}<span class="badge in">in the context</span>
{% else %}<span class="badge">not in the context ({{ r.fate }})</span>{% endif %}</h4>
<p><strong>Question:</strong> {{ r.question }}</p>
<p><strong>Answer:</strong></p>
<div class="quoted">{{ r.answer }}</div>
</article>
{% else %}
<p class="note">{{ no_rounds }}</p>
{% endfor %}
<h3>Excerpts in the context</h3>
{% for e in c.excerpts %}
<article class="excerpt">
<h4>[{{ e.index }}] {{ e.source }}</h4>
{% if e.standing %}<p class="note">{{ e.standing }}</p>{% endif %}
<div class="quoted">{{ e.text }}</div>
</article>
{% else %}
<p class="note">{{ no_excerpts }}</p>
{% endfor %}
</section>
{% endfor %}
</body>
</html>
"""


def render_html(pack: EvidencePack) -> str:
    """The pack as one self-contained HTML page (inline CSS, no scripts); every value is
    escaped by the template engine."""
    import jinja2

    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                                     trim_blocks=True, lstrip_blocks=True)
    return environment.from_string(_HTML).render(pack=pack, no_rounds=NO_ROUNDS,
                                                 no_excerpts=NO_EXCERPTS,
                                                 labels=STATUS_LABELS, kind_label=kind_label)


# JSON lines ----------------------------------------------------------------------------

def render_jsonl(pack: EvidencePack) -> str:
    """One JSON object per line: the pack's header, then one per criterion. Non-ASCII is
    escaped, so no character a vendor wrote can break a line."""
    header = {"record": "pack", "vendor_id": pack.vendor_id, "strategy": pack.strategy,
              "generated_at": pack.generated_at, "store": pack.store.model_dump(mode="json"),
              "criteria": len(pack.criteria)}
    lines = [json.dumps(header)]
    lines += [json.dumps({"record": "criterion", "vendor_id": pack.vendor_id,
                          **c.model_dump(mode="json")}) for c in pack.criteria]
    return "\n".join(lines) + "\n"


RENDERERS = {"md": render_markdown, "html": render_html, "jsonl": render_jsonl}


def render(pack: EvidencePack, fmt: ReportFormat) -> str:
    return RENDERERS[fmt](pack)


# Files ---------------------------------------------------------------------------------

def report_format(path: Path | str) -> ReportFormat:
    """The format a report file's suffix names, or a one-sentence refusal."""
    path = Path(path)
    fmt = REPORT_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        shown = f"ends in '{path.suffix}'" if path.suffix else "has no suffix"
        raise UserInputError(
            f"The report file {path} {shown}; name it .md, .markdown, .html, .htm or .jsonl "
            "to choose its format.")
    return fmt


def write_report(path: Path | str, text: str) -> Path:
    """Write the report whole or not at all."""
    return write_output(path, text, what="report")
