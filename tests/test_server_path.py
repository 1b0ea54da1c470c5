"""The ChromaDB server path: the shared sample server really is fresh for each test, and a
server that goes away in the middle of an ingest gives one clear error and leaves, once it
is restarted on the same folder, every document and round as it was or complete."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path

import httpx
import pytest

from core.config import Settings
from core.errors import StoreError
from core.store import EvidenceStore, writes
from core.workbench import Workbench
from tests.chroma_server import ChromaServer
from tests.conftest import SAMPLE_DATA, server_fingerprint
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support import payloads
from tests.support.cli import run_process

pytestmark = pytest.mark.server

ACME_DOCS = SAMPLE_DATA / "vendors" / "acme" / "documents"
KEY_CRITERION = "Does the vendor rotate its encryption keys?"


# A relay that kills the server in the middle of a request ---------------------------------------

class KillingRelay:
    """A TCP relay on 127.0.0.1 between a ChromaDB client and the server that SIGKILLs the
    server at a chosen request (the `occurrence`-th whose request line contains `marker`):

    - "cut": the server gets the headers and half the body, then dies; it never had the
      whole write;
    - "unanswered": the server gets the whole request and answers it, then dies before the
      answer reaches the client; the write happened, the client never heard of it.
    Every other request and answer passes through unchanged."""

    def __init__(self, server: ChromaServer, marker: bytes, *, mode: str,
                 occurrence: int = 1) -> None:
        assert mode in ("cut", "unanswered")
        self.server = server
        self.marker = marker
        self.mode = mode
        self.occurrence = occurrence
        self.seen = 0
        self.triggered = threading.Event()  # the chosen request arrived
        self.fired = threading.Event()  # ...and the server is dead
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        """Stop accepting; once the chosen request has arrived, return only when the server
        is dead (the client may see its connection drop a moment before)."""
        self._listener.close()
        if self.triggered.is_set():
            self.fired.wait()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _is_target(self, request_line: bytes) -> bool:
        if self.fired.is_set() or self.marker not in request_line:
            return False
        with self._lock:
            self.seen += 1
            if self.seen != self.occurrence:
                return False
        self.triggered.set()
        return True

    def _fire(self, *sockets: socket.socket) -> None:
        self.server.kill()
        self.fired.set()
        _hang_up(*sockets)

    def _relay(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.server.port))
        except OSError:
            client.close()
            return
        hold = threading.Event()  # set: the next answer is swallowed and the server killed
        threading.Thread(target=self._answers, args=(upstream, client, hold),
                         daemon=True).start()
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = client.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    data = client.recv(65536)
                    if not data:
                        return
                    buffer += data
                body, buffer = buffer[:length], buffer[length:]
                request = head + b"\r\n\r\n" + body
                if self._is_target(head.split(b"\r\n", 1)[0]):
                    if self.mode == "cut":
                        upstream.sendall(request[: len(head) + 4 + length // 2])
                        self._fire(client, upstream)
                        return
                    hold.set()
                upstream.sendall(request)
        except OSError:
            return
        finally:
            _hang_up(client, upstream)

    def _answers(self, upstream: socket.socket, client: socket.socket,
                 hold: threading.Event) -> None:
        try:
            while data := upstream.recv(65536):
                if hold.is_set():
                    self._fire(client, upstream)
                    return
                client.sendall(data)
        except OSError:
            pass
        _hang_up(client, upstream)


def _hang_up(*sockets: socket.socket) -> None:
    """shutdown, not just close: the relay's other thread may be blocked on the socket, and
    close alone then sends the peer nothing, leaving a client without timeout waiting."""
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


# Helpers ----------------------------------------------------------------------------------------

# A writer killed with the server leaves its write lease on the server; the rerun after the
# restart takes it over once it lapses. A short lease keeps that wait short.
LEASE_S = 3.0


def server_settings(port: int, tmp_path: Path) -> Settings:
    return Settings(chroma_host="127.0.0.1", chroma_port=port, store=tmp_path / "unused",
                    reranker_cache_dir=tmp_path / "no-models", write_lease_s=LEASE_S)


def fake_workbench(port: int, tmp_path: Path) -> Workbench:
    return Workbench(server_settings(port, tmp_path), embedder=FakeEmbedder(),
                     reranker=FakeReranker())


def rotation_round(round_number: int, answers: int = 4) -> dict:
    """A round of `answers` answers on key rotation, each naming its round; the first linked
    to KEY_CRITERION."""
    return payloads.round_payload(round_number, payloads.numbered(
        answers, "Round {round} question {i} on key rotation",
        "Round {round} answer {i}: keys rotate every year.", criterion={0: KEY_CRITERION},
        round=round_number))


def visible(bench: Workbench) -> dict:
    """What a user sees of vendor 'acme': status (without the count of unfinished chunks,
    which exists to report exactly this), committed documents, and retrieved sources."""
    (status,) = bench.status("acme")
    shown = status.model_dump(exclude={"incomplete_chunks"})
    shown["documents_listed"] = sorted(d["source"] for d in bench.documents("acme"))
    trace = bench.retrieve("acme", KEY_CRITERION, "precedence")
    shown["retrieved_sources"] = sorted({e.source for e in trace.evidence})
    shown["followup_rounds"] = sorted({f.round_number for f in trace.followups})
    return shown


def ingest_second_document(bench: Workbench) -> object:
    return bench.ingest_documents("acme", [ACME_DOCS / "access_control_policy.md"])


def ingest_round_two(bench: Workbench) -> object:
    return bench.ingest_questionnaire(rotation_round(2))


@pytest.fixture
def small_batches(monkeypatch):
    """Writes in batches of 5, so one document takes several upsert calls."""
    monkeypatch.setattr(EvidenceStore, "max_batch_size", lambda self: 5)


@pytest.fixture
def baseline_server(tmp_path, small_batches):
    """A server holding one document and round 1 of vendor 'acme', and what a user sees."""
    data = tmp_path / "server-data"
    server = ChromaServer(data)
    bench = fake_workbench(server.port, tmp_path)
    bench.ingest_documents("acme", [ACME_DOCS / "encryption_standard.md"])
    bench.ingest_questionnaire(rotation_round(1))
    servers = [server]
    yield server, visible(bench), servers
    for each in servers:
        each.stop()


def expect_store_error(error: BaseException) -> None:
    """The library's error for a server that went away is a StoreError naming the server."""
    assert isinstance(error, StoreError), f"{type(error).__name__}: {error}"
    assert "ChromaDB server" in str(error)


# The shared sample server -----------------------------------------------------------------------

@pytest.mark.model
def test_the_sample_server_is_fresh_again_after_a_test_that_wrote(sample_server, tmp_path):
    """The promise of SampleServer: a test that changes the server's content leaves the next
    test a new server on a new copy, holding exactly the sample store again."""
    sample_server.ensure_pristine()
    starts, pristine = sample_server.starts, server_fingerprint(sample_server.port)
    fake_workbench(sample_server.port, tmp_path).store.client.get_collection(
        "vendor__acme__chunks").delete(where={"type": "tc_files"})
    assert server_fingerprint(sample_server.port) != pristine
    sample_server.ensure_pristine()
    assert sample_server.starts == starts + 1
    assert server_fingerprint(sample_server.port) == pristine
    sample_server.ensure_pristine()  # unchanged content: no restart
    assert sample_server.starts == starts + 1


# The server going away in the middle of an ingest -----------------------------------------------

def terminate_on_upsert(server: ChromaServer, patches: pytest.MonkeyPatch, *,
                        collection_suffix: str, call: int) -> None:
    """SIGTERM the server just before the `call`-th upsert into a collection named *suffix
    (at the store's own write door, `core.store.writes`)."""
    calls = {"n": 0}
    real_apply = writes.apply

    def apply(collection, operation, **kwargs):
        if operation == "upsert" and collection.name.endswith(collection_suffix):
            calls["n"] += 1
            if calls["n"] == call:
                server.stop()
        return real_apply(collection, operation, **kwargs)

    patches.setattr(writes, "apply", apply)


SCENARIOS = {
    # name: (faulty ingest, fault, outcome of the interrupted item after the restart)
    "document, server stopped between two of its chunk batches":
        (ingest_second_document, ("terminate", "__chunks", 2), "as before"),
    "document, server stopped before its manifest entry is written":
        (ingest_second_document, ("terminate", "__manifest", 1), "as before"),
    # An ingest's first upsert marks the vendor pending in the store's register of vendors.
    "document, server killed while a chunk batch is on its way":
        (ingest_second_document, ("cut", b"/upsert", 3), "as before"),
    # Then a round's first upsert writes its links to the manifest; the next, its responses.
    "round, server killed while its write is on its way":
        (ingest_round_two, ("cut", b"/upsert", 3), "as before"),
    "round, server killed after storing it, before answering":
        (ingest_round_two, ("unanswered", b"/upsert", 3), "complete"),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_server_gone_mid_ingest_leaves_old_or_complete(scenario, baseline_server, tmp_path,
                                                       monkeypatch):
    faulty_ingest, (fault, where, occurrence), outcome = SCENARIOS[scenario]
    server, before, servers = baseline_server
    relay = None
    with monkeypatch.context() as patches:
        if fault == "terminate":
            terminate_on_upsert(server, patches, collection_suffix=where, call=occurrence)
            port = server.port
        else:
            relay = KillingRelay(server, where, mode=fault, occurrence=occurrence)
            port = relay.port
        try:
            with pytest.raises((StoreError, httpx.TransportError)) as raised:
                faulty_ingest(fake_workbench(port, tmp_path))
        finally:
            if relay:
                relay.close()
    assert relay is None or relay.fired.is_set()
    assert not server.running

    restarted = ChromaServer(server.path)
    servers.append(restarted)
    after_restart = visible(fake_workbench(restarted.port, tmp_path))

    rerun = fake_workbench(restarted.port, tmp_path)
    faulty_ingest(rerun)  # the same ingest again completes the rest
    complete = visible(rerun)
    assert complete != before
    assert after_restart == (before if outcome == "as before" else complete)
    # Running it once more changes nothing: replaced, never duplicated.
    faulty_ingest(rerun)
    assert visible(rerun) == complete
    (status,) = rerun.status("acme")
    assert status.incomplete_chunks == 0
    expect_store_error(raised.value)


@pytest.mark.model
def test_cli_ingest_with_the_server_killed_mid_document(tmp_path, real_embedder):
    """`evidence ingest docs` of three documents through the server, killed while the second
    document's chunks are on their way: exit 1 with one line, no traceback; after the
    restart the first document is complete, the others absent, and rerunning completes."""
    folder = tmp_path / "policies"
    folder.mkdir()
    names = ["access_control_policy.md", "data_retention_policy.md", "encryption_standard.md"]
    for name in names:
        (folder / name).write_bytes((ACME_DOCS / name).read_bytes())
    server = ChromaServer(tmp_path / "server-data")
    servers = [server]
    # Upserts of a new vendor's ingest: the vendor marked pending in the store's register,
    # document 1's chunks, its manifest entry, document 2's chunks (the fourth).
    relay = KillingRelay(server, b"/upsert", mode="cut", occurrence=4)
    env = {**os.environ, "EVIDENCE_RERANKER_CACHE_DIR": str(tmp_path / "no-models"),
           "EVIDENCE_STORE": str(tmp_path / "unused"), "EVIDENCE_WRITE_LEASE_S": str(LEASE_S)}
    env.pop("EVIDENCE_DEBUG", None)
    try:
        done = run_process("--chroma-host", "127.0.0.1", "--chroma-port", str(relay.port),
                           "ingest", "docs", "--vendor", "acme", folder, env=env, cwd=tmp_path)
        relay.close()
        assert relay.fired.is_set()
        assert done.returncode == 1, done.stderr
        assert done.stdout == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("evidence: "), done.stderr
        assert "Traceback" not in done.stderr

        restarted = ChromaServer(server.path)
        servers.append(restarted)
        bench = Workbench(server_settings(restarted.port, tmp_path), embedder=real_embedder)
        (status,) = bench.status("acme")
        assert [d["source"] for d in bench.documents("acme")] == [names[0]]
        assert status.documents == 1 and status.by_type == {"tc_files": status.chunks}
        trace = bench.retrieve("acme", KEY_CRITERION, "semantic")
        assert {e.source for e in trace.evidence} == {names[0]}

        report = bench.ingest_documents("acme", [folder])
        assert [d.status for d in report.documents] == ["unchanged", "added", "added"]
        (status,) = bench.status("acme")
        assert status.documents == 3 and status.incomplete_chunks == 0
    finally:
        for each in servers:
            each.stop()
    assert "ChromaDB server" in lines[0], lines[0]
