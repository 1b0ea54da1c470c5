"""No unintended network traffic: no telemetry from ChromaDB (embedded, client or server) or
Streamlit; model downloads only when the settings allow them, and then with a timeout."""

from __future__ import annotations

import importlib
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import core.encoders.embedding
from core.config import Settings
from core.encoders.embedding import SentenceTransformerEmbedder, configure_hub_access
from core.encoders.onnx.embedder import OnnxEmbedder
from core.encoders.rerank import FlashRankReranker, load_reranker
from core.errors import ModelUnavailableError
from core.workbench import Workbench
from tests.chroma_server import ChromaServer
from tests.conftest import AES_CRITERION, REPO, SAMPLE_DATA
from tests.support import payloads
from tests.support.onnx_export import shared_onnx_cache

MISSING_HUB_MODEL = "no-such-org/no-such-sentence-model"
FLASHRANK_MODEL = "ms-marco-TinyBERT-L-2-v2"
HUB_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
# What the workbench sets for itself: a child process must not inherit them from this one.
SET_BY_THE_WORKBENCH = (*HUB_OFFLINE_VARIABLES, "ORT_DISABLE_TELEMETRY", "ANONYMIZED_TELEMETRY")


def own_environment(**extra: str) -> dict[str, str]:
    """This process's environment without what importing the workbench has set in it."""
    env = {k: v for k, v in os.environ.items() if k not in SET_BY_THE_WORKBENCH}
    return {**env, **extra}


@pytest.fixture
def no_network(monkeypatch) -> list[str]:
    """Record (and refuse) every attempt to resolve a name or open a connection."""
    attempts: list[str] = []

    def refusing(what: str):
        def refuse(*args, **kwargs):
            attempts.append(f"{what}{args[1:] if what.startswith('socket.') else args}")
            raise AssertionError(f"network use attempted: {what}")
        return refuse

    monkeypatch.setattr(socket.socket, "connect", refusing("socket.connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refusing("socket.connect_ex"))
    monkeypatch.setattr(socket, "create_connection", refusing("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refusing("getaddrinfo"))
    return attempts


@pytest.fixture
def hub_state(monkeypatch):
    """huggingface_hub's process-wide settings and client as they were, after the test."""
    from huggingface_hub import constants, set_client_factory
    from huggingface_hub.utils import _http as hub_http

    for name in ("HF_HUB_OFFLINE", "HF_HUB_DOWNLOAD_TIMEOUT", "HF_HUB_ETAG_TIMEOUT",
                 "HF_HUB_DISABLE_XET"):
        monkeypatch.setattr(constants, name, getattr(constants, name))
    for name in (*HUB_OFFLINE_VARIABLES, "HF_HUB_DOWNLOAD_TIMEOUT", "HF_HUB_ETAG_TIMEOUT"):
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])
        else:
            monkeypatch.delenv(name, raising=False)
    # Whether the developer's shell asked Hugging Face to stay offline must not decide this.
    monkeypatch.setattr(core.encoders.embedding, "_OFFLINE_BY_USER", False)
    yield constants
    set_client_factory(hub_http.default_client_factory)


# Downloads off: refused by name, before any connection -----------------------------------------

def test_a_missing_embedding_model_is_refused_without_touching_the_network(no_network):
    embedder = SentenceTransformerEmbedder(MISSING_HUB_MODEL, allow_downloads=False)
    with pytest.raises(ModelUnavailableError) as raised:
        embedder.warm_up()
    message = str(raised.value)
    assert MISSING_HUB_MODEL in message
    assert "EVIDENCE_ALLOW_MODEL_DOWNLOADS" in message
    assert no_network == []


def test_the_workbench_with_a_missing_embedding_model_writes_nothing(no_network, tmp_path):
    settings = Settings(store=tmp_path / "store", embedding_model=MISSING_HUB_MODEL)
    payload = payloads.round_payload(1, [payloads.response(AES_CRITERION, "Yes.", AES_CRITERION)],
                                     timestamp="2024-01-10T09:00:00Z")
    with pytest.raises(ModelUnavailableError, match="EVIDENCE_ALLOW_MODEL_DOWNLOADS"):
        Workbench(settings).ingest_questionnaire(payload)
    assert Workbench(settings).status() == []
    assert no_network == []


def test_a_missing_reranker_model_is_refused_without_touching_the_network(no_network,
                                                                         tmp_path):
    cache = tmp_path / "empty-cache"
    with pytest.raises(ModelUnavailableError) as raised:
        FlashRankReranker(FLASHRANK_MODEL, cache, allow_downloads=False).warm_up()
    assert FLASHRANK_MODEL in str(raised.value)
    assert "EVIDENCE_ALLOW_MODEL_DOWNLOADS" in str(raised.value)
    reranker, status = load_reranker(Settings(reranker_cache_dir=cache))
    assert reranker is None and status.ran is False
    assert "EVIDENCE_ALLOW_MODEL_DOWNLOADS" in status.reason
    assert no_network == []
    assert not (cache / FLASHRANK_MODEL).exists()


def test_hugging_face_stays_offline_unless_downloads_are_allowed(hub_state):
    configure_hub_access(False)
    assert hub_state.HF_HUB_OFFLINE is True
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    configure_hub_access(True, 12.0)
    assert hub_state.HF_HUB_OFFLINE is False
    assert hub_state.HF_HUB_DOWNLOAD_TIMEOUT == hub_state.HF_HUB_ETAG_TIMEOUT == 12.0


def test_a_user_who_set_hf_hub_offline_stays_offline(hub_state, monkeypatch):
    monkeypatch.setattr(core.encoders.embedding, "_OFFLINE_BY_USER", True)
    configure_hub_access(True, 12.0)
    assert hub_state.HF_HUB_OFFLINE is True


# Downloads on: the timeout setting reaches every request --------------------------------------

def test_the_download_timeout_is_a_setting(monkeypatch):
    assert Settings().model_download_timeout_s == 30.0
    monkeypatch.setenv("EVIDENCE_MODEL_DOWNLOAD_TIMEOUT_S", "4.5")
    assert Settings().model_download_timeout_s == 4.5
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv("EVIDENCE_MODEL_DOWNLOAD_TIMEOUT_S", bad)
        with pytest.raises(ValueError, match="model_download_timeout_s"):
            Settings()


@pytest.mark.parametrize("configured_by", ["argument", "environment"])
def test_every_hub_request_of_an_allowed_download_carries_the_timeout(
        configured_by, hub_state, no_network, monkeypatch, tmp_path):
    """The hub's transport is replaced by a recorder answering 404, so nothing is fetched;
    what it records is every request the model loading sent, with its timeouts."""
    import httpx2

    sent: list[tuple[str, dict]] = []

    def record(self, request):
        sent.append((f"{request.method} {request.url}", dict(request.extensions["timeout"])))
        return httpx2.Response(404, request=request)

    monkeypatch.setattr(httpx2.HTTPTransport, "handle_request", record)
    if configured_by == "argument":
        embedder = SentenceTransformerEmbedder(MISSING_HUB_MODEL, allow_downloads=True,
                                               download_timeout_s=4.5)
    else:  # the way the CLI builds it: EVIDENCE_* variables, through the workbench
        monkeypatch.setenv("EVIDENCE_MODEL_DOWNLOAD_TIMEOUT_S", "4.5")
        monkeypatch.setenv("EVIDENCE_ALLOW_MODEL_DOWNLOADS", "1")
        monkeypatch.setenv("EVIDENCE_EMBEDDING_MODEL", MISSING_HUB_MODEL)
        embedder = Workbench(Settings(store=tmp_path / "store")).embedder

    with pytest.raises(ModelUnavailableError, match=MISSING_HUB_MODEL):
        embedder.warm_up()

    model_requests = [(what, limits) for what, limits in sent if MISSING_HUB_MODEL in what]
    assert model_requests, sent
    for what, limits in model_requests:
        assert limits == dict.fromkeys(("connect", "read", "write", "pool"), 4.5), what
    for what, limits in sent:  # the hub's own lookups may be shorter, never longer or unset
        assert all(v is not None and v <= 4.5 for v in limits.values()), (what, limits)
    assert no_network == []


def test_the_workbench_hands_its_timeout_setting_to_the_embedder(tmp_path):
    settings = Settings(store=tmp_path / "store", model_download_timeout_s=4.5)
    assert Workbench(settings).embedder.torch_embedder.download_timeout_s == 4.5
    settings = settings.model_copy(update={"embedding_runtime": "torch"})
    assert Workbench(settings).embedder.download_timeout_s == 4.5


@pytest.mark.model
def test_the_onnx_runtime_is_exported_and_started_without_the_network(no_network,
                                                                      tmp_path_factory,
                                                                      real_embedder):
    """Exported from the installed weights (when this is the session's first export) and
    started from the cache: neither looks for anything beyond this machine."""
    cache = shared_onnx_cache(tmp_path_factory, real_embedder)
    embedder = OnnxEmbedder(real_embedder, cache_dir=cache, required=True)
    assert embedder.embed([AES_CRITERION]).shape == (1, 384)
    assert embedder.runtime == "onnx"
    assert no_network == []


@pytest.mark.parametrize("configured_by", ["argument", "settings"])
def test_flashrank_download_gets_the_timeout(configured_by, no_network, monkeypatch, tmp_path):
    import requests

    ranker_module = importlib.import_module("flashrank.Ranker")
    real_requests = ranker_module.requests
    gets: list[tuple[str, dict]] = []

    def record(url, *args, **kwargs):
        gets.append((url, kwargs))
        raise requests.ConnectionError("refused by the test")

    monkeypatch.setattr(requests, "get", record)
    cache = tmp_path / "cache"
    if configured_by == "argument":
        with pytest.raises(ModelUnavailableError, match=FLASHRANK_MODEL):
            FlashRankReranker(FLASHRANK_MODEL, cache, allow_downloads=True,
                              download_timeout_s=4.5).warm_up()
    else:
        reranker, status = load_reranker(Settings(
            reranker_cache_dir=cache, allow_model_downloads=True, model_download_timeout_s=4.5))
        assert reranker is None and status.ran is False

    assert [(url.rsplit("/", 1)[-1], kwargs.get("timeout")) for url, kwargs in gets] == [
        (f"{FLASHRANK_MODEL}.zip", 4.5)]
    assert ranker_module.requests is real_requests  # FlashRank's module is left as it was
    assert not (cache / FLASHRANK_MODEL).exists()
    assert no_network == []


# Telemetry --------------------------------------------------------------------------------------

def test_the_dashboard_config_turns_streamlit_usage_stats_off():
    with open(REPO / ".streamlit" / "config.toml", "rb") as handle:
        assert tomllib.load(handle)["browser"]["gatherUsageStats"] is False


def test_streamlit_reads_usage_stats_off_from_the_project(monkeypatch, tmp_path):
    """What Streamlit itself makes of the file when started from the project folder, as
    `make dashboard` does; a folder without the file is the control."""
    from streamlit import config

    try:
        with monkeypatch.context() as patch:
            patch.delenv("STREAMLIT_BROWSER_GATHER_USAGE_STATS", raising=False)
            patch.chdir(REPO)
            config.get_config_options(force_reparse=True)
            assert config.get_option("browser.gatherUsageStats") is False
            if not (Path.home() / ".streamlit" / "config.toml").exists():
                patch.chdir(tmp_path)
                config.get_config_options(force_reparse=True)
                assert config.get_option("browser.gatherUsageStats") is True
    finally:
        config.get_config_options(force_reparse=True)


@pytest.mark.server
def test_the_chroma_server_and_its_clients_run_with_telemetry_off(tmp_path):
    server = ChromaServer(tmp_path / "server-data")
    try:
        environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
        assert b"ANONYMIZED_TELEMETRY=False" in environ
        assert not [v for v in environ if v.startswith(b"OTEL_")]
        settings = Settings(chroma_host="127.0.0.1", chroma_port=server.port,
                            store=tmp_path / "unused")
        client = Workbench(settings).store.client
        assert client.get_settings().anonymized_telemetry is False
        assert client.heartbeat() > 0
    finally:
        server.stop()


# Everything together, watched from the kernel's side -------------------------------------------

_ADDRESS = re.compile(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"')


def outbound_addresses(trace: Path) -> list[str]:
    """Every IP address a traced process connected or sent to that is not this machine."""
    found = []
    for line in trace.read_text(errors="replace").splitlines():
        for match in _ADDRESS.finditer(line):
            address = ipaddress.ip_address(match.group(1) or match.group(2))
            mapped = getattr(address, "ipv4_mapped", None)
            if not (address.is_loopback or (mapped and mapped.is_loopback)
                    or address.is_unspecified):
                found.append(line.strip())
    return found


@pytest.fixture
def strace(tmp_path):
    """A command prefix that logs the network system calls of a process and its children."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")

    def prefix(name: str) -> list[str]:
        return ["strace", "-f", "-qq", "--seccomp-bpf", "-e", "trace=connect,sendto,sendmsg",
                "-o", str(tmp_path / f"{name}.strace")]

    probe = subprocess.run([*prefix("probe"), "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"strace cannot trace here: {probe.stderr.strip()[:200]}")
    return prefix


@pytest.mark.server
@pytest.mark.model
def test_cli_and_chroma_server_connect_to_nothing_but_this_machine(strace, tmp_path,
                                                                   tmp_path_factory):
    """The CLI with the real model and the ChromaDB server, each traced by strace from its
    start: every connection they open goes to 127.0.0.1 or a local socket, whatever a
    library might want to report. The CLI ingests into an embedded store, a server is
    started on that folder, and the CLI retrieves and reports status through it. (Without
    ORT_DISABLE_TELEMETRY, the retrieve resolves ONNX Runtime's telemetry host here.) The
    model runs on ONNX Runtime, exported by the first command unless this session has."""
    env = own_environment(EVIDENCE_RERANKER_CACHE_DIR=str(tmp_path / "no-models"),
                          EVIDENCE_ONNX_CACHE_DIR=str(tmp_path_factory.getbasetemp()
                                                      / "onnx-cache"))
    payload = SAMPLE_DATA / "vendors/acme/questionnaires/round_1.json"

    def traced(name: str, *args: str) -> str:
        """`python -m core.cli ARGS` started fresh under strace (log NAME.strace); its
        stdout, once it exited 0."""
        done = subprocess.run([*strace(name), sys.executable, "-m", "core.cli", *args],
                              env=env, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, f"{name}: {done.stderr}"
        return done.stdout

    traced("ingest-embedded", "--store", str(tmp_path / "store"), "ingest", "questionnaire",
           str(payload))
    server = ChromaServer(tmp_path / "store", wrapper=strace("server"))
    on_server = ("--chroma-host", "127.0.0.1", "--chroma-port", str(server.port))
    try:
        trace = json.loads(traced("retrieve-server", *on_server, "retrieve", "--vendor",
                                  "acme", "--criterion", AES_CRITERION))
        status = json.loads(traced("status-server", *on_server, "status"))
    finally:
        server.stop()
    assert [f["round_number"] for f in trace["followups"]] == [1]
    assert status["rounds"] == [1]
    for name in ("ingest-embedded", "server", "retrieve-server", "status-server"):
        assert outbound_addresses(tmp_path / f"{name}.strace") == [], name
    # Control: the traces do record connections, the CLI's to the server among them.
    assert f"htons({server.port})" in (tmp_path / "retrieve-server.strace").read_text()
