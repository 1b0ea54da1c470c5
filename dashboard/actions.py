"""What the pages ask of the workbench beyond the cached views of dashboard.resources: the
conversations and questions, uploaded rounds and criteria lists, verdicts, and the files the
pages offer for download. Nothing here is cached; a write drops the views it makes stale."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import streamlit as st

from core.config import MAX_CRITERION_CHARS
from core.criteria import CriterionEntry
from core.errors import EvidenceError
from core.hashing import criterion_hash
from core.ingest import LoadedRound
from core.ingest.criteria_lists import read_uploaded_criteria, remember_criteria
from core.ingest.package import Package
from core.ingest.package import ingest_package as write_package
from core.ingest.uploads import (
    UploadedRound,
    ingest_loaded_rounds,
    read_uploaded_package,
    read_uploaded_rounds,
)
from core.models import RetrievalTrace
from core.outputs.draft import DraftFormat, DraftRow, write_draft
from core.outputs.report import EvidencePack, ReportFormat, render
from core.reports import Progress, QuestionnaireIngestReport
from core.review.conversation.models import AskTurn, ConversationSummary
from core.review.llm.client import describe_missing
from core.review.verdicts import Verdict, VerdictStatus
from dashboard import auth, resources, widgets
from dashboard.selection import Selection


def current_trace(chosen: Selection) -> RetrievalTrace:
    """The (cached) trace for the selection; a refusal or failure shows the error block and
    stops the page."""
    try:
        trace = resources.retrieve(chosen.vendor_id, chosen.criterion, chosen.strategy)
    except EvidenceError as exc:
        widgets.stop_on_error(exc, "The retrieval failed")
    auth.context_shown(trace.context)  # the page's view is recorded with it
    return trace


# Conversations are read fresh on every run: a turn asked in another session (or from the
# command line) shows at once, and nothing of one vendor's is cached under another's key.
def conversations(vendor_id: str) -> list[ConversationSummary]:
    """The vendor's conversations, oldest first."""
    return resources.get_workbench().conversations(vendor_id)


def conversation_turns(vendor_id: str, conversation_id: str) -> list[AskTurn]:
    """Every turn of one of the vendor's conversations."""
    return resources.get_workbench().conversation(vendor_id, conversation_id)


def ask(vendor_id: str, question: str, conversation_id: str | None) -> AskTurn:
    """Ask, with a spinner; the turn is stored before it is shown."""
    with st.spinner("Searching the evidence..."):
        turn = resources.get_workbench().ask(vendor_id, question, conversation_id)
    auth.record("ask", vendor=vendor_id, page="Ask the evidence", detail=question[:300])
    return turn


def rerun_unanchored(vendor_id: str, turn: AskTurn) -> AskTurn:
    """The same turn searched without the anchor boost (nothing is stored)."""
    with st.spinner("Running the turn unanchored..."):
        return resources.get_workbench().rerun(vendor_id, turn, anchored=False)


# Questionnaire rounds and criteria lists from uploads --------------------------------------

def read_rounds(uploads: Sequence[tuple[str, bytes]], *, vendor_id: str | None,
                round_number: int | None, timestamp: str | None) -> list[UploadedRound]:
    """Uploaded rounds read and validated, nothing written (read on every run: the checks
    against the store must see it as it is now)."""
    return read_uploaded_rounds(resources.get_workbench(), uploads, vendor_id=vendor_id,
                                round_number=round_number, timestamp=timestamp)


def ingest_rounds(rounds: Sequence[LoadedRound], progress: Progress | None = None, *,
                  replace: bool = False) -> list[QuestionnaireIngestReport]:
    """Write rounds already read (with `replace`, as the whole of their one round); every
    cached view of the store is dropped after."""
    reports = ingest_loaded_rounds(resources.get_workbench(), rounds, progress, replace=replace)
    for report in reports:
        auth.record("ingest", vendor=report.vendor_id, page="Evidence library",
                    detail=f"round {report.round_number}: {report.indexed_count} answers")
    resources.store_changed()
    return reports


def read_package(vendor_id: str, uploads: Sequence[tuple[str, bytes]], *,
                 first_round: int | None, columns: dict[str, str],
                 sheets: dict[str, list[str]] | None = None) -> Package:
    """An uploaded package read and sorted, nothing written; kept for the session under the
    files, vendor, round choice, mappings and store state it was read with, so a rerun does
    not read (and OCR) every file again."""
    workbench = resources.get_workbench()
    key = (hashlib.sha256(b"".join(hashlib.sha256(n.encode() + b"\0" + d).digest()
                                   for n, d in uploads)).hexdigest(),
           vendor_id, first_round, tuple(sorted(columns.items())),
           tuple(sorted((k, tuple(v)) for k, v in (sheets or {}).items())),
           workbench.store_state(vendor_id) if vendor_id in workbench.vendor_ids() else None)
    kept = st.session_state.get("package_read")
    if kept is not None and kept[0] == key:
        return kept[1]
    with st.spinner(f"Reading {len(uploads)} files..."):
        package = read_uploaded_package(workbench.writer, vendor_id, uploads,
                                        first_round=first_round, columns=columns,
                                        sheets=sheets)
    st.session_state["package_read"] = (key, package)
    return package


def ingest_package(package: Package, progress: Progress | None = None) -> list[dict]:
    """Write a package read by `read_package`; every cached view of the store is dropped
    after."""
    lines = write_package(resources.get_workbench().writer, package, progress)
    auth.record("ingest", vendor=package.vendor_id, page="Evidence library",
                detail=f"package of {len(package.files)} files: {len(package.documents)} "
                       f"documents, {len(package.rounds)} rounds")
    st.session_state.pop("package_read", None)
    resources.store_changed()
    return lines


def uploaded_criteria(vendor_id: str) -> Callable[[str, bytes], list[CriterionEntry]]:
    """What reads a criteria list uploaded for the vendor (.txt, .csv or .xlsx) and keeps it
    as used with the vendor, so the sidebar offers its criteria."""
    def read(name: str, data: bytes) -> list[CriterionEntry]:
        criteria = read_uploaded_criteria(name, data, max_chars=MAX_CRITERION_CHARS)
        remember_criteria(resources.get_workbench().store, vendor_id, name, criteria)
        resources.criteria_changed()
        return criteria
    return read


# The next round's draft and the evidence pack, as files -------------------------------------

def next_round_number(vendor_id: str) -> int:
    """The vendor's last questionnaire round plus one (1 for a vendor without rounds)."""
    rounds = [n for s in resources.vendor_statuses() if s.vendor_id == vendor_id
              for n in s.rounds]
    return max(rounds, default=0) + 1


def draft_file(rows: Sequence[DraftRow], vendor_id: str, round_number: int,
               fmt: DraftFormat) -> bytes:
    """The draft's bytes in one format (.xlsx, .csv or .json)."""
    return write_draft(rows, vendor_id=vendor_id, round_number=round_number, fmt=fmt)


def pack_file(pack: EvidencePack, fmt: ReportFormat) -> str:
    """The pack as Markdown, one HTML page, or JSON lines."""
    return render(pack, fmt)


# Verdicts -----------------------------------------------------------------------------------

def llm_missing() -> str | None:
    """The sentence naming the settings to set, or None when a language model is configured."""
    return describe_missing(resources.get_workbench().settings)


# Verdicts are read fresh on every run (a small read of the vendor's verdicts), so a verdict
# given in another session or from the command line shows at once; the prompt they are
# compared with is the cached trace's, the one the pages show (Workbench.verdict_status would
# retrieve afresh).
def verdict_status(vendor_id: str, criterion: str, strategy: str) -> VerdictStatus:
    """The stored verdict for the criterion and strategy, current or stale, or none."""
    return resources.get_workbench().verdicts.status(
        resources.retrieve(vendor_id, criterion, strategy))


def verdict_statuses(vendor_id: str, criteria: Sequence[str], strategies: Sequence[str]
                     ) -> dict[tuple[str, str], VerdictStatus | None]:
    """(criterion, strategy) -> its stored verdict's status; None where no verdict is stored,
    found without retrieving anything."""
    keys = {criterion: criterion_hash(criterion) for criterion in criteria}
    assessed = resources.get_workbench().verdicts.assessed(
        vendor_id, [(key, strategy) for key in keys.values() for strategy in strategies])
    return {(criterion, strategy): verdict_status(vendor_id, criterion, strategy)
            if (keys[criterion], strategy) in assessed else None
            for criterion in criteria for strategy in strategies}


def assess(vendor_id: str, criterion: str, strategy: str) -> Verdict:
    """The language model's verdict on the selection's prompt (read back when this model
    already answered this very prompt); the evidence packs kept hold verdicts, so they go."""
    with st.spinner(f"Asking the language model ({strategy})..."):
        verdict = resources.get_workbench().verdicts.assess(vendor_id, criterion, strategy)
    resources.verdicts_changed()
    return verdict
