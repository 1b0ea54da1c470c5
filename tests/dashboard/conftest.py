"""Dashboard fixtures: the sample data in a store built with the fake models, handed to the
app through dashboard.resources.make_workbench, and AppTest helpers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.config import Settings
from core.ingest.sample import ingest_sample
from core.workbench import Workbench
from dashboard import resources
from tests.conftest import AES_CRITERION, SAMPLE_DATA
from tests.fakes import FakeEmbedder, FakeReranker

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboard"
VIEWS = DASHBOARD / "views"


@pytest.fixture(scope="session")
def fake_sample_store(tmp_path_factory) -> Path:
    """All of sample_data/ ingested once with the fake embedder."""
    store = tmp_path_factory.mktemp("dash-sample") / "store"
    bench = Workbench(Settings(store=store, reranker_cache_dir=store.parent / "none"),
                      embedder=FakeEmbedder())
    ingest_sample(bench, SAMPLE_DATA)
    return store


def _install(bench: Workbench, monkeypatch) -> Workbench:
    monkeypatch.setattr(resources, "make_workbench", lambda: bench)
    st.cache_resource.clear()
    st.cache_data.clear()
    return bench


@pytest.fixture
def dashboard_workbench(fake_sample_store, tmp_path, monkeypatch):
    """The app's workbench: a private copy of the fake sample store, fake reranker."""
    store = tmp_path / "store"
    shutil.copytree(fake_sample_store, store)
    bench = Workbench(Settings(store=store, reranker_cache_dir=tmp_path / "none"),
                      embedder=FakeEmbedder(), reranker=FakeReranker())
    yield _install(bench, monkeypatch)
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture
def dashboard_workbench_no_reranker(fake_sample_store, tmp_path, monkeypatch):
    """As dashboard_workbench, but no reranker model: retrieval falls back, visibly."""
    store = tmp_path / "store"
    shutil.copytree(fake_sample_store, store)
    bench = Workbench(Settings(store=store, reranker_cache_dir=tmp_path / "none"),
                      embedder=FakeEmbedder())
    yield _install(bench, monkeypatch)
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture
def dashboard_workbench_llm(fake_sample_store, tmp_path, monkeypatch, llm_stub):
    """As dashboard_workbench, with a language model configured the way the app is: through
    EVIDENCE_LLM_BASE_URL and EVIDENCE_LLM_MODEL, pointing at the stub endpoint (test modules
    using it load `tests.llm_stub`)."""
    store = tmp_path / "store"
    shutil.copytree(fake_sample_store, store)
    monkeypatch.setenv("EVIDENCE_LLM_BASE_URL", llm_stub.base_url)
    monkeypatch.setenv("EVIDENCE_LLM_MODEL", llm_stub.model)
    monkeypatch.setenv("EVIDENCE_LLM_TIMEOUT_S", "5")
    bench = Workbench(Settings(store=store, reranker_cache_dir=tmp_path / "none"),
                      embedder=FakeEmbedder(), reranker=FakeReranker())
    assert bench.settings.llm_base_url == llm_stub.base_url
    yield _install(bench, monkeypatch)
    st.cache_resource.clear()
    st.cache_data.clear()


def empty_results_folder(workbench: Workbench, tmp_path: Path) -> Path:
    """An empty folder made the workbench's benchmark results folder."""
    folder = tmp_path / "results"
    folder.mkdir()
    workbench.settings.benchmark_results = folder
    return folder


@pytest.fixture
def results_folder(dashboard_workbench, tmp_path):
    """The app's benchmark results folder, empty."""
    return empty_results_folder(dashboard_workbench, tmp_path)


def page(name: str, *, vendor: str = "acme", criterion: str = AES_CRITERION,
         strategy: str = "precedence", **state) -> AppTest:
    """An AppTest of one page with the sidebar's selection seeded in session_state."""
    at = AppTest.from_file(str(VIEWS / f"{name}.py"), default_timeout=120)
    at.session_state["vendor"] = vendor
    at.session_state["criterion"] = criterion
    at.session_state["strategy"] = strategy
    for key, value in state.items():
        at.session_state[key] = value
    return at
