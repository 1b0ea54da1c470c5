"""The app frame: first start on an empty store, navigation, the shared selection."""

from __future__ import annotations

import threading
import time

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.config import Settings
from core.errors import ModelUnavailableError
from core.hashing import criterion_hash
from core.workbench import Workbench
from dashboard import first_start, resources
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


class GatedEmbedder(FakeEmbedder):
    """The fake embedder, holding every call until the test opens the gate: the indexing
    can be watched while it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def embed(self, texts):
        assert self.gate.wait(timeout=120), "the test never opened the gate"
        return super().embed(texts)


class MissingModelEmbedder(FakeEmbedder):
    """An embedding model that is not installed: it fails to load."""

    def warm_up(self) -> None:
        raise ModelUnavailableError("The embedding model 'all-MiniLM-L6-v2' is not on this "
                                    "machine and model downloads are off.")


ACME_FILES_READ = "read 8 of 8 files"  # sample_data/vendors/acme/documents


def _empty_workbench(tmp_path, monkeypatch, embedder) -> Workbench:
    bench = Workbench(Settings(store=tmp_path / "empty", reranker_cache_dir=tmp_path / "none"),
                      embedder=embedder, reranker=FakeReranker())
    monkeypatch.setattr(resources, "make_workbench", lambda: bench)
    st.cache_resource.clear()
    st.cache_data.clear()
    assert bench.vendor_ids() == []
    return bench


def _wait_for_first_embedding(bench: Workbench) -> None:
    """Until the indexing has read acme's documents and waits at the gate to embed them."""
    for _ in range(600):  # bounded: the thread gets there in well under a second
        status = first_start.sample_indexing(bench)
        if status is not None and status.detail == ACME_FILES_READ:
            return
        time.sleep(0.05)
    raise AssertionError("the indexing never reached acme's documents")


def _shown(texts) -> str:
    """Texts as the reader sees them: the markdown escapes taken out."""
    return " ".join(texts).replace("\\", "")


def _progress_text(at: AppTest) -> str:
    return _shown(p.proto.text for p in at.get("progress"))


def test_first_start_shows_the_indexing_at_once_then_opens_the_pages(tmp_path, monkeypatch):
    embedder = GatedEmbedder()
    bench = _empty_workbench(tmp_path, monkeypatch, embedder)
    try:
        at = app().run()  # returns while the sample data is still being indexed
        assert not at.exception
        assert at.title[0].value == "Indexing the sample data"
        _wait_for_first_embedding(bench)
        at.run()
        assert at.title[0].value == "Indexing the sample data"
        assert _progress_text(at).startswith(
            "Step 1 of 20: acme: documents (access_control_policy.md, ")
        assert _shown(m.value for m in at.markdown).startswith(f"{ACME_FILES_READ} · ")
        assert _shown(m.value for m in at.markdown).endswith(" s elapsed")
        assert "Done: Loading the embedding model fake-bag-of-words (" in _shown(
            c.value for c in at.caption)
        assert not at.sidebar.selectbox  # no page to pick a vendor on yet
    finally:
        embedder.gate.set()
    assert first_start.wait_for_sample_indexing(bench, timeout=120)

    at.run()

    assert not at.exception
    assert bench.vendor_ids() == ["acme", "lumen", "northwind"]
    assert at.title[0].value == "Criterion overview"
    assert at.sidebar.selectbox(key="vendor").options == ["acme", "lumen", "northwind"]
    assert at.sidebar.selectbox(key="criterion").value == AES_CRITERION
    statuses = {s.vendor_id: s for s in bench.status()}
    assert statuses["acme"].rounds == [1, 2, 3, 4, 5]
    st.cache_resource.clear()
    st.cache_data.clear()


def test_a_second_session_watches_the_same_indexing(tmp_path, monkeypatch):
    embedder = GatedEmbedder()
    bench = _empty_workbench(tmp_path, monkeypatch, embedder)
    started = []
    real_ingest = first_start.ingest_sample
    monkeypatch.setattr(first_start, "ingest_sample",
                        lambda *args: started.append(args) or real_ingest(*args))
    try:
        first = app().run()
        _wait_for_first_embedding(bench)
        second = app().run()
        assert [first.title[0].value, second.title[0].value] == ["Indexing the sample data"] * 2
        assert "acme" in _progress_text(second)
    finally:
        embedder.gate.set()
    assert first_start.wait_for_sample_indexing(bench, timeout=120)

    assert second.run().title[0].value == "Criterion overview"
    assert first.run().title[0].value == "Criterion overview"
    assert len(started) == 1
    st.cache_resource.clear()
    st.cache_data.clear()


def test_a_failed_indexing_shows_one_sentence_and_can_be_tried_again(tmp_path, monkeypatch):
    bench = _empty_workbench(tmp_path, monkeypatch, MissingModelEmbedder())
    app().run()
    assert first_start.wait_for_sample_indexing(bench, timeout=60)

    at = app().run()

    assert not at.exception
    assert at.title[0].value == "Indexing the sample data"
    assert [e.value for e in at.error] == [
        "Indexing the sample data failed: The embedding model 'all-MiniLM-L6-v2' is not on "
        "this machine and model downloads are off."]
    assert bench.vendor_ids() == []

    bench._embedder = FakeEmbedder()  # the model installed, the reviewer tries again
    at.button[0].click().run()
    assert first_start.wait_for_sample_indexing(bench, timeout=120)
    at.run()

    assert not at.exception
    assert at.title[0].value == "Criterion overview"
    assert bench.vendor_ids() == ["acme", "lumen", "northwind"]
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
    assert criterion_hash(AES_CRITERION) in shown  # in the retrieval details
    assert at.subheader[0].value == "The vendor's current answer"
    assert at.markdown[0].value.startswith("**Round 5**")
    # No reranker model here: said once, on the session's first page, and not again.
    assert any(i.value.startswith("No reranker model is installed here") for i in at.info)
    at.run()
    assert not any(i.value.startswith("No reranker model") for i in at.info)
    st.cache_resource.clear()
    st.cache_data.clear()
