"""The one home of Streamlit caching, and the selection every page shares."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import streamlit as st

from core.config import Settings
from core.errors import EvidenceError, UserInputError
from core.ingest.sample import DEFAULT_SAMPLE_DIR, ingest_sample, load_criteria
from core.models import FollowupHit, RetrievalTrace
from core.strategies import DEFAULT_STRATEGY
from core.workbench import VendorStatus, Workbench

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
        st.cache_data.clear()
    finally:
        _FIRST_START.release()


def store_changed() -> None:
    """Call after any ingest: every cached view of the store is stale."""
    st.cache_data.clear()


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


def current_trace() -> tuple[Selection, RetrievalTrace]:
    """The trace for the current selection; stops the page with a plain message if none."""
    chosen = selection()
    if chosen is None:
        st.info("Pick a vendor and enter a criterion in the sidebar.")
        st.stop()
    try:
        return chosen, retrieve(chosen.vendor_id, chosen.criterion, chosen.strategy)
    except UserInputError as exc:
        st.error(str(exc))
        st.stop()
    except EvidenceError as exc:
        st.error(f"The retrieval failed: {exc}")
        st.stop()
