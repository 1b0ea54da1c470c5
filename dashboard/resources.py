"""The one home of Streamlit caching, and the selection every page shares."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from core.bench.results import LoadedResults, load_results
from core.config import Settings
from core.conversation.models import AskTurn, ConversationSummary
from core.errors import EvidenceError
from core.ingest.sample import DEFAULT_SAMPLE_DIR, ingest_sample, load_criteria
from core.models import FollowupHit, RetrievalTrace
from core.quality import StrategyComparison, compare_strategies
from core.reports import VendorStatus
from core.strategies import DEFAULT_STRATEGY
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
