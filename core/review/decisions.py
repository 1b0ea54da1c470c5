"""The reviewer's decisions: per vendor and criterion, met, partially met, not met, no
evidence, or waived until a date, with a note, who and when, and exactly what was seen.

A decision records the retrieval it was made on: the strategy, the SHA-256 of the exact
context and of the prompt, the follow-up answers in it by round and the document versions in
it, and the language model's verdict shown then, if any. Decisions are kept append-only in
the vendor's store: none is ever replaced, the latest of a criterion is its current one.

When the criterion's context differs from the one decided on (a new or replaced round linked
to it, a new version of a document in it), or a document it held was superseded or went stale
since, the decision needs re-review, and what changed is said in words from the two records
("The 2024 report (soc3-2024.pdf) was superseded by the 2025 report (soc3-2025.pdf)."); a
waiver past its date has expired."""

from __future__ import annotations

import getpass
import json
import re
import unicodedata
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from core.errors import UserInputError
from core.models import RetrievalTrace, by_round
from core.review.contradictions import Contradiction, find_contradictions
from core.review.verdicts import VerdictStatus, prompt_sha256
from core.store import EvidenceStore
from core.timeline.series import DocumentVersion

DecisionStatus = Literal["met", "partially_met", "not_met", "no_evidence", "waived"]
STATUSES: tuple[str, ...] = ("met", "partially_met", "not_met", "no_evidence", "waived")
STATUS_LABELS = {"met": "Met", "partially_met": "Partially met", "not_met": "Not met",
                 "no_evidence": "No evidence", "waived": "Waived"}
DecisionState = Literal["current", "needs_review", "expired"]
STATES: tuple[str, ...] = ("current", "needs_review", "expired")
MAX_NOTE_CHARS = 4000
MAX_REVIEWER_CHARS = 80
# A follow-up's answer as a decision keeps it: enough to say what it answered.
SEEN_ANSWER_CHARS = 500
_YES_NO = re.compile(r"^\W*(yes|no|n/?a|not applicable|partially|partial)\b", re.IGNORECASE)


def context_sha256(context: str) -> str:
    """The full hex SHA-256 of the context's UTF-8 bytes: what a decision was made on."""
    return prompt_sha256(context)


# What a decision saw -----------------------------------------------------------------------

class SeenAnswer(BaseModel):
    """A follow-up answer that was in the context decided on."""

    id: str
    round_number: int
    questionnaire_id: str | None = None
    answer: str


class SeenVersion(BaseModel):
    """A document version that was in the context decided on, and where it stood then."""

    source: str
    kind: str = "other"
    date: str = ""
    current: bool = True
    stale: str | None = None


class Seen(BaseModel):
    """What the context decided on held: rounds, their answers, documents and versions."""

    rounds: list[int] = Field(default_factory=list)
    answers: list[SeenAnswer] = Field(default_factory=list)
    documents: dict[str, str] = Field(
        default_factory=dict, description="document name -> the version (content hash) seen")
    excerpts: list[str] = Field(default_factory=list,
                                description="the ids of the context's excerpts, in order")
    excerpt_rounds: dict[str, int] = Field(
        default_factory=dict, description="excerpt id -> round, for follow-up answers that "
                                          "are excerpts (answers to other questions)")
    excerpt_sources: dict[str, str] = Field(
        default_factory=dict, description="excerpt id -> document, for document excerpts")
    versions: dict[str, SeenVersion] = Field(
        default_factory=dict, description="doc_key -> each document version in the context, "
                                          "with its date and whether it was current and stale")


def seen_in(trace: RetrievalTrace) -> Seen:
    """What a retrieval's context holds, as a decision keeps it."""
    answers = [SeenAnswer(id=f.id, round_number=f.round_number,
                          questionnaire_id=f.questionnaire_id,
                          answer=f.answer_text[:SEEN_ANSWER_CHARS])
               for f in by_round(trace.followups)]
    documents: dict[str, str] = {}
    rounds: dict[str, int] = {}
    sources: dict[str, str] = {}
    versions: dict[str, SeenVersion] = {}
    for candidate in trace.evidence:
        if candidate.is_followup:
            rounds[candidate.id] = int(candidate.round_number or 0)
            continue
        sources[candidate.id] = candidate.source
        documents.setdefault(candidate.source, str(candidate.metadata.get("doc_sha") or ""))
        standing = candidate.document
        if standing is not None:
            versions.setdefault(str(candidate.metadata.get("doc_key", "")), SeenVersion(
                source=candidate.source, kind=standing.kind, date=standing.date,
                current=candidate.later_version is None, stale=standing.stale))
    return Seen(rounds=sorted({a.round_number for a in answers}), answers=answers,
                documents=dict(sorted(documents.items())),
                excerpts=[c.id for c in trace.evidence], excerpt_rounds=rounds,
                excerpt_sources=sources, versions=dict(sorted(versions.items())))


def _named(kind: str, day: str, source: str) -> str:
    """"the 2024 report (soc3-2024.pdf)": a document by its year and kind."""
    word = {"questionnaire_page": "questionnaire page", "other": "document"}.get(kind, kind)
    year = f"{day[:4]} " if day[:4].isdigit() else ""
    return f"the {year}{word} ({source})"


def version_changes(before: Seen, now: Mapping[str, DocumentVersion]) -> list[str]:
    """What became of the document versions a decision saw, one sentence each: superseded
    by a newer version since, or gone stale since ("The report's period ended 2025-08-31,
    over a year ago.")."""
    said: list[str] = []
    for doc_key, seen in before.versions.items():
        version = now.get(doc_key)
        if version is None:
            continue
        if seen.current and version.later_version is not None:
            later = version.later_version
            newer = next((v for v in now.values() if v.current and v.series == version.series),
                         None)
            kind = newer.kind if newer is not None else version.kind
            first = _named(seen.kind, seen.date, seen.source)
            said.append(f"{first[0].upper()}{first[1:]} was superseded by "
                        f"{_named(kind, later.date or '', later.source)}.")
        elif version.stale and version.stale != seen.stale:
            said.append(version.stale)
    return said


def _lead(answer: str) -> str:
    """How an answer reads in a sentence: its Yes / No, else its first words, quoted."""
    found = _YES_NO.match(unicodedata.normalize("NFKC", answer))
    if found:
        word = found.group(1).lower()
        return {"n/a": "N/A", "na": "N/A", "not applicable": "N/A",
                "partial": "Partially"}.get(word, word.capitalize())
    words = " ".join(answer.split())
    return f"\"{words[:57] + '...' if len(words) > 60 else words}\""


def changes_between(before: Seen, now: Seen) -> list[str]:
    """What changed in a criterion's context since a decision, one sentence each."""
    said: list[str] = []
    old_latest = before.answers[-1] if before.answers else None
    new_latest = now.answers[-1] if now.answers else None
    old_rounds, new_rounds = set(before.rounds), set(now.rounds)
    for number in sorted(new_rounds - old_rounds):
        answer = next(a for a in reversed(now.answers) if a.round_number == number)
        if old_latest is None:
            said.append(f"Round {number} is now linked to it and answers {_lead(answer.answer)}.")
        elif _lead(answer.answer) != _lead(old_latest.answer):
            said.append(f"Round {number} answers {_lead(answer.answer)} where round "
                        f"{old_latest.round_number} answered {_lead(old_latest.answer)}.")
        else:
            said.append(f"Round {number} is now linked to it and answers "
                        f"{_lead(answer.answer)}, as round {old_latest.round_number} did.")
    for number in sorted(old_rounds - new_rounds):
        said.append(f"Round {number} is no longer in the context.")
    old_by_id = {a.id: a for a in before.answers}
    for number in sorted(old_rounds & new_rounds):
        old = {a.id: a.answer for a in before.answers if a.round_number == number}
        new = {a.id: a.answer for a in now.answers if a.round_number == number}
        if old != new:
            previous = next((old_by_id[i].answer for i in old), "")
            current = next(iter(new.values()), "")
            if _lead(previous) != _lead(current):
                said.append(f"Round {number} was replaced: it now answers {_lead(current)} "
                            f"where it answered {_lead(previous)}.")
            else:
                said.append(f"Round {number} was replaced: its answer's text changed.")
    for source in sorted(set(before.documents) | set(now.documents)):
        if source not in now.documents:
            said.append(f"{source} is no longer in the context.")
        elif source not in before.documents:
            said.append(f"{source} is now in the context.")
        elif before.documents[source] != now.documents[source]:
            said.append(f"{source} changed (a new version was ingested).")
    for number in sorted(set(now.excerpt_rounds.values()) - set(before.excerpt_rounds.values())):
        said.append(f"An answer from round {number} is now among the excerpts.")
    for number in sorted(set(before.excerpt_rounds.values()) - set(now.excerpt_rounds.values())):
        said.append(f"The answers from round {number} are no longer among the excerpts.")
    for source in sorted(set(before.documents) & set(now.documents)):
        if before.documents[source] != now.documents[source]:
            continue
        old = {i for i, s in before.excerpt_sources.items() if s == source}
        new = {i for i, s in now.excerpt_sources.items() if s == source}
        if old != new:
            said.append(f"Other excerpts of {source} are in the context.")
    if not said and (old_latest is None) != (new_latest is None):
        said.append("The follow-up answers in the context changed.")
    return said


# A decision --------------------------------------------------------------------------------

class Decision(BaseModel):
    """One decision, as kept: never replaced; the latest of a criterion is current."""

    id: str
    vendor_id: str
    criterion: str
    criterion_hash: str
    status: DecisionStatus
    note: str = ""
    reviewer: str
    decided_at: str = Field(description="when it was recorded, ISO 8601 UTC")
    until: str | None = Field(None, description="a waiver's last day, YYYY-MM-DD")
    strategy: str
    context_sha256: str
    prompt_sha256: str
    seen: Seen
    verdict: str | None = Field(None, description="the model's verdict shown then, if any")


class DecisionView(BaseModel):
    """A criterion's current decision, its state now, and its history (oldest first)."""

    vendor_id: str
    criterion: str
    criterion_hash: str
    status: DecisionStatus
    note: str
    reviewer: str
    decided_at: str
    until: str | None
    strategy: str
    context_sha256: str
    prompt_sha256: str
    state: DecisionState
    changes: list[str] = Field(default_factory=list,
                               description="what changed since the decision, in words")
    contradictions: list[str] = Field(
        default_factory=list, description="answers that disagree now, found without a model")
    contradiction_details: list[Contradiction] = Field(
        default_factory=list, description="each contradiction with what disagrees, its values "
                                          "and the words of each side (`quotes`)")
    model_contradictions: list[str] = Field(
        default_factory=list, description="the contradictions the language model's current "
                                          "verdict noted, if there is one")
    seen: Seen
    verdict: str | None = None
    history: list[Decision] = Field(default_factory=list)

    def to_json_dict(self, *, history: bool = True) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude=None if history else {"history"})

    @property
    def summary(self) -> str:
        """One sentence for people: the status, who decided, and the state."""
        label = STATUS_LABELS[self.status]
        if self.status == "waived" and self.until:
            label += f" until {self.until}"
        state = {"current": "current", "expired": "expired: the waiver is past its date",
                 "needs_review": "needs re-review: " + " ".join(self.changes)}[self.state]
        return f"{label} ({self.reviewer}, {self.decided_at[:10]}); {state}"


# Checks of what a reviewer types ---------------------------------------------------------

def check_status(status: object) -> DecisionStatus:
    if status not in STATUSES:
        raise UserInputError(f"Status {str(status)[:40]!r} is not one of "
                             f"{', '.join(STATUSES)}.")
    return status  # type: ignore[return-value]


def check_until(status: str, until: object, today: date) -> str | None:
    """A waiver's date: required, YYYY-MM-DD, after today; refused on any other status."""
    if status != "waived":
        if until not in (None, ""):
            raise UserInputError("--until is for a waiver only: a status other than waived "
                                 "takes no date.")
        return None
    if until in (None, ""):
        raise UserInputError("A waiver needs --until YYYY-MM-DD, the last day it holds.")
    try:
        day = date.fromisoformat(str(until))
    except ValueError:
        raise UserInputError(f"--until {str(until)[:20]!r} is not a date as YYYY-MM-DD.") \
            from None
    if day <= today:
        raise UserInputError(f"--until {day.isoformat()} is not in the future: a waiver must "
                             "hold past today.")
    return day.isoformat()


def check_note(note: object) -> str:
    text = "" if note is None else str(note)
    if len(text) > MAX_NOTE_CHARS:
        raise UserInputError(f"The note is {len(text):,} characters long; keep it within "
                             f"{MAX_NOTE_CHARS:,}.")
    if any(unicodedata.category(c) == "Cc" and c not in "\n\t" for c in text):
        raise UserInputError("The note holds control characters; write it as plain text.")
    return text.strip()


def check_reviewer(name: object) -> str:
    text = "" if name is None else str(name)
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text):
        raise UserInputError("The reviewer's name holds control characters; give it as "
                             "plain text.")
    text = " ".join(text.split())
    if not text or len(text) > MAX_REVIEWER_CHARS:
        raise UserInputError(f"The reviewer's name must be 1 to {MAX_REVIEWER_CHARS} "
                             "characters.")
    return text


def default_reviewer(configured: str | None) -> str:
    """The reviewer when none is named: the setting, else the operating system's user."""
    if configured:
        return configured
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "reviewer"


# The log ------------------------------------------------------------------------------------

def _new_id(decided_at: str) -> str:
    compact = re.sub(r"\D", "", decided_at)[:20]
    return f"d-{compact}-{uuid.uuid4().hex[:8]}"


class DecisionLog:
    """One vendor's decisions; never reads or writes another vendor's. The collection is made
    at the first decision: reading a vendor never decided creates nothing."""

    def __init__(self, store: EvidenceStore, vendor_id: str) -> None:
        self.store = store
        self.vendor_id = store.open_vendor(vendor_id).vendor_id

    def all(self) -> list[Decision]:
        """Every decision kept, oldest first (by time recorded, then id)."""
        records = self.store.decisions(self.vendor_id)
        if records is None:
            return []
        kept = []
        for record_id, note, meta in records.all():
            if meta.get("vendor_id") != self.vendor_id:
                continue
            data = {**meta, "id": record_id, "note": note,
                    "seen": json.loads(str(meta.get("seen") or "{}")),
                    "until": meta.get("until") or None, "verdict": meta.get("verdict") or None}
            kept.append(Decision.model_validate(data))
        return sorted(kept, key=lambda d: (d.decided_at, d.id))

    def history(self, criterion_hash: str) -> list[Decision]:
        return [d for d in self.all() if d.criterion_hash == criterion_hash]

    def add(self, decision: Decision) -> None:
        metadata = decision.model_dump(mode="json", exclude={"id", "note", "seen"})
        metadata = {k: ("" if v is None else v) for k, v in metadata.items()}
        metadata["seen"] = json.dumps(decision.seen.model_dump(mode="json"))
        self.store.decisions(self.vendor_id, create=True).add(decision.id, decision.note,
                                                              metadata)


# Deciding and reviewing ----------------------------------------------------------------------

Retrieve = Callable[[str, str, str], RetrievalTrace]
StatusOf = Callable[[RetrievalTrace], VerdictStatus]
VersionsOf = Callable[[str], Mapping[str, DocumentVersion]]


def today() -> date:
    return datetime.now(UTC).date()


class Reviewing:
    """Record decisions on what a retrieval shows now, and say which still hold."""

    def __init__(self, store: EvidenceStore, retrieve: Retrieve, verdict_of: StatusOf,
                 reviewer: str | None = None, versions_of: VersionsOf | None = None) -> None:
        self.store = store
        self.retrieve = retrieve
        self.verdict_of = verdict_of
        self.reviewer = reviewer
        # The vendor's document versions by doc_key now: what a decision's documents became.
        self.versions_of = versions_of

    def decide(self, vendor_id: str, criterion: str, status: str, *, strategy: str,
               note: str | None = None, until: str | None = None,
               reviewer: str | None = None) -> DecisionView:
        """Record one decision on the criterion's context as the strategy gives it now.
        Every input is checked before anything is read or written."""
        checked = check_status(status)
        day = check_until(checked, until, today())
        text = check_note(note)
        who = check_reviewer(reviewer if reviewer is not None
                             else default_reviewer(self.reviewer))
        log = DecisionLog(self.store, vendor_id)
        trace = self.retrieve(log.vendor_id, criterion, strategy)
        shown = self.verdict_of(trace)
        decided_at = datetime.now(UTC).isoformat(timespec="microseconds")
        decision = Decision(
            id=_new_id(decided_at), vendor_id=log.vendor_id, criterion=trace.criterion,
            criterion_hash=trace.criterion_hash, status=checked, note=text, reviewer=who,
            decided_at=decided_at, until=day, strategy=trace.strategy,
            context_sha256=context_sha256(trace.context),
            prompt_sha256=prompt_sha256(trace.prompt),
            seen=seen_in(trace),
            verdict=None if shown.verdict is None else shown.verdict.counted_text)
        log.add(decision)
        return self.view(log.history(decision.criterion_hash), trace, shown=shown)

    def view(self, history: Sequence[Decision], trace: RetrievalTrace,
             today: date | None = None, shown: VerdictStatus | None = None,
             versions: Mapping[str, DocumentVersion] | None = None) -> DecisionView:
        """The latest of a criterion's decisions, in the state the retrieval `trace` (run now,
        with the decision's strategy) puts it; `shown` is the verdict for `trace`, and
        `versions` the vendor's document versions now, when they were read already."""
        latest = history[-1]
        day = today if today is not None else datetime.now(UTC).date()
        changes: list[str] = []
        if versions is None and self.versions_of is not None and latest.seen.versions:
            versions = self.versions_of(trace.vendor_id)
        moved = version_changes(latest.seen, versions) if versions else []
        if latest.status == "waived" and latest.until and date.fromisoformat(latest.until) < day:
            state: DecisionState = "expired"
        elif context_sha256(trace.context) != latest.context_sha256 or moved:
            state = "needs_review"
            changes = [*moved, *changes_between(latest.seen, seen_in(trace))] or [
                "The context's text changed (its excerpts, or their order)."]
        else:
            state = "current"
        found = find_contradictions(
            [*trace.followups, *(d.followup for d in trace.dropped_followups)], trace.evidence)
        shown = shown if shown is not None else self.verdict_of(trace)
        noted = (list(shown.verdict.contradictions)
                 if shown.verdict is not None and not shown.stale else [])
        return DecisionView(
            **latest.model_dump(exclude={"id", "seen", "verdict"}), state=state,
            changes=changes, contradictions=[c.sentence for c in found],
            contradiction_details=found,
            model_contradictions=noted, seen=latest.seen,
            verdict=latest.verdict, history=list(history))

    def decisions(self, vendor_id: str) -> list[DecisionView]:
        """Every decided criterion's current decision and state, in the order first decided."""
        log = DecisionLog(self.store, vendor_id)
        by_criterion: dict[str, list[Decision]] = {}
        for decision in log.all():
            by_criterion.setdefault(decision.criterion_hash, []).append(decision)
        versions = (self.versions_of(log.vendor_id)
                    if self.versions_of is not None and by_criterion else None)
        views = []
        for history in by_criterion.values():
            latest = history[-1]
            views.append(self.view(history, self.retrieve(log.vendor_id, latest.criterion,
                                                           latest.strategy), versions=versions))
        return views
