"""A team's shared ChromaDB server behind a reverse proxy (nginx: TLS with a private CA's
certificate, a bearer token checked): the commands work through it with the right token and
CA bundle; a wrong or missing token, an untrusted certificate and plain HTTP to the TLS port
are each one sentence, exit 1, with nothing written and the token never shown."""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

import pytest

import core.workbench
from core.config import Settings
from core.store import EvidenceStore
from tests.conftest import AES_CRITERION, SAMPLE_DATA, server_fingerprint
from tests.fakes import FakeEmbedder
from tests.support.cli import environment, run_main, run_process
from tests.tls_proxy import TlsProxy, nginx_binary

ACME = SAMPLE_DATA / "vendors" / "acme"
TOKEN = "team-token-5f0c2e9a71"
WRONG_TOKEN = "someone-elses-token-88d1"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One proxy and server for the whole file: starting them costs a few seconds."""
    if nginx_binary() is None:
        pytest.fail("Debian's nginx is not installed: `make test` installs it "
                    "(apt-get install nginx).")
    root = tmp_path_factory.mktemp("shared-server")
    proxy = TlsProxy(root / "proxy", root / "chroma" / "store", TOKEN)
    yield proxy
    proxy.stop()


def client_settings(shared: TlsProxy, tmp_path: Path, **changes: str | None) -> dict[str, str]:
    """The EVIDENCE_* variables of a team member's machine; `changes` set or (None) unset."""
    variables = {
        "EVIDENCE_CHROMA_HOST": "127.0.0.1", "EVIDENCE_CHROMA_PORT": str(shared.port),
        "EVIDENCE_CHROMA_SSL": "true", "EVIDENCE_CHROMA_CA_BUNDLE": str(shared.ca_bundle),
        "EVIDENCE_CHROMA_TOKEN": TOKEN, "EVIDENCE_CHROMA_TIMEOUT_S": "30",
        "EVIDENCE_STORE": str(tmp_path / "unused"),
        "EVIDENCE_LEXICAL_DIR": str(tmp_path / "lexical"),
        "EVIDENCE_RERANKER_CACHE_DIR": str(tmp_path / "no-models"),
        "EVIDENCE_EMBEDDING_MODEL": "fake-bag-of-words",
    }
    variables.update(changes)
    return {name: value for name, value in variables.items() if value is not None}


def use(monkeypatch, variables: dict[str, str]) -> None:
    """The variables for the CLI run in this process, and the fake embedder for its models."""
    for name in [n for n in os.environ if n.startswith("EVIDENCE_")]:
        monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(core.workbench, "configured_embedder",
                        lambda settings, **_: FakeEmbedder())


run = partial(run_main, clear=True)


def no_token(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text and WRONG_TOKEN not in text


# Through the proxy with the right token and CA bundle ----------------------------------------

@pytest.mark.server
def test_the_commands_work_through_the_proxy(shared, tmp_path, monkeypatch, capsys):
    use(monkeypatch, client_settings(shared, tmp_path))
    code, out, err = run(capsys, "ingest", "docs", "--vendor", "acme", ACME / "documents")
    assert code == 0, err
    report = json.loads(out)
    assert {d["status"] for d in report["documents"]} == {"added"}
    assert report["chunks_written"] > 0
    for n in (1, 2):
        code, out, err = run(capsys, "ingest", "questionnaire",
                             ACME / "questionnaires" / f"round_{n}.json")
        assert code == 0, err

    code, out, err = run(capsys, "status")
    assert code == 0, err
    (status,) = [json.loads(line) for line in out.splitlines()]
    assert status["vendor_id"] == "acme" and status["rounds"] == [1, 2]
    assert status["documents"] == len(report["documents"])

    for strategy in ("semantic", "precedence", "hybrid"):
        code, out, err = run(capsys, "retrieve", "--vendor", "acme", "--criterion",
                             AES_CRITERION, "--strategy", strategy)
        assert code == 0, f"{strategy}: {err}"
        trace = json.loads(out)
        assert trace["strategy"] == strategy and trace["evidence"], strategy

    code, out, err = run(capsys, "ask", "--vendor", "acme", "Is data at rest encrypted?")
    assert code == 0, err
    assert json.loads(out)["question"] == "Is data at rest encrypted?"
    no_token(out, err)


@pytest.mark.server
def test_a_new_process_reads_the_shared_server(shared, tmp_path):
    """The command as a team member runs it: its own process, settings from the environment."""
    env = environment(**client_settings(shared, tmp_path))
    done = run_process("status", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert json.loads(line)["vendor_id"]
    no_token(done.stdout, done.stderr)


# Refused: one sentence, exit 1, nothing written, the token never shown ----------------------------

REFUSALS = {
    "wrong token": ({"EVIDENCE_CHROMA_TOKEN": WRONG_TOKEN},
                    "The ChromaDB server https://127.0.0.1:{port} refused the token (HTTP 401); "
                    "check EVIDENCE_CHROMA_TOKEN."),
    "missing token": ({"EVIDENCE_CHROMA_TOKEN": None},
                      "The ChromaDB server https://127.0.0.1:{port} asks for a token (HTTP 401); "
                      "set EVIDENCE_CHROMA_TOKEN."),
    "no CA bundle": ({"EVIDENCE_CHROMA_CA_BUNDLE": None},
                     "The certificate of the ChromaDB server https://127.0.0.1:{port} is not "
                     "trusted ("),
    "plain HTTP to the TLS port": ({"EVIDENCE_CHROMA_SSL": None},
                                   "The ChromaDB server 127.0.0.1:{port} is served over TLS and "
                                   "refused plain HTTP (HTTP 400); set EVIDENCE_CHROMA_SSL=true."),
    "TLS to ChromaDB's plain port": ({"EVIDENCE_CHROMA_PORT": "{chroma_port}"},
                                     "The TLS handshake with the ChromaDB server "
                                     "https://127.0.0.1:{chroma_port} failed ("),
}
COMMANDS = {
    "ingest docs": ["ingest", "docs", "--vendor", "newco", str(ACME / "soc2_summary")],
    "ingest questionnaire": ["ingest", "questionnaire",
                             str(ACME / "questionnaires" / "round_3.json")],
}


@pytest.mark.server
@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_in_one_sentence_and_nothing_written(shared, tmp_path, case, command):
    changes, sentence = REFUSALS[case]
    ports = {"port": shared.port, "chroma_port": shared.chroma.port}
    changes = {name: value.format(**ports) if value else value
               for name, value in changes.items()}
    env = environment(**client_settings(shared, tmp_path, **changes))
    before = server_fingerprint(shared.chroma.port)  # read past the proxy
    done = run_process(*COMMANDS[command], env=env, cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("evidence: error: " + sentence.format(**ports)), lines[0]
    if case == "no CA bundle":
        assert lines[0].endswith("set EVIDENCE_CHROMA_CA_BUNDLE to the PEM file of the CA "
                                 "that signed it.")
    no_token(done.stderr)
    assert server_fingerprint(shared.chroma.port) == before


@pytest.mark.server
def test_a_proxy_that_cannot_reach_chromadb_says_so(tmp_path, monkeypatch, capsys):
    if nginx_binary() is None:
        pytest.fail("Debian's nginx is not installed: `make test` installs it "
                    "(apt-get install nginx).")
    proxy = TlsProxy(tmp_path / "proxy", tmp_path / "chroma" / "store", TOKEN)
    try:
        proxy.chroma.stop()  # nginx stays up and answers 502
        use(monkeypatch, client_settings(proxy, tmp_path))
        code, out, err = run(capsys, "status")
    finally:
        proxy.stop()
    lines = err.strip().splitlines()
    assert code == 1 and out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"evidence: error: The ChromaDB server https://127.0.0.1:"
                               f"{proxy.port} answered HTTP 502: the proxy in front of it "
                               "could not reach ChromaDB"), lines[0]


# The settings ----------------------------------------------------------------------------------

def test_the_token_is_never_shown(tmp_path):
    settings = Settings(chroma_host="127.0.0.1", chroma_port=8443, chroma_ssl=True,
                        chroma_token=TOKEN, store=tmp_path / "unused")
    assert settings.chroma_token.get_secret_value() == TOKEN
    assert EvidenceStore(settings).location == "ChromaDB server https://127.0.0.1:8443"
    no_token(repr(settings), str(settings), json.dumps(settings.model_dump(mode="json")))


@pytest.mark.parametrize(("variable", "value", "needles"), [
    ("EVIDENCE_CHROMA_CA_BUNDLE", "{tmp}/absent.pem", ["there is no file at"]),
    ("EVIDENCE_CHROMA_CA_BUNDLE", "{tmp}/not-a-ca.pem", ["holds no PEM CA certificate"]),
    ("EVIDENCE_CHROMA_TOKEN", f"{TOKEN} {TOKEN}", ["printable ASCII characters without spaces"]),
    ("EVIDENCE_CHROMA_SSL", "maybe", ["'maybe'"]),
])
def test_a_bad_client_setting_is_refused_in_one_sentence(variable, value, needles, tmp_path,
                                                         monkeypatch, capsys):
    (tmp_path / "not-a-ca.pem").write_text("this is not a certificate\n")
    monkeypatch.setenv("EVIDENCE_CHROMA_HOST", "127.0.0.1")
    monkeypatch.setenv(variable, value.format(tmp=tmp_path))
    code, out, err = run(capsys, "--store", tmp_path / "store", "status")
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"evidence: error: The setting {variable}"), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    no_token(err)
