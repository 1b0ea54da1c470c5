"""Shared fixtures: every test gets its own store under tmp_path; models are fakes unless a
test asks for the real embedding model."""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import streamlit  # noqa: F401  (imported before its loggers are quietened below)

from core.config import Settings
from core.workbench import Workbench
from tests.chroma_server import ChromaServer
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.shared import built_once

# Outside `streamlit run` Streamlit's cache decorators warn on every call that there is no
# runtime; the dashboard tests that need one run under AppTest. Streamlit sets its loggers'
# levels when it is imported, so this follows its import.
logging.getLogger("streamlit.runtime.caching.cache_data_api").setLevel(logging.ERROR)
logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(
    logging.ERROR)

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"
AES_CRITERION = "Does the vendor encrypt data at rest using AES-256?"
# The sample's criteria list, used with both sample vendors.
SAMPLE_CRITERIA = [line for line in (SAMPLE_DATA / "criteria.txt").read_text(
    encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module", autouse=True)
def release_chroma_stores():
    """Let go of the ChromaDB stores a test module opened, once it is done with them.

    ChromaDB keeps every store a process opened in a process-wide registry for the life of
    the process; a workbench process opens one, but the suite opens well over a thousand,
    and past the machine's 20,000 file descriptors the last modules failed with "Too many
    open files". Runs after the module's own fixtures are torn down."""
    yield
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    gc.collect()


@pytest.fixture(scope="session")
def controls_cache(tmp_path_factory) -> Path:
    """The control catalog's vectors, computed once per embedder for the whole run."""
    return tmp_path_factory.mktemp("controls-cache")


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path, monkeypatch, controls_cache):
    """No test reads the developer's store, settings or FlashRank cache, or writes the
    developer's cache of the control catalog's vectors."""
    for name in ("EVIDENCE_STORE", "EVIDENCE_CHROMA_HOST", "EVIDENCE_CHROMA_PORT",
                 "EVIDENCE_CHROMA_TIMEOUT_S", "EVIDENCE_CHROMA_SSL", "EVIDENCE_CHROMA_CA_BUNDLE",
                 "EVIDENCE_CHROMA_TOKEN", "EVIDENCE_RERANKER_CACHE_DIR", "EVIDENCE_EMBEDDING_MODEL",
                 "EVIDENCE_ALLOW_MODEL_DOWNLOADS", "EVIDENCE_MODEL_DOWNLOAD_TIMEOUT_S",
                 "EVIDENCE_LLM_BASE_URL", "EVIDENCE_LLM_MODEL", "EVIDENCE_LLM_API_KEY",
                 "EVIDENCE_RERANKER", "EVIDENCE_LEXICAL_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVIDENCE_RERANKER_CACHE_DIR", str(tmp_path / "flashrank-cache"))
    monkeypatch.setenv("EVIDENCE_CONTROLS_CACHE_DIR", str(controls_cache))


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(store=tmp_path / "store", reranker_cache_dir=tmp_path / "flashrank-cache")


@pytest.fixture
def workbench(settings) -> Workbench:
    """Fake embedder and fake reranker on a real ChromaDB store on disk."""
    return Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())


def with_acme(bench: Workbench) -> Workbench:
    """The workbench with the sample vendor acme ingested: its documents and every round."""
    acme = SAMPLE_DATA / "vendors" / "acme"
    bench.ingest_documents("acme", sorted((acme / "documents").glob("*.md")))
    for path in sorted((acme / "questionnaires").glob("round_*.json")):
        bench.ingest_questionnaire(bench.load_questionnaires([path])[0])
    return bench


@pytest.fixture
def acme_asked(workbench) -> Workbench:
    """The workbench holding the sample vendor acme (`with_acme`)."""
    return with_acme(workbench)


@pytest.fixture
def workbench_no_reranker(settings) -> Workbench:
    """Fake embedder; the real FlashRank adapter finds no model and falls back."""
    return Workbench(settings, embedder=FakeEmbedder())


@pytest.fixture(scope="session")
def real_embedder():
    """The real all-MiniLM-L6-v2, loaded once per test session."""
    from core.encoders.embedding import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    embedder.warm_up()
    return embedder


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory, real_embedder) -> Path:
    """The whole sample_data ingested once per run with the real model into a store on disk
    (every test copies it before use)."""
    from core.ingest.sample import ingest_sample

    def build(folder: Path) -> None:
        bench = Workbench(Settings(store=folder / "store",
                                   reranker_cache_dir=folder / "no-models"),
                          embedder=real_embedder)
        ingest_sample(bench, SAMPLE_DATA)

    return built_once(tmp_path_factory, "sample-store", build) / "store"


def server_fingerprint(port: int) -> str:
    """A digest of everything a ChromaDB server holds: collections, their metadata, and
    every record's id, text, metadata and embedding."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.HttpClient(host="127.0.0.1", port=port,
                                 settings=ChromaSettings(anonymized_telemetry=False))
    digest = hashlib.sha256()
    for collection in sorted(client.list_collections(), key=lambda c: c.name):
        records = collection.get(include=["documents", "metadatas", "embeddings"])
        digest.update(json.dumps([collection.name, collection.metadata, records["ids"],
                                  records["documents"], records["metadatas"]],
                                 sort_keys=True, default=str).encode())
        if len(records["ids"]):
            digest.update(np.asarray(records["embeddings"], dtype=np.float32).tobytes())
    return digest.hexdigest()


class SampleServer:
    """A ChromaDB server started on a copy of the embedded sample store's folder.

    Copying the folder instead of ingesting again saves the real model's ~20 s ingest and
    gives the server the very index the embedded store searches, so both backends must
    rank alike. Starting a server costs ~2 s, so one serves every test: before each test
    its content is compared with the copy it started from, and a test that changed
    anything leaves the next one a new server on a new copy."""

    def __init__(self, pristine_store: Path, root: Path) -> None:
        self._pristine_store = pristine_store
        self._root = root
        self.starts = 0
        self.server = self._start()
        self._pristine = server_fingerprint(self.server.port)

    def _start(self) -> ChromaServer:
        self.starts += 1
        data = self._root / f"copy-{self.starts}" / "store"
        shutil.copytree(self._pristine_store, data)
        return ChromaServer(data)

    @property
    def port(self) -> int:
        return self.server.port

    def ensure_pristine(self) -> None:
        """Leave the server holding exactly the sample store, restarting it if needed."""
        if self.server.running and server_fingerprint(self.server.port) == self._pristine:
            return
        self.server.stop()
        self.server = self._start()

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="session")
def sample_server(sample_store, tmp_path_factory):
    """A ChromaDB server holding the sample store (see SampleServer), shared by the session."""
    server = SampleServer(sample_store, tmp_path_factory.mktemp("sample-server"))
    yield server
    server.stop()


class TeamSampleServer(SampleServer):
    """The sample store on a ChromaDB server behind a TLS proxy that checks a token (see
    tests/tls_proxy.py), as a team shares one; restarted like SampleServer."""

    TOKEN = "sample-team-token-4b1d"

    def _start(self) -> ChromaServer:
        from tests.tls_proxy import TlsProxy

        self.starts += 1
        root = self._root / f"copy-{self.starts}"
        shutil.copytree(self._pristine_store, root / "store")
        self.proxy = TlsProxy(root / "proxy", root / "store", self.TOKEN)
        return self.proxy.chroma

    def ensure_pristine(self) -> None:
        if self.server.running and server_fingerprint(self.server.port) == self._pristine:
            return
        self.proxy.stop()
        self.server = self._start()

    def stop(self) -> None:
        self.proxy.stop()

    def settings(self, **values) -> Settings:
        return Settings(chroma_host="127.0.0.1", chroma_port=self.proxy.port, chroma_ssl=True,
                        chroma_ca_bundle=self.proxy.ca_bundle, chroma_token=self.TOKEN,
                        **values)


@pytest.fixture(scope="session")
def team_sample_server(sample_store, tmp_path_factory):
    """The sample store behind a TLS proxy with a token (see TeamSampleServer)."""
    server = TeamSampleServer(sample_store, tmp_path_factory.mktemp("team-sample-server"))
    yield server
    server.stop()


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.server)])
def sample_workbench(request, sample_store, tmp_path, real_embedder) -> Workbench:
    """The sample data with the real embedder and no reranker model (fallback), once on a
    private copy of the embedded store and once through a ChromaDB server holding it."""
    return sample_workbench_on(request, request.param, sample_store, tmp_path, real_embedder)


def sample_workbench_on(request, kind: str, sample_store: Path, tmp_path: Path,
                        real_embedder) -> Workbench:
    """The sample workbench on an embedded copy, a server, or a team server behind a proxy."""
    no_models = tmp_path / "no-models"
    if kind == "team server":
        team = request.getfixturevalue("team_sample_server")
        team.ensure_pristine()
        return Workbench(team.settings(store=tmp_path / "no-embedded-store",
                                       reranker_cache_dir=no_models), embedder=real_embedder)
    if kind == "server":
        sample_server = request.getfixturevalue("sample_server")
        sample_server.ensure_pristine()
        settings = Settings(chroma_host="127.0.0.1", chroma_port=sample_server.port,
                            store=tmp_path / "no-embedded-store", reranker_cache_dir=no_models)
        return Workbench(settings, embedder=real_embedder)
    store = tmp_path / "sample-store"
    shutil.copytree(sample_store, store)
    return Workbench(Settings(store=store, reranker_cache_dir=no_models), embedder=real_embedder)


# The test files that take longest, longest first. With two workers taking one file at a
# time, a long file started last kept one worker busy for minutes while the other idled.
LONGEST_FIRST = ("test_browser.py", "test_team_login.py", "test_faults.py",
                 "test_programme_pages.py", "test_bench.py",
                 "test_conversation_properties.py", "test_integration_real_model.py",
                 "test_onnx_embedding.py", "test_cli.py", "test_concurrency.py",
                 "test_races.py", "test_server_path.py", "test_fault_stress.py",
                 "test_models_command.py", "test_shared_server.py", "test_persistence.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: at for at, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files whole


# Debian's headless Chromium, driven by Playwright (Playwright's own browser builds are
# downloaded at run time, which this machine cannot do); one per test module.
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is not installed: `make test` installs it "
                    "(apt-get install chromium).")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()
