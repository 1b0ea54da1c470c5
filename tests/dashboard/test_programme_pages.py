"""The dashboard on a programme's store: what one page run, and one interaction after it, read
of the store is the same with 10 vendors besides the sample data and with 1,000."""

from __future__ import annotations

import os
import shutil
from collections import Counter

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.config import Settings
from core.workbench import Workbench
from dashboard import resources
from tests.dashboard.conftest import DASHBOARD
from tests.fakes import FakeEmbedder, FakeReranker
from tests.test_programme import CountingClient, payload

pytestmark = pytest.mark.scale
SCALE = int(os.environ.get("EVIDENCE_TEST_VENDORS", "1000"))


def page_run_calls(store, monkeypatch) -> tuple[Counter[str], Counter[str], list[str]]:
    """The store calls of the app's first run on the Criterion overview, and of one
    interaction after it (another strategy picked), in a fresh workbench and fresh caches;
    and the vendors the sidebar offers."""
    calls: Counter[str] = Counter()
    bench = Workbench(Settings(store=store, reranker_cache_dir=store.parent / "none"),
                      embedder=FakeEmbedder(), reranker=FakeReranker())
    bench.store._client = CountingClient(bench.store.client, calls)
    monkeypatch.setattr(resources, "make_workbench", lambda: bench)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(DASHBOARD / "app.py"), default_timeout=300).run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Criterion overview"
    first = Counter(calls)
    calls.clear()
    at.sidebar.selectbox(key="strategy").select("tiered").run()
    assert not at.exception, at.exception
    offered = list(at.sidebar.selectbox(key="vendor").options)
    st.cache_data.clear()
    return first, Counter(calls), offered


def test_a_page_run_reads_the_same_of_the_store_at_10_and_at_1000_vendors(
        fake_sample_store, tmp_path, monkeypatch):
    store = tmp_path / "store"
    shutil.copytree(fake_sample_store, store)
    writer = Workbench(Settings(store=store, reranker_cache_dir=tmp_path / "none"),
                       embedder=FakeEmbedder())
    sample = len(writer.vendor_ids())
    for index in range(10):
        writer.ingest_questionnaire(payload(f"vendor-{index:04d}"))
    first_10, interaction_10, offered_10 = page_run_calls(store, monkeypatch)
    for index in range(10, SCALE):
        writer.ingest_questionnaire(payload(f"vendor-{index:04d}"))
    first_1000, interaction_1000, offered_1000 = page_run_calls(store, monkeypatch)

    assert len(offered_10) == sample + 10 and len(offered_1000) == sample + SCALE
    assert first_1000 == first_10
    assert interaction_1000 == interaction_10
    assert 0 < sum(interaction_10.values()) < 40, interaction_10
