"""The app frame: first start on an empty store, navigation, the shared selection."""

from __future__ import annotations

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.config import Settings
from core.hashing import criterion_hash
from core.workbench import Workbench
from dashboard import resources
from tests.conftest import AES_CRITERION
from tests.dashboard.conftest import DASHBOARD
from tests.fakes import FakeEmbedder, FakeReranker

PAGES = {
    "views/overview.py": "Criterion overview",
    "views/tiers.py": "Precedence tiers",
    "views/rankings.py": "Boosted vs unboosted",
    "views/rounds.py": "Round progression",
    "views/context.py": "LLM context",
    "views/next_round.py": "Next round",
    "views/pack.py": "Evidence pack",
    "views/quality.py": "Strategy quality",
    "views/library.py": "Evidence library",
}


def app() -> AppTest:
    return AppTest.from_file(str(DASHBOARD / "app.py"), default_timeout=300)


def test_first_start_indexes_the_sample_data_then_opens_ready(tmp_path, monkeypatch):
    bench = Workbench(Settings(store=tmp_path / "empty", reranker_cache_dir=tmp_path / "none"),
                      embedder=FakeEmbedder(), reranker=FakeReranker())
    monkeypatch.setattr(resources, "make_workbench", lambda: bench)
    st.cache_resource.clear()
    st.cache_data.clear()
    assert bench.vendor_ids() == []

    at = app().run()

    assert not at.exception
    assert bench.vendor_ids() == ["acme", "northwind"]
    assert at.sidebar.selectbox(key="vendor").options == ["acme", "northwind"]
    assert at.sidebar.selectbox(key="criterion").value == AES_CRITERION
    assert at.title[0].value == "Criterion overview"
    statuses = {s.vendor_id: s for s in bench.status()}
    assert statuses["acme"].rounds == [1, 2, 3, 4, 5]
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.mark.parametrize("path, title", list(PAGES.items()))
def test_every_page_opens_from_the_frame(dashboard_workbench, path, title):
    at = app().run()
    at.switch_page(path).run()
    assert not at.exception, at.exception
    assert at.title[0].value == title


def test_the_selection_follows_the_reviewer_across_pages(dashboard_workbench):
    at = app().run()
    at.sidebar.selectbox(key="vendor").select("northwind").run()
    at.sidebar.selectbox(key="strategy").select("tiered").run()
    for path in PAGES:
        at.switch_page(path).run()
        assert not at.exception
        assert at.session_state["vendor"] == "northwind"
        assert at.session_state["strategy"] == "tiered"
        assert at.session_state["criterion"] == AES_CRITERION


def test_a_typed_criterion_is_used(dashboard_workbench):
    typed = "Does the vendor log administrator sign-ins?"
    at = app()
    at.session_state["criterion"] = typed  # what typing it into the box and Enter leaves
    at.run()
    assert not at.exception
    assert typed in at.sidebar.selectbox(key="criterion").options
    assert at.session_state["criterion"] == typed
    shown = " ".join(str(m.value) for m in at.metric)
    assert criterion_hash(typed) in shown


@pytest.mark.model
def test_the_overview_with_the_real_embedding_model(sample_store, tmp_path, monkeypatch,
                                                     real_embedder):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(sample_store, store)
    bench = Workbench(Settings(store=store, reranker_cache_dir=tmp_path / "none"),
                      embedder=real_embedder)
    monkeypatch.setattr(resources, "make_workbench", lambda: bench)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = app().run()
    assert not at.exception
    shown = " ".join(str(m.value) for m in at.metric)
    assert criterion_hash(AES_CRITERION) in shown
    assert any("no reranker" in w.value.lower() or "fell back" in w.value.lower()
               for w in at.warning)
    st.cache_resource.clear()
    st.cache_data.clear()
