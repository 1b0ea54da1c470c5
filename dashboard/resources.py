"""The one home of Streamlit caching, and the selection every page shares."""

from __future__ import annotations

import copy
import logging
import threading
import time
import weakref
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
from core.ingest.documents import collect_files
from core.ingest.sample import (
    DEFAULT_SAMPLE_DIR,
    SampleStep,
    ingest_sample,
    load_criteria,
    sample_plan,
)
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
_log = logging.getLogger(__name__)


def make_workbench() -> Workbench:
    """The workbench the dashboard runs on (tests replace this with one on fakes)."""
    return Workbench(Settings())


@st.cache_resource(show_spinner="Opening the store...")
def get_workbench() -> Workbench:
    """One workbench per server process, shared by every session."""
    return make_workbench()


# First start ---------------------------------------------------------------------------------
#
# On an empty store the sample data is indexed in a background thread, one per workbench (so
# one per server process), while every session shows the progress page; a second session
# watches the same indexing instead of starting another or taking a half-indexed store for a
# ready one.

FIRST_START_FAILED = "Indexing the sample data failed"


@dataclass(frozen=True)
class IndexingStatus:
    """What the first start's indexing is doing, as a page shows it."""

    state: str  # "running" | "done" | "failed"
    step: str  # what runs now: loading the model, or a sample step (vendor, files)
    done: int  # sample steps finished
    total: int  # sample steps in all (0 until the plan is read)
    elapsed_s: float
    finished_steps: tuple[tuple[str, float], ...]  # (step, seconds), in order
    detail: str = ""  # how far the step is: the file read, the texts embedded
    fraction: float = 0.0  # of the whole indexing, 0..1
    error: str | None = None  # one sentence, when failed


class SampleIndexing:
    """ingest_sample on a thread of its own, its progress readable from any session."""

    def __init__(self, workbench: Workbench) -> None:
        self._workbench = workbench
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._ended: float | None = None
        self._step = f"Loading the embedding model {workbench.embedder.name}"
        self._step_began = self._started
        self._done = self._total = 0
        self._detail, self._step_fraction = "", 0.0
        self._steps: dict[str, SampleStep] = {}
        self._finished: list[tuple[str, float]] = []
        self._error: str | None = None
        self._refreshed = False
        self._thread = threading.Thread(target=self._run, name="sample-indexing", daemon=True)

    def start(self) -> SampleIndexing:
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the indexing to end; True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def status(self) -> IndexingStatus:
        with self._lock:
            state = ("running" if self._ended is None
                     else "failed" if self._error is not None else "done")
            fraction = ((self._done + self._step_fraction) / self._total if self._total
                        else 0.0)
            return IndexingStatus(
                state=state, step=self._step, done=self._done, total=self._total,
                elapsed_s=(self._ended or time.monotonic()) - self._started,
                finished_steps=tuple(self._finished), detail=self._detail,
                fraction=min(fraction, 1.0), error=self._error)

    def claim_refresh(self) -> bool:
        """True once, to the first session that finds the indexing done: it drops the
        cached views of the store."""
        with self._lock:
            claimed, self._refreshed = not self._refreshed, True
            return claimed

    def _run(self) -> None:
        try:
            self._workbench.embedder.warm_up()
            self._show("Reading the sample data", 0, 0)
            self._steps = {step.label: step for step in sample_plan(DEFAULT_SAMPLE_DIR)}
            ingest_sample(self._workbench, DEFAULT_SAMPLE_DIR, self._show, self._detail_of)
        except Exception as exc:  # shown as one sentence; the server log keeps the rest
            _log.exception("Indexing the sample data failed")
            self._end(first_start_error(exc))
        else:
            self._end(None)

    def _show(self, label: str, done: int, total: int) -> None:
        """A step begins (ingest_sample's progress)."""
        step = self._steps.get(label)
        text = step_text(step) if step is not None else label
        now = time.monotonic()
        with self._lock:
            if text != self._step:
                self._finished.append((self._step, now - self._step_began))
            self._step, self._step_began = text, now
            self._done, self._total = done, total
            self._detail, self._step_fraction = "", 0.0

    def _detail_of(self, stage: str, done: int, total: int) -> None:
        """How far the running step is (the writer's progress: files read, texts embedded)."""
        with self._lock:
            if stage == "reading":
                self._detail = f"read {done} of {total} file{'s' if total != 1 else ''}"
            elif stage == "embedding":
                self._detail = f"embedded {done:,} of {total:,} texts"
                self._step_fraction = done / total if total else 1.0

    def _end(self, error: str | None) -> None:
        with self._lock:
            self._ended, self._error = time.monotonic(), error


def step_text(step: SampleStep) -> str:
    """A sample step for people: the vendor, what it indexes, and its files by name."""
    if step.kind == "questionnaire":
        return f"{step.vendor_id}: questionnaire round {step.round_number} ({step.paths[0].name})"
    what = {"tc_files": "documents", "followup_document": "follow-up documents of round "
            f"{step.round_number}"}.get(step.doc_type, step.doc_type.replace(":", " "))
    try:
        names = [found.source for found in collect_files(step.paths)]
    except EvidenceError:  # the ingest itself says what is wrong with the files
        return f"{step.vendor_id}: {what}"
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"{step.vendor_id}: {what} ({shown})"


def first_start_error(exc: Exception) -> str:
    """The sentence the progress page shows for a failed indexing: a refusal as it is, any
    other error after what failed, on one line."""
    if isinstance(exc, EvidenceError):
        sentence = widgets.error_sentence(exc, FIRST_START_FAILED)
    else:
        sentence = f"{FIRST_START_FAILED}: {type(exc).__name__}: {exc}"
    return " ".join(sentence.split())


_FIRST_START = threading.Lock()
_indexings: weakref.WeakKeyDictionary[Workbench, SampleIndexing] = weakref.WeakKeyDictionary()
_ready: weakref.WeakSet[Workbench] = weakref.WeakSet()


def sample_indexing(workbench: Workbench) -> IndexingStatus | None:
    """None when the store is ready for the pages. On an empty store, the sample data's
    indexing (started here when no session has started it) and how far it is."""
    with _FIRST_START:
        if workbench in _ready:
            return None
        indexing = _indexings.get(workbench)
        if indexing is None:
            if workbench.vendor_ids():
                _ready.add(workbench)
                return None
            indexing = _indexings[workbench] = SampleIndexing(workbench).start()
    status = indexing.status()
    if status.state != "done":
        return status
    with _FIRST_START:
        _ready.add(workbench)
    if indexing.claim_refresh():
        store_changed()
    return None


def retry_sample_indexing(workbench: Workbench) -> None:
    """Index the sample data again after a failure (what is already stored is skipped)."""
    with _FIRST_START:
        indexing = _indexings.get(workbench)
        if indexing is not None and indexing.status().state == "failed":
            _indexings[workbench] = SampleIndexing(workbench).start()


def wait_for_sample_indexing(workbench: Workbench, timeout: float | None = None) -> bool:
    """Wait for a started indexing to end; True when none runs any more."""
    with _FIRST_START:
        indexing = _indexings.get(workbench)
    return indexing is None or indexing.join(timeout)


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


# Views of the store are cached under the store's state (`Workbench.store_state`): a write
# from anywhere, another session, the command line or another machine sharing the server,
# changes the state, so no page shows the store as it was before a write it has seen land.
# While a round is between its two writes there is no state to cache under: views are read
# afresh until it settles.

def store_state(vendor_id: str | None = None) -> str | None:
    return get_workbench().store_state(vendor_id)


def _vendor_ids() -> list[str]:
    return get_workbench().vendor_ids()


@st.cache_data(show_spinner=False)
def _vendor_ids_at(state: str) -> list[str]:
    return _vendor_ids()


def vendor_ids() -> list[str]:
    state = store_state()
    return _vendor_ids() if state is None else _vendor_ids_at(state)


def _vendor_statuses() -> list[VendorStatus]:
    return get_workbench().status()


@st.cache_data(show_spinner=False)
def _vendor_statuses_at(state: str) -> list[VendorStatus]:
    return _vendor_statuses()


def vendor_statuses() -> list[VendorStatus]:
    state = store_state()
    return _vendor_statuses() if state is None else _vendor_statuses_at(state)


@st.cache_data(show_spinner=False)
def sample_criteria() -> list[str]:
    return load_criteria(CRITERIA_FILE) if CRITERIA_FILE.exists() else []


def _trace_json(vendor_id: str, criterion: str, strategy: str) -> dict:
    return get_workbench().retrieve(vendor_id, criterion, strategy).to_json_dict()


@st.cache_data(show_spinner="Retrieving...")
def _trace_json_at(vendor_id: str, criterion: str, strategy: str, state: str) -> dict:
    return _trace_json(vendor_id, criterion, strategy)


def retrieve(vendor_id: str, criterion: str, strategy: str) -> RetrievalTrace:
    """A (cached) trace; copies are handed out, so a page cannot alter another's."""
    state = store_state(vendor_id)
    found = (_trace_json(vendor_id, criterion, strategy) if state is None
             else _trace_json_at(vendor_id, criterion, strategy, state))
    return RetrievalTrace.model_validate(found)


def _linked_json(vendor_id: str, criterion: str) -> list[dict]:
    return [h.model_dump(mode="json")
            for h in get_workbench().linked_followups(vendor_id, criterion)]


@st.cache_data(show_spinner=False)
def _linked_json_at(vendor_id: str, criterion: str, state: str) -> list[dict]:
    return _linked_json(vendor_id, criterion)


def linked_followups(vendor_id: str, criterion: str) -> list[FollowupHit]:
    state = store_state(vendor_id)
    found = (_linked_json(vendor_id, criterion) if state is None
             else _linked_json_at(vendor_id, criterion, state))
    return [FollowupHit.model_validate(h) for h in found]


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
        self._found: dict[tuple[str, tuple[str, ...], str | None], StrategyComparison] = {}
        self.version = 0

    def get(self, key: tuple[str, tuple[str, ...], str | None]) -> StrategyComparison | None:
        with self._lock:
            found = self._found.get(key)
        return copy.deepcopy(found) if found is not None else None

    def put(self, key: tuple[str, tuple[str, ...], str | None], comparison: StrategyComparison,
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
    return _comparisons().get((vendor_id, tuple(criteria), store_state(vendor_id)))


def compare(vendor_id: str, criteria: Sequence[str],
            progress: Callable[[str, int, int], None] | None = None) -> StrategyComparison:
    """Every strategy on every criterion (core.quality), unless already run and kept."""
    key = (vendor_id, tuple(criteria), store_state(vendor_id))
    comparisons = _comparisons()
    found = comparisons.get(key)
    if found is not None:
        return found
    version = comparisons.version
    comparison = compare_strategies(get_workbench(), vendor_id, list(criteria),
                                    progress=progress)
    if key[2] is not None:  # a round between its two writes: nothing to keep it under
        comparisons.put(key, comparison, version)
    return comparison


# Questionnaire rounds and criteria lists from uploads --------------------------------------

def read_rounds(uploads: Sequence[tuple[str, bytes]], *, vendor_id: str | None,
                round_number: int | None, timestamp: str | None) -> list[UploadedRound]:
    """Uploaded rounds read and validated, nothing written (read on every run: the checks
    against the store must see it as it is now)."""
    return read_uploaded_rounds(get_workbench(), uploads, vendor_id=vendor_id,
                                round_number=round_number, timestamp=timestamp)


def ingest_rounds(rounds: Sequence[LoadedRound], progress: Progress | None = None, *,
                  replace: bool = False) -> list[QuestionnaireIngestReport]:
    """Write rounds already read (with `replace`, as the whole of their one round); every
    cached view of the store is dropped after."""
    reports = ingest_loaded_rounds(get_workbench(), rounds, progress, replace=replace)
    store_changed()
    return reports


def uploaded_criteria(name: str, data: bytes) -> list[CriterionEntry]:
    """A criteria list from an uploaded .txt, .csv or .xlsx file."""
    return read_uploaded_criteria(name, data, max_chars=MAX_CRITERION_CHARS)


def sample_entries() -> list[CriterionEntry]:
    """The sidebar's sample criteria as a criteria list."""
    return [CriterionEntry(text) for text in sample_criteria()]


# The next round's draft ---------------------------------------------------------------------

def _draft_json(vendor_id: str, criteria: tuple[CriterionEntry, ...]) -> list[dict]:
    return [row.model_dump(mode="json")
            for row in plan_draft(get_workbench(), vendor_id, list(criteria))]


@st.cache_data(show_spinner="Finding the answers linked to each criterion...")
def _draft_json_at(vendor_id: str, criteria: tuple[CriterionEntry, ...], state: str
                   ) -> list[dict]:
    return _draft_json(vendor_id, criteria)


def draft_rows(vendor_id: str, criteria: Sequence[CriterionEntry]) -> list[DraftRow]:
    """Every distinct criterion with the rounds that answered it (cached until a write)."""
    state = store_state(vendor_id)
    found = (_draft_json(vendor_id, tuple(criteria)) if state is None
             else _draft_json_at(vendor_id, tuple(criteria), state))
    return [DraftRow.model_validate(row) for row in found]


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
    workbench = get_workbench()
    return Assessor(workbench.settings, workbench.store, workbench.retrieve).status(
        retrieve(vendor_id, criterion, strategy))


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
    _pack_json_at.clear()
    return verdict


# Evidence packs -----------------------------------------------------------------------------

def _pack_json(vendor_id: str, criteria: tuple[CriterionEntry, ...], strategy: str) -> dict:
    return build_pack(get_workbench(), vendor_id, list(criteria), strategy).model_dump(
        mode="json")


@st.cache_data(show_spinner="Building the evidence pack...")
def _pack_json_at(vendor_id: str, criteria: tuple[CriterionEntry, ...], strategy: str,
                  state: str) -> dict:
    return _pack_json(vendor_id, criteria, strategy)


def evidence_pack(vendor_id: str, criteria: Sequence[CriterionEntry],
                  strategy: str) -> EvidencePack:
    """The vendor's evidence pack (cached until a write or a new verdict)."""
    state = store_state(vendor_id)
    found = (_pack_json(vendor_id, tuple(criteria), strategy) if state is None
             else _pack_json_at(vendor_id, tuple(criteria), strategy, state))
    return EvidencePack.model_validate(found)


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
