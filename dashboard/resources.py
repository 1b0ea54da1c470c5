"""The one home of Streamlit caching: the workbench (models, store) and cached data."""

from __future__ import annotations

import streamlit as st

from core.config import Settings
from core.workbench import Workbench


@st.cache_resource(show_spinner="Loading the embedding model and opening the store...")
def get_workbench() -> Workbench:
    """One workbench per server process, shared by every session (never mutated)."""
    return Workbench(Settings())


def ensure_sample_data(workbench: Workbench) -> None:
    """On an empty store, index the bundled sample data with a visible progress bar."""
    if workbench.vendor_ids():
        return
    from core.ingest.sample import DEFAULT_SAMPLE_DIR, ingest_sample

    bar = st.progress(0.0, text="First start: indexing the sample vendors...")

    def show(label: str, done: int, total: int) -> None:
        bar.progress(done / total if total else 1.0, text=f"Indexing sample data: {label}")

    ingest_sample(workbench, DEFAULT_SAMPLE_DIR, show)
    bar.empty()
