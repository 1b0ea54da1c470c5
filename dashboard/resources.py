"""The one home of Streamlit caching: the workbench every session shares, and the views of the
store the pages read, cached under the store's state."""

from __future__ import annotations

import copy
import dataclasses
import functools
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import streamlit as st

from core.bench.results import LoadedResults, load_results
from core.config import Settings
from core.criteria import CriterionEntry
from core.hashing import criterion_hash
from core.ingest.criteria_lists import load_criteria, remembered_criteria
from core.ingest.sample import DEFAULT_SAMPLE_DIR
from core.models import FollowupHit, RetrievalTrace
from core.outputs.draft import DraftRow, plan_draft
from core.outputs.quality import StrategyComparison, compare_strategies
from core.outputs.relevance import Choice, ChoiceResult, Judgment, evaluate
from core.outputs.report import EvidencePack, build_pack
from core.reports import VendorStatus
from core.retrieval.strategies import STRATEGIES
from core.review.decisions import Decision, DecisionLog, DecisionView
from core.store import EvidenceStore
from core.timeline.series import DocumentVersion
from core.workbench import Workbench

CRITERIA_FILE = DEFAULT_SAMPLE_DIR / "criteria.txt"
P = ParamSpec("P")
R = TypeVar("R")


def make_workbench() -> Workbench:
    """The workbench the dashboard runs on (tests replace this with one on fakes)."""
    return Workbench(Settings())


@st.cache_resource(show_spinner="Opening the store...")
def get_workbench() -> Workbench:
    """One workbench per server process, shared by every session."""
    return make_workbench()


def store_changed() -> None:
    """Call after any ingest: every cached view of the store is stale."""
    st.cache_data.clear()
    _comparisons().clear()


def verdicts_changed() -> None:
    """Call after a verdict is given: the evidence packs kept hold verdicts, so they go."""
    _pack_json.clear()


# Views of the store are cached under the store's state (`Workbench.store_state`): a write
# from anywhere, another session, the command line or another machine sharing the server,
# changes the state, so no page shows the store as it was before a write it has seen land.
# While a round is between its two writes there is no state to cache under: views are read
# afresh until it settles.

def store_state(vendor_id: str | None = None) -> str | None:
    return get_workbench().store_state(vendor_id)


def on_store_state(*, per_vendor: bool, show_spinner: bool | str = False
                   ) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Cache a view of the store (st.cache_data) under the store's state: the state of the
    vendor named by the view's first (positional) argument with `per_vendor`, else of every
    vendor. Without a state the view is read afresh. The view's clear() drops what it kept."""
    def decorate(read: Callable[P, R]) -> Callable[P, R]:
        def at_state(state: str, *args: Any, **kwargs: Any) -> Any:
            return read(*args, **kwargs)

        # Streamlit tells cached functions apart by module and qualified name: without its
        # own name each view would share one cache with every other.
        at_state.__module__, at_state.__name__ = read.__module__, read.__name__
        at_state.__qualname__ = f"{read.__qualname__}@store_state"
        cached = st.cache_data(show_spinner=show_spinner)(at_state)

        @functools.wraps(read)
        def view(*args: P.args, **kwargs: P.kwargs) -> R:
            state = store_state(args[0] if per_vendor else None)
            return read(*args, **kwargs) if state is None else cached(state, *args, **kwargs)

        view.clear = cached.clear  # type: ignore[attr-defined]
        return view
    return decorate


@on_store_state(per_vendor=False)
def vendor_ids() -> list[str]:
    return get_workbench().vendor_ids()


@on_store_state(per_vendor=False)
def vendor_statuses() -> list[VendorStatus]:
    return get_workbench().status()


# Models are cached as JSON and validated on the way out: every caller gets copies of its own,
# so a page cannot alter another's.

@on_store_state(per_vendor=True, show_spinner="Retrieving...")
def _trace_json(vendor_id: str, criterion: str, strategy: str, day: str, mapped: str) -> dict:
    return get_workbench().retrieve(vendor_id, criterion, strategy).to_json_dict()


def retrieve(vendor_id: str, criterion: str, strategy: str) -> RetrievalTrace:
    """A (cached) trace; copies are handed out, so a page cannot alter another's. It is kept
    for the day (a document's standing, stale or expired, moves with the date) and while the
    criteria's mappings to controls are unchanged (a reviewer may accept them elsewhere)."""
    return RetrievalTrace.model_validate(_trace_json(
        vendor_id, criterion, strategy, _today().isoformat(), get_workbench().controls.state()))


@on_store_state(per_vendor=True)
def _versions_json(vendor_id: str, day: str) -> list[dict]:
    return [v.model_dump(mode="json")
            for v in get_workbench().catalog.document_versions(vendor_id)]


def document_versions(vendor_id: str) -> list[DocumentVersion]:
    """Every document version of the vendor with its series and standing today (cached
    until a write or the next day)."""
    return [DocumentVersion.model_validate(v)
            for v in _versions_json(vendor_id, _today().isoformat())]


@on_store_state(per_vendor=True)
def _linked_json(vendor_id: str, criterion: str) -> list[dict]:
    return [h.model_dump(mode="json")
            for h in get_workbench().linked_followups(vendor_id, criterion)]


def linked_followups(vendor_id: str, criterion: str) -> list[FollowupHit]:
    return [FollowupHit.model_validate(h) for h in _linked_json(vendor_id, criterion)]


@on_store_state(per_vendor=True, show_spinner="Finding the answers linked to each criterion...")
def _draft_json(vendor_id: str, criteria: tuple[CriterionEntry, ...]) -> list[dict]:
    return [row.model_dump(mode="json")
            for row in plan_draft(get_workbench(), vendor_id, list(criteria))]


def draft_rows(vendor_id: str, criteria: Sequence[CriterionEntry]) -> list[DraftRow]:
    """Every distinct criterion with the rounds that answered it (cached until a write)."""
    return [DraftRow.model_validate(row) for row in _draft_json(vendor_id, tuple(criteria))]


@on_store_state(per_vendor=True, show_spinner="Building the evidence pack...")
def _pack_json(vendor_id: str, criteria: tuple[CriterionEntry, ...], strategy: str) -> dict:
    return build_pack(get_workbench(), vendor_id, list(criteria), strategy).model_dump(
        mode="json")


def evidence_pack(vendor_id: str, criteria: Sequence[CriterionEntry],
                  strategy: str) -> EvidencePack:
    """The vendor's evidence pack (cached until a write or a new verdict)."""
    return EvidencePack.model_validate(_pack_json(vendor_id, tuple(criteria), strategy))


# Reviewer decisions are kept beside the evidence, not in the store's state: a decision changes
# no state. The vendor's decisions are read afresh on every run (one small read), so a decision
# recorded anywhere shows at once, and each is judged against the cached trace of its
# criterion and strategy. The list of every decided criterion is cached under the store's
# state, the decisions read and the day (a waiver expires with the date).

@on_store_state(per_vendor=True)
def _vendor_criteria_json(vendor_id: str) -> list[dict]:
    workbench = get_workbench()
    entries = remembered_criteria(workbench.store, vendor_id)
    entries += [CriterionEntry(text) for text in workbench.catalog.answered_criteria(vendor_id)]
    entries += [CriterionEntry(history[-1].criterion)
                for history in decision_histories(vendor_id).values()]
    unique: dict[str, CriterionEntry] = {}
    for entry in entries:
        unique.setdefault(criterion_hash(entry.text), entry)
    return [dataclasses.asdict(entry) for entry in unique.values()]


def criteria_changed() -> None:
    """Call after a criteria list is kept for a vendor: the vendors' criteria are read again."""
    _vendor_criteria_json.clear()


def vendor_criteria(vendor_id: str) -> list[CriterionEntry]:
    """The criteria of one vendor, for the sidebar: the criteria lists used with it (the most
    recent first), then the criteria its questionnaire rounds answer, then the ones decided;
    each once (cached until a write)."""
    return [CriterionEntry(e["text"], e["id"], e["question"], tuple(e["questionnaire_ids"]))
            for e in _vendor_criteria_json(vendor_id)]


def decision_histories(vendor_id: str) -> dict[str, list[Decision]]:
    """criterion hash -> its decisions, oldest first, in the order first decided."""
    histories: dict[str, list[Decision]] = {}
    for decision in DecisionLog(get_workbench().store, vendor_id).all():
        histories.setdefault(decision.criterion_hash, []).append(decision)
    return histories


def _today() -> date:
    return datetime.now(UTC).date()


def judged(history: Sequence[Decision], today: date | None = None) -> DecisionView:
    """A criterion's latest decision in the state the (cached) trace of its criterion and
    strategy puts it now."""
    latest = history[-1]
    return get_workbench().reviews.view(
        history, retrieve(latest.vendor_id, latest.criterion, latest.strategy),
        today or _today())


@on_store_state(per_vendor=True, show_spinner="Checking each decision against the evidence...")
def _decisions_json(vendor_id: str, recorded: tuple[str, ...], day: str) -> list[dict]:
    kept = set(recorded)
    histories = [[d for d in history if d.id in kept]
                 for history in decision_histories(vendor_id).values()]
    return [judged(history, date.fromisoformat(day)).to_json_dict()
            for history in histories if history]


def decisions(vendor_id: str) -> list[DecisionView]:
    """Every decided criterion of the vendor, its decision and state now, in the order first
    decided (cached under the store's state, the decisions recorded and the day)."""
    recorded = tuple(d.id for history in decision_histories(vendor_id).values()
                     for d in history)
    if not recorded:
        return []
    return [DecisionView.model_validate(view)
            for view in _decisions_json(vendor_id, recorded, _today().isoformat())]


def decisions_changed() -> None:
    """Call after a decision is recorded: the lists of decisions kept are dropped."""
    _decisions_json.clear()


# Rank quality against the relevance judgments: every strategy measured on the cached traces
# the pages show, kept under the store's state and the judgments measured. Judgments change
# no state: a new grade measures again, but retrieves nothing the pages have not already.

class _CachedTraces:
    """The workbench as the relevance lab reads it (`JudgedReader`), its retrievals the
    cached ones."""

    @property
    def settings(self) -> Settings:
        return get_workbench().settings

    @property
    def store(self) -> EvidenceStore:
        return get_workbench().store

    def with_settings(self, settings: Settings) -> Workbench:
        return get_workbench().with_settings(settings)

    def retrieve(self, vendor_id: str, criterion: str, strategy: str,
                 questionnaire_ids: Sequence[str] = (), controls: Sequence[str] = ()
                 ) -> RetrievalTrace:
        if questionnaire_ids or controls:
            return get_workbench().retrieve(vendor_id, criterion, strategy, questionnaire_ids,
                                            controls)
        return retrieve(vendor_id, criterion, strategy)

    def linked_followups(self, vendor_id: str, criterion: str) -> list[FollowupHit]:
        return linked_followups(vendor_id, criterion)


@on_store_state(per_vendor=True, show_spinner="Measuring every strategy against the judgments...")
def _relevance(vendor_id: str, judged: tuple[str, ...]) -> list[ChoiceResult]:
    judgments = [Judgment.model_validate_json(j) for j in judged]
    criteria: dict[str, str] = {}
    for j in sorted(judgments, key=lambda j: j.criterion):
        criteria.setdefault(j.criterion_hash, j.criterion)
    return evaluate(_CachedTraces(), vendor_id, [CriterionEntry(text) for text in
                                                 criteria.values()],
                    [Choice(strategy=name) for name in STRATEGIES], judgments)


def relevance(vendor_id: str, judgments: Sequence[Judgment]) -> list[ChoiceResult]:
    """Every strategy's rank metrics over the judged criteria (in the order of their text),
    on the judgments given (cached under the store's state and the judgments)."""
    judged = tuple(sorted(j.model_dump_json(exclude={"judged_at"}) for j in judgments))
    return _relevance(vendor_id, judged)


# Caches not of the store's state ------------------------------------------------------------

@st.cache_data(show_spinner=False)
def sample_criteria() -> list[str]:
    return load_criteria(CRITERIA_FILE) if CRITERIA_FILE.exists() else []


@st.cache_data(show_spinner=False)
def count_tokens(text: str) -> int:
    return get_workbench().embedder.count_tokens(text)


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


# Strategy comparisons: kept under the store's state too, but in a store of their own ---------

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
    """Every strategy on every criterion (core.outputs.quality), unless already run and kept."""
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
