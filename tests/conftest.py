"""Shared fixtures: every test gets its own store under tmp_path; models are fakes unless a
test asks for the real embedding model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.config import Settings
from core.workbench import Workbench
from tests.fakes import FakeEmbedder, FakeReranker

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"
AES_CRITERION = "Does the vendor encrypt data at rest using AES-256?"


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path, monkeypatch):
    """No test reads the developer's store, settings or FlashRank cache."""
    for name in ("EVIDENCE_STORE", "EVIDENCE_CHROMA_HOST", "EVIDENCE_CHROMA_PORT",
                 "EVIDENCE_RERANKER_CACHE_DIR", "EVIDENCE_EMBEDDING_MODEL",
                 "EVIDENCE_ALLOW_MODEL_DOWNLOADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVIDENCE_RERANKER_CACHE_DIR", str(tmp_path / "flashrank-cache"))


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(store=tmp_path / "store", reranker_cache_dir=tmp_path / "flashrank-cache")


@pytest.fixture
def workbench(settings) -> Workbench:
    """Fake embedder and fake reranker on a real ChromaDB store on disk."""
    return Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())


@pytest.fixture
def workbench_no_reranker(settings) -> Workbench:
    """Fake embedder; the real FlashRank adapter finds no model and falls back."""
    return Workbench(settings, embedder=FakeEmbedder())


@pytest.fixture(scope="session")
def real_embedder():
    """The real all-MiniLM-L6-v2, loaded once per test session."""
    from core.embedding import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    embedder.warm_up()
    return embedder


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory, real_embedder) -> Path:
    """The whole sample_data ingested once with the real model into a store on disk."""
    from core.ingest.sample import ingest_sample

    store = tmp_path_factory.mktemp("sample") / "store"
    bench = Workbench(Settings(store=store, reranker_cache_dir=store.parent / "no-models"),
                      embedder=real_embedder)
    ingest_sample(bench, SAMPLE_DATA)
    return store


@pytest.fixture
def sample_workbench(sample_store, tmp_path, real_embedder) -> Workbench:
    """A private copy of the sample store, real embedder, no reranker model (fallback)."""
    store = tmp_path / "sample-store"
    shutil.copytree(sample_store, store)
    return Workbench(Settings(store=store, reranker_cache_dir=tmp_path / "no-models"),
                     embedder=real_embedder)
