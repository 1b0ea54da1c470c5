"""A ChromaDB server that accepts connections and never answers, or answers the connection's
checks and then hangs: every command gives up after EVIDENCE_CHROMA_TIMEOUT_S with one
sentence naming the server, and so does the dashboard. No test measures time: each simply
ends, because the timeout ends it."""

from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.cli import main
from core.config import Settings
from core.errors import StoreError
from core.workbench import Workbench
from dashboard import resources
from tests.chroma_server import ChromaServer
from tests.conftest import AES_CRITERION, SAMPLE_DATA
from tests.dashboard.conftest import DASHBOARD
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.cli import environment, error_message, run_process

ROUND_1 = SAMPLE_DATA / "vendors" / "acme" / "questionnaires" / "round_1.json"
TIMEOUT_S = "1"


class HungServer:
    """Accepts TCP connections on 127.0.0.1 and never sends a byte."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed
                return
            self._held.append(connection)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        for connection in self._held:
            connection.close()


class StallingProxy:
    """An HTTP proxy on 127.0.0.1 in front of a ChromaDB server that passes every request
    through except those `stall(method, path)` picks: it reads them and never answers."""

    def __init__(self, upstream_port: int, stall: Callable[[str, str], bool]) -> None:
        self.stalled = threading.Event()  # a request was held
        self._release = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if stall(self.command, self.path):
                    proxy.stalled.set()
                    proxy._release.wait(timeout=600)  # until close(): the client gives up first
                    self.close_connection = True
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
                try:
                    headers = {name: value for name, value in self.headers.items()
                               if name.lower() not in ("host", "connection")}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                finally:
                    upstream.close()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection",
                                            "date", "server"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = relay

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()


def collection_calls(method: str, path: str) -> bool:
    """Every call on collections: the connection's own checks (identity, tenant, database)
    are answered, and the first real call of a command hangs."""
    return "/collections" in path


@pytest.fixture
def hung_server():
    server = HungServer()
    yield server
    server.close()


@pytest.fixture
def chroma(tmp_path):
    server = ChromaServer(tmp_path / "chroma" / "store")
    yield server
    server.stop()


def timeout_sentence(port: int) -> str:
    return f"The ChromaDB server 127.0.0.1:{port} did not answer within 1 s"


def cli_env(tmp_path: Path, port: int) -> dict[str, str]:
    return environment(EVIDENCE_CHROMA_HOST="127.0.0.1", EVIDENCE_CHROMA_PORT=str(port),
                       EVIDENCE_CHROMA_TIMEOUT_S=TIMEOUT_S, EVIDENCE_STORE=str(tmp_path / "unused"),
                       EVIDENCE_RERANKER_CACHE_DIR=str(tmp_path / "no-models"),
                       EVIDENCE_LEXICAL_DIR=str(tmp_path / "lexical"))


COMMANDS = {
    "status": ["status"],
    "retrieve": ["retrieve", "--vendor", "acme", "--criterion", AES_CRITERION],
    "ingest questionnaire": ["ingest", "questionnaire", str(ROUND_1)],
}


def assert_gave_up(done: subprocess.CompletedProcess, port: int) -> None:
    """Exit 1, nothing on stdout, one line naming the server and the timeout setting."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    message = error_message(done.stderr)
    assert message.startswith(timeout_sentence(port)), message
    assert "(EVIDENCE_CHROMA_TIMEOUT_S)" in message


# The setting --------------------------------------------------------------------------------

def test_the_timeout_is_a_setting(monkeypatch):
    assert Settings().chroma_timeout_s == 30.0
    monkeypatch.setenv("EVIDENCE_CHROMA_TIMEOUT_S", "2.5")
    assert Settings().chroma_timeout_s == 2.5


@pytest.mark.parametrize("value", ["soon", "0", "-1", "100000"])
def test_a_bad_timeout_is_refused_in_one_sentence(value, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("EVIDENCE_CHROMA_TIMEOUT_S", value)
    assert main(["--store", str(tmp_path / "store"), "status"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert error_message(err).startswith(f"The setting EVIDENCE_CHROMA_TIMEOUT_S='{value}'")
    assert not (tmp_path / "store").exists()


# A server that accepts and never answers ----------------------------------------------------

@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_gives_up_on_a_server_that_never_answers(command, hung_server, tmp_path):
    done = run_process(*COMMANDS[command], env=cli_env(tmp_path, hung_server.port), cwd=tmp_path)
    assert_gave_up(done, hung_server.port)
    assert not (tmp_path / "unused").exists()


def test_the_library_gives_up_on_a_server_that_never_answers(hung_server, tmp_path):
    settings = Settings(chroma_host="127.0.0.1", chroma_port=hung_server.port,
                        chroma_timeout_s=1, store=tmp_path / "unused")
    bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    with pytest.raises(StoreError) as raised:
        bench.status()
    message = str(raised.value)
    assert message.startswith(timeout_sentence(hung_server.port))
    assert "EVIDENCE_CHROMA_TIMEOUT_S" in message and "\n" not in message
    # Asked again, the store tries again (nothing broken was kept) and gives up again.
    with pytest.raises(StoreError, match="did not answer within 1 s"):
        bench.vendor_ids()


# A server that answers the connection's checks, then hangs ----------------------------------

@pytest.mark.server
def test_a_command_gives_up_on_a_server_that_hangs_after_connecting(chroma, tmp_path):
    proxy = StallingProxy(chroma.port, collection_calls)
    try:
        done = run_process(*COMMANDS["status"], env=cli_env(tmp_path, proxy.port), cwd=tmp_path)
    finally:
        proxy.close()
    assert proxy.stalled.is_set()
    assert_gave_up(done, proxy.port)


@pytest.mark.server
def test_a_write_that_hangs_gives_up_and_says_the_earlier_writes_are_complete(chroma, tmp_path):
    proxy = StallingProxy(chroma.port, lambda method, path: path.endswith("/upsert"))
    settings = Settings(chroma_host="127.0.0.1", chroma_port=proxy.port, chroma_timeout_s=1,
                        store=tmp_path / "unused", lexical_dir=tmp_path / "lexical")
    bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    try:
        with pytest.raises(StoreError) as raised:
            bench.ingest_documents("acme", [SAMPLE_DATA / "vendors" / "acme" / "soc2_summary"])
    finally:
        proxy.close()
    assert proxy.stalled.is_set()
    message = str(raised.value)
    assert message.startswith(timeout_sentence(proxy.port)), message
    assert "what was written before is complete" in message and "\n" not in message


# The dashboard --------------------------------------------------------------------------------

def dashboard_on(port: int, tmp_path: Path, monkeypatch) -> AppTest:
    settings = Settings(chroma_host="127.0.0.1", chroma_port=port, chroma_timeout_s=1,
                        store=tmp_path / "unused", reranker_cache_dir=tmp_path / "none",
                        lexical_dir=tmp_path / "lexical")
    bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    monkeypatch.setattr(resources, "make_workbench", lambda: bench)
    st.cache_resource.clear()
    st.cache_data.clear()
    return AppTest.from_file(str(DASHBOARD / "app.py"), default_timeout=120)


def assert_one_error(at: AppTest, port: int) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1, [e.value for e in at.error]
    assert at.error[0].value.startswith(timeout_sentence(port)), at.error[0].value
    assert "EVIDENCE_CHROMA_TIMEOUT_S" in at.error[0].value


def test_the_dashboard_says_the_server_does_not_answer(hung_server, tmp_path, monkeypatch):
    at = dashboard_on(hung_server.port, tmp_path, monkeypatch)
    try:
        at.run()
        assert_one_error(at, hung_server.port)
    finally:
        st.cache_resource.clear()
        st.cache_data.clear()


@pytest.mark.server
def test_the_dashboard_says_the_server_hangs_after_connecting(chroma, tmp_path, monkeypatch):
    proxy = StallingProxy(chroma.port, collection_calls)
    at = dashboard_on(proxy.port, tmp_path, monkeypatch)
    try:
        at.run()
    finally:
        proxy.close()
        st.cache_resource.clear()
        st.cache_data.clear()
    assert proxy.stalled.is_set()
    assert_one_error(at, proxy.port)
