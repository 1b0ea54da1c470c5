"""The one home of Streamlit caching, and the selection every page shares."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from core.bench.results import LoadedResults, load_results
from core.config import MAX_CRITERION_CHARS, Settings
from core.conversation.models import AskTurn, ConversationSummary
from core.criteria import CriterionEntry
from core.draft import DraftFormat, DraftRow, plan_draft, write_draft
from core.errors import EvidenceError
from core.hashing import criterion_hash
from core.ingest import LoadedRound
from core.ingest.sample import DEFAULT_SAMPLE_DIR, ingest_sample, load_criteria
from core.ingest.uploads import (
    UploadedRound,
    ingest_loaded_rounds,
    read_uploaded_criteria,
    read_uploaded_rounds,
)
from core.llm.client import describe_missing
from core.models import FollowupHit, RetrievalTrace
from core.quality import StrategyComparison, compare_strategies
from core.report import EvidencePack, ReportFormat, build_pack, render
from core.reports import Progress, QuestionnaireIngestReport, VendorStatus
from core.strategies import DEFAULT_STRATEGY
from core.verdicts import Assessor, Verdict, VerdictStatus, VerdictStore
from core.workbench import Workbench
from dashboard import widgets

CRITERIA_FILE = DEFAULT_SAMPLE_DIR / "criteria.txt"


def make_workbench() -> Workbench:
    """The workbench the dashboard runs on (tests replace this with one on fakes)."""
    return Workbench(Settings())


@st.cache_resource(show_spinner="Opening the store...")
def get_workbench() -> Workbench:
    """One workbench per server process, shared by every session."""
    return make_workbench()


# One first-start indexing per server: a second visitor waits for it instead of taking a
# half-indexed store for a ready one.
_FIRST_START = threading.Lock()


def ensure_sample_data(workbench: Workbench) -> None:
    """On an empty store, index the bundled sample data with a visible progress bar."""
    if workbench.vendor_ids() and not _FIRST_START.locked():
        return
    with st.spinner("Another session is indexing the sample data..."):
        _FIRST_START.acquire()
    try:
        if workbench.vendor_ids():
            return
        bar = st.progress(0.0, text="First start: indexing the sample vendors...")

        def show(label: str, done: int, total: int) -> None:
            bar.progress(done / total if total else 1.0, text=f"Indexing sample data: {label}")

        ingest_sample(workbench, DEFAULT_SAMPLE_DIR, show)
        bar.empty()
        store_changed()
    finally:
        _FIRST_START.release()


# Conversations are read fresh on every run: a turn asked in another session (or from the
# command line) shows at once, and nothing of one vendor's is cached under another's key.
def conversations(vendor_id: str) -> list[ConversationSummary]:
    """The vendor's conversations, oldest first."""
    return get_workbench().conversations(vendor_id)


def conversation_turns(vendor_id: str, conversation_id: str) -> list[AskTurn]:
    """Every turn of one of the vendor's conversations."""
    return get_workbench().conversation(vendor_id, conversation_id)


def ask(vendor_id: str, question: str, conversation_id: str | None) -> AskTurn:
    """Ask, with a spinner; the turn is stored before it is shown."""
    with st.spinner("Searching the evidence..."):
        return get_workbench().ask(vendor_id, question, conversation_id)


def rerun_unanchored(vendor_id: str, turn: AskTurn) -> AskTurn:
    """The same turn searched without the anchor boost (nothing is stored)."""
    with st.spinner("Running the turn unanchored..."):
        return get_workbench().rerun(vendor_id, turn, anchored=False)


def store_changed() -> None:
    """Call after any ingest: every cached view of the store is stale."""
    st.cache_data.clear()
    _comparisons().clear()


@st.cache_data(show_spinner=False)
def vendor_ids() -> list[str]:
    return get_workbench().vendor_ids()


@st.cache_data(show_spinner=False)
def vendor_statuses() -> list[VendorStatus]:
    return get_workbench().status()


@st.cache_data(show_spinner=False)
def sample_criteria() -> list[str]:
    return load_criteria(CRITERIA_FILE) if CRITERIA_FILE.exists() else []


@st.cache_data(show_spinner="Retrieving...")
def _trace_json(vendor_id: str, criterion: str, strategy: str) -> dict:
    return get_workbench().retrieve(vendor_id, criterion, strategy).to_json_dict()


def retrieve(vendor_id: str, criterion: str, strategy: str) -> RetrievalTrace:
    """A (cached) trace; copies are handed out, so a page cannot alter another's."""
    return RetrievalTrace.model_validate(_trace_json(vendor_id, criterion, strategy))


@st.cache_data(show_spinner=False)
def _linked_json(vendor_id: str, criterion: str) -> list[dict]:
    return [h.model_dump(mode="json")
            for h in get_workbench().linked_followups(vendor_id, criterion)]


def linked_followups(vendor_id: str, criterion: str) -> list[FollowupHit]:
    return [FollowupHit.model_validate(h) for h in _linked_json(vendor_id, criterion)]


@st.cache_data(show_spinner=False)
def count_tokens(text: str) -> int:
    return get_workbench().count_tokens(text)


def _folder_fingerprint(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """Name, size and modification time of every result file: a new or rewritten result
    changes it, so the cache below never shows a folder as it was."""
    try:
        return tuple((p.name, s.st_size, s.st_mtime_ns)
                     for p in sorted(folder.glob("bench-*.json")) for s in [p.stat()])
    except OSError:
        return ()


@st.cache_data(show_spinner=False)
def _benchmark_results(folder: str, fingerprint: tuple) -> LoadedResults:
    return load_results(Path(folder))


def benchmark_results() -> LoadedResults:
    """The recorded `evidence bench` results in Settings.benchmark_results (cached)."""
    folder = get_workbench().settings.benchmark_results
    return _benchmark_results(str(folder), _folder_fingerprint(folder))


class _Comparisons:
    """Strategy comparisons by (vendor, criteria), shared by every session, at most
    MAX_COMPARISONS (the oldest goes first). A plain store, not st.cache_data: a run drives
    a progress bar on the page, which a cached function cannot replay. clear() also moves
    the store version on, so a run that began before an ingest is not kept after it."""

    MAX_COMPARISONS = 32

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: dict[tuple[str, tuple[str, ...]], StrategyComparison] = {}
        self.version = 0

    def get(self, key: tuple[str, tuple[str, ...]]) -> StrategyComparison | None:
        with self._lock:
            found = self._found.get(key)
        return copy.deepcopy(found) if found is not None else None

    def put(self, key: tuple[str, tuple[str, ...]], comparison: StrategyComparison,
            version: int) -> None:
        with self._lock:
            if version != self.version:
                return
            while len(self._found) >= self.MAX_COMPARISONS:
                self._found.pop(next(iter(self._found)))
            self._found[key] = copy.deepcopy(comparison)

    def clear(self) -> None:
        with self._lock:
            self._found.clear()
            self.version += 1


@st.cache_resource
def _comparisons() -> _Comparisons:
    return _Comparisons()


def cached_comparison(vendor_id: str, criteria: Sequence[str]) -> StrategyComparison | None:
    """The comparison already run for this vendor and criteria list, if any."""
    return _comparisons().get((vendor_id, tuple(criteria)))


def compare(vendor_id: str, criteria: Sequence[str],
            progress: Callable[[str, int, int], None] | None = None) -> StrategyComparison:
    """Every strategy on every criterion (core.quality), unless already run and kept."""
    key = (vendor_id, tuple(criteria))
    comparisons = _comparisons()
    found = comparisons.get(key)
    if found is not None:
        return found
    version = comparisons.version
    comparison = compare_strategies(get_workbench(), vendor_id, list(criteria),
                                    progress=progress)
    comparisons.put(key, comparison, version)
    return comparison


# Questionnaire rounds and criteria lists from uploads --------------------------------------

def read_rounds(uploads: Sequence[tuple[str, bytes]], *, vendor_id: str | None,
                round_number: int | None, timestamp: str | None) -> list[UploadedRound]:
    """Uploaded rounds read and validated, nothing written (read on every run: the checks
    against the store must see it as it is now)."""
    return read_uploaded_rounds(get_workbench(), uploads, vendor_id=vendor_id,
                                round_number=round_number, timestamp=timestamp)


def ingest_rounds(rounds: Sequence[LoadedRound],
                  progress: Progress | None = None) -> list[QuestionnaireIngestReport]:
    """Write rounds already read; every cached view of the store is dropped after."""
    reports = ingest_loaded_rounds(get_workbench(), rounds, progress)
    store_changed()
    return reports


def uploaded_criteria(name: str, data: bytes) -> list[CriterionEntry]:
    """A criteria list from an uploaded .txt, .csv or .xlsx file."""
    return read_uploaded_criteria(name, data, max_chars=MAX_CRITERION_CHARS)


def sample_entries() -> list[CriterionEntry]:
    """The sidebar's sample criteria as a criteria list."""
    return [CriterionEntry(text) for text in sample_criteria()]


# The next round's draft ---------------------------------------------------------------------

@st.cache_data(show_spinner="Finding the answers linked to each criterion...")
def _draft_json(vendor_id: str, criteria: tuple[CriterionEntry, ...]) -> list[dict]:
    return [row.model_dump(mode="json")
            for row in plan_draft(get_workbench(), vendor_id, list(criteria))]


def draft_rows(vendor_id: str, criteria: Sequence[CriterionEntry]) -> list[DraftRow]:
    """Every distinct criterion with the rounds that answered it (cached until an ingest)."""
    return [DraftRow.model_validate(row) for row in _draft_json(vendor_id, tuple(criteria))]


def draft_file(rows: Sequence[DraftRow], vendor_id: str, round_number: int,
               fmt: DraftFormat) -> bytes:
    """The draft's bytes in one format (.xlsx, .csv or .json)."""
    return write_draft(rows, vendor_id=vendor_id, round_number=round_number, fmt=fmt)


def next_round_number(vendor_id: str) -> int:
    """The vendor's last questionnaire round plus one (1 for a vendor without rounds)."""
    rounds = [n for s in vendor_statuses() if s.vendor_id == vendor_id for n in s.rounds]
    return max(rounds, default=0) + 1


# Verdicts -----------------------------------------------------------------------------------

def llm_missing() -> str | None:
    """The sentence naming the settings to set, or None when a language model is configured."""
    return describe_missing(get_workbench().settings)


# Verdicts are read fresh on every run (a small read of the vendor's verdicts), so a verdict
# given in another session or from the command line shows at once; the prompt they are
# compared with is the cached trace's, the one the pages show.
def verdict_status(vendor_id: str, criterion: str, strategy: str) -> VerdictStatus:
    """The stored verdict for the criterion and strategy, current or stale, or none."""
    return Assessor(get_workbench()).status(retrieve(vendor_id, criterion, strategy))


def verdict_statuses(vendor_id: str, criteria: Sequence[str], strategies: Sequence[str]
                     ) -> dict[tuple[str, str], VerdictStatus | None]:
    """(criterion, strategy) -> its stored verdict's status; None where no verdict is stored,
    found without retrieving anything."""
    stored = VerdictStore(get_workbench().store, vendor_id)
    found: dict[tuple[str, str], VerdictStatus | None] = {}
    for criterion in criteria:
        key = criterion_hash(criterion)
        for strategy in strategies:
            found[(criterion, strategy)] = (
                verdict_status(vendor_id, criterion, strategy)
                if stored.for_criterion(key, strategy) else None)
    return found


def assess(vendor_id: str, criterion: str, strategy: str) -> Verdict:
    """The language model's verdict on the selection's prompt (read back when this model
    already answered this very prompt); the evidence packs kept hold verdicts, so they go."""
    with st.spinner(f"Asking the language model ({strategy})..."):
        verdict = get_workbench().assess(vendor_id, criterion, strategy)
    _pack_json.clear()
    return verdict


# Evidence packs -----------------------------------------------------------------------------

@st.cache_data(show_spinner="Building the evidence pack...")
def _pack_json(vendor_id: str, criteria: tuple[CriterionEntry, ...], strategy: str) -> dict:
    return build_pack(get_workbench(), vendor_id, list(criteria), strategy).model_dump(
        mode="json")


def evidence_pack(vendor_id: str, criteria: Sequence[CriterionEntry],
                  strategy: str) -> EvidencePack:
    """The vendor's evidence pack (cached until an ingest or a new verdict)."""
    return EvidencePack.model_validate(_pack_json(vendor_id, tuple(criteria), strategy))


def pack_file(pack: EvidencePack, fmt: ReportFormat) -> str:
    """The pack as Markdown, one HTML page, or JSON lines."""
    return render(pack, fmt)


@dataclass(frozen=True)
class Selection:
    vendor_id: str
    criterion: str
    strategy: str


def selection() -> Selection | None:
    """The vendor, criterion and strategy chosen in the sidebar (shared by every page)."""
    vendor = st.session_state.get("vendor")
    criterion = (st.session_state.get("criterion") or "").strip()
    strategy = st.session_state.get("strategy") or DEFAULT_STRATEGY
    if not vendor or not criterion:
        return None
    return Selection(vendor, criterion, strategy)


def selected_vendor() -> str | None:
    """The vendor chosen in the sidebar (pages that need no criterion use this)."""
    return st.session_state.get("vendor") or None


def current_trace(chosen: Selection) -> RetrievalTrace:
    """The (cached) trace for the selection; a refusal or failure shows the error block and
    stops the page."""
    try:
        return retrieve(chosen.vendor_id, chosen.criterion, chosen.strategy)
    except EvidenceError as exc:
        widgets.stop_on_error(exc, "The retrieval failed")
