"""`evidence models [--download]` (CONTRACT.md "Models"): one JSON line per model the
workbench uses, and downloads only when allowed, with the timeout, saying so when offline.
Nothing here reaches the network: sockets are refused or simulated."""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from core.cli import main
from core.encoders.onnx.cache import find_export
from core.encoders.onnx.check import EXPORT_FORMAT
from core.encoders.rerank import _RequestsWithTimeout
from tests.conftest import REPO
from tests.support.cli import run_json
from tests.support.tiny_bert_cross_encoder import build_tiny_bert_cross_encoder
from tests.support.tiny_cross_encoder import DEFAULT_MODEL_NAME, build_tiny_cross_encoder

FLASHRANK = f"flashrank:{DEFAULT_MODEL_NAME}"


@pytest.fixture(autouse=True)
def _default_models(monkeypatch, tmp_path):
    for name in ("EVIDENCE_RERANKER", "EVIDENCE_CROSS_ENCODER_MODEL", "EVIDENCE_RERANKER_MODEL",
                 "EVIDENCE_EMBEDDING_RUNTIME", "HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVIDENCE_ONNX_CACHE_DIR", str(tmp_path / "onnx-cache"))


@pytest.fixture
def network(monkeypatch):
    """Every connection attempt recorded; refused as an offline machine refuses it (a name
    that does not resolve), unless a test sets `network.online = True`."""

    class Network:
        online = False
        attempts: list[tuple] = []

    def create_connection(address, timeout=None, *args, **kwargs):
        Network.attempts.append(("create_connection", address, timeout))
        if Network.online:
            return socket.socket()  # closed by the caller, never connected
        raise socket.gaierror(-2, "Name or service not known")

    def refuse(what):
        def refused(*args, **kwargs):
            Network.attempts.append((what,))
            raise socket.gaierror(-2, "Name or service not known")
        return refused

    Network.attempts = []
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    return Network


@pytest.fixture
def flashrank_downloads(monkeypatch) -> list[dict]:
    """FlashRank's download replaced by one that writes the tiny model where the real one
    would unpack, recording the `requests` module FlashRank saw while it ran."""
    ranker_module = importlib.import_module("flashrank.Ranker")
    calls: list[dict] = []

    def download(self, model_name):
        calls.append({"model": model_name, "requests": ranker_module.requests})
        build_tiny_cross_encoder(self.cache_dir, model_name)

    monkeypatch.setattr(ranker_module.Ranker, "_download_model_files", download)
    return calls


def run(capsys, *args: str) -> tuple[int, list[dict], list[str]]:
    code, lines, err = run_json(capsys, "models", *args, keep=None)  # every line a record
    return code, lines, err.splitlines()


def by_role(lines: list[dict]) -> dict[str, dict]:
    return {line["model"]: line for line in lines}


# Reporting ------------------------------------------------------------------------------------

def test_one_line_per_model_with_where_it_is_read_from(capsys, network, tmp_path):
    code, lines, err = run(capsys)

    assert code == 0 and err == []
    assert [line["model"] for line in lines] == ["embedding", "reranker"]
    embedding, reranker = lines
    assert embedding["name"] == "all-MiniLM-L6-v2"
    assert embedding["present"] is True
    assert Path(embedding["location"], "config.json").exists()
    # ONNX Runtime, once the export is made and checked (nothing is exported to report it)
    assert embedding["runtime"] == (
        f"onnxruntime {version('onnxruntime')} (cpu), to be exported from "
        f"{embedding['location']} to {export_folder(tmp_path) / 'model.onnx'} and checked "
        "against torch (cosine >= 0.9999) at first use")
    assert not (tmp_path / "onnx-cache").exists()
    assert "note" not in embedding and "runtime_note" not in embedding
    assert reranker["name"] == FLASHRANK
    assert reranker["location"] == str(tmp_path / "flashrank-cache" / DEFAULT_MODEL_NAME)
    assert reranker["present"] is False
    assert reranker["runtime"].startswith("flashrank ") and "onnxruntime" in reranker["runtime"]
    assert reranker["note"] == (
        "retrieval keeps first-stage order without it; on a connected machine run "
        "EVIDENCE_ALLOW_MODEL_DOWNLOADS=1 evidence models --download, or copy the model folder "
        f"to {reranker['location']}.")
    assert network.attempts == []


def export_folder(tmp_path: Path) -> Path:
    return find_export("all-MiniLM-L6-v2", tmp_path / "onnx-cache").folder


def test_the_torch_runtime_when_asked_for(capsys, monkeypatch):
    monkeypatch.setenv("EVIDENCE_EMBEDDING_RUNTIME", "torch")
    embedding = by_role(run(capsys)[1])["embedding"]
    assert embedding["runtime"] == (f"sentence-transformers {version('sentence-transformers')} "
                                    f"on torch {version('torch')} (cpu)")
    assert "runtime_note" not in embedding


@pytest.mark.model
def test_prepare_exports_and_checks_the_model_before_first_use(capsys, tmp_path):
    code, lines, err = run(capsys, "--prepare")
    assert code == 0 and err == []
    embedding = by_role(lines)["embedding"]
    folder = export_folder(tmp_path)
    assert (folder / "model.onnx").is_file()
    assert json.loads((folder / "check.json").read_text())["min_cosine"] >= 0.9999
    assert embedding["runtime"].startswith(f"onnxruntime {version('onnxruntime')} (cpu), "
                                           f"exported from {embedding['location']} to {folder}")
    assert "check: min cosine 0.99999" in embedding["runtime"]
    # a second run finds the export and does not make it again
    made = (folder / "model.onnx").stat().st_mtime_ns
    assert run(capsys, "--prepare")[0] == 0
    assert (folder / "model.onnx").stat().st_mtime_ns == made


def record_a_check(tmp_path: Path, min_cosine: float) -> None:
    """check.json as an export that reached `min_cosine` leaves it."""
    folder = export_folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / "check.json").write_text(json.dumps(
        {"format": EXPORT_FORMAT, "min_cosine": min_cosine, "texts": 64, "optimized": False}))


def test_a_failed_check_is_reported_with_its_figure(capsys, monkeypatch, tmp_path):
    record_a_check(tmp_path, 0.9871)
    embedding = by_role(run(capsys)[1])["embedding"]
    assert embedding["runtime"].startswith("sentence-transformers ")
    assert embedding["runtime_note"] == (
        "torch runs the model, not ONNX Runtime: its ONNX export's vectors differ from torch's "
        "(min cosine 0.9871000 on 64 texts, below 0.9999).")

    monkeypatch.setenv("EVIDENCE_EMBEDDING_RUNTIME", "onnx")
    embedding = by_role(run(capsys)[1])["embedding"]
    assert embedding["runtime"] == "none"
    assert embedding["runtime_note"].startswith(
        "EVIDENCE_EMBEDDING_RUNTIME=onnx, but the model cannot run on ONNX Runtime: its ONNX "
        "export's vectors differ from torch's (min cosine 0.9871000 on 64 texts, below 0.9999)"
        "; nothing can be embedded until")


def test_a_passed_check_is_reported_with_its_figure(capsys, tmp_path):
    record_a_check(tmp_path, 0.99999988)
    embedding = by_role(run(capsys)[1])["embedding"]
    assert embedding["runtime"] == (
        f"onnxruntime {version('onnxruntime')} (cpu), exported from {embedding['location']} "
        f"to {export_folder(tmp_path) / 'model.onnx'}, check: min cosine 0.9999999 on 64 "
        "texts")
    assert "runtime_note" not in embedding


def test_a_flashrank_model_on_disk_is_present(capsys, network, tmp_path):
    build_tiny_cross_encoder(tmp_path / "flashrank-cache")
    reranker = by_role(run(capsys)[1])["reranker"]
    assert reranker["present"] is True
    assert "note" not in reranker


def test_the_cross_encoder_reranker_is_reported_when_selected(capsys, network, tmp_path,
                                                             monkeypatch):
    folder = build_tiny_bert_cross_encoder(tmp_path / "tiny-ce")
    monkeypatch.setenv("EVIDENCE_RERANKER", "cross-encoder")
    monkeypatch.setenv("EVIDENCE_CROSS_ENCODER_MODEL", str(folder))
    reranker = by_role(run(capsys)[1])["reranker"]
    assert reranker == {
        "model": "reranker", "name": f"cross-encoder:{folder}", "location": str(folder),
        "present": True, "runtime": reranker["runtime"]}
    assert "CrossEncoder on torch" in reranker["runtime"]
    assert network.attempts == []


def test_a_cross_encoder_name_not_in_the_cache_is_missing(capsys, network, tmp_path,
                                                         monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("EVIDENCE_RERANKER", "cross-encoder")
    reranker = by_role(run(capsys)[1])["reranker"]
    assert reranker["name"] == "cross-encoder:cross-encoder/ms-marco-MiniLM-L-6-v2"
    assert reranker["present"] is False
    assert reranker["location"] == str(
        tmp_path / "hub" / "models--cross-encoder--ms-marco-MiniLM-L-6-v2")
    assert reranker["note"].endswith("or set EVIDENCE_CROSS_ENCODER_MODEL to a copied model "
                                     "folder.")
    assert network.attempts == []


def test_a_missing_embedding_model_is_reported_not_loaded(capsys, network, monkeypatch,
                                                          tmp_path):
    monkeypatch.setenv("EVIDENCE_EMBEDDING_MODEL", str(tmp_path / "no-such-model"))
    embedding = by_role(run(capsys)[1])["embedding"]
    assert embedding["present"] is False
    assert embedding["note"].startswith("nothing can be ingested or retrieved without it; ")
    assert network.attempts == []


def test_the_help_describes_the_download_option(capsys):
    assert main(["models", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--download" in out and "EVIDENCE_ALLOW_MODEL_DOWNLOADS" in out
    assert "EVIDENCE_MODEL_DOWNLOAD_TIMEOUT_S" in out


# --download ---------------------------------------------------------------------------------------

def test_download_with_downloads_off_is_refused_and_fetches_nothing(capsys, network, tmp_path,
                                                                    flashrank_downloads):
    code, lines, err = run(capsys, "--download")
    assert code == 2
    assert lines == []
    assert err == [f"evidence: error: Model downloads are off; run with "
                   f"EVIDENCE_ALLOW_MODEL_DOWNLOADS=1 to let --download fetch '{FLASHRANK}'."]
    assert flashrank_downloads == [] and network.attempts == []
    assert not (tmp_path / "flashrank-cache" / DEFAULT_MODEL_NAME).exists()


def test_download_with_nothing_missing_does_nothing(capsys, network, tmp_path,
                                                    flashrank_downloads):
    build_tiny_cross_encoder(tmp_path / "flashrank-cache")
    code, lines, err = run(capsys, "--download")
    assert code == 0 and err == []
    assert [(line["present"], line["downloaded"]) for line in lines] == [(True, False)] * 2
    assert flashrank_downloads == [] and network.attempts == []


def test_download_offline_says_so_in_one_sentence_and_exits_1(capsys, network, monkeypatch,
                                                             tmp_path, flashrank_downloads):
    monkeypatch.setenv("EVIDENCE_ALLOW_MODEL_DOWNLOADS", "1")
    monkeypatch.setenv("EVIDENCE_MODEL_DOWNLOAD_TIMEOUT_S", "4.5")

    code, lines, err = run(capsys, "--download")

    assert code == 1
    location = tmp_path / "flashrank-cache" / DEFAULT_MODEL_NAME
    assert err == [
        f"evidence: error: The reranker model '{FLASHRANK}' could not be downloaded: this "
        "machine cannot reach huggingface.co ([Errno -2] Name or service not known); on a "
        "connected machine run EVIDENCE_ALLOW_MODEL_DOWNLOADS=1 evidence models --download, "
        f"or copy the model folder to {location}."]
    reranker = by_role(lines)["reranker"]
    assert (reranker["present"], reranker["downloaded"]) == (False, False)
    # one look at the host, bounded by the download timeout; no download was started
    assert network.attempts == [("create_connection", ("huggingface.co", 443), 4.5)]
    assert flashrank_downloads == []


def test_download_fetches_a_missing_reranker_with_the_timeout(capsys, network, monkeypatch,
                                                             tmp_path, flashrank_downloads):
    monkeypatch.setenv("EVIDENCE_ALLOW_MODEL_DOWNLOADS", "1")
    monkeypatch.setenv("EVIDENCE_MODEL_DOWNLOAD_TIMEOUT_S", "4.5")
    network.online = True

    code, lines, err = run(capsys, "--download")

    assert code == 0, err
    reranker = by_role(lines)["reranker"]
    assert (reranker["present"], reranker["downloaded"]) == (True, True)
    assert "note" not in reranker
    assert by_role(lines)["embedding"]["downloaded"] is False  # it was already here
    [call] = flashrank_downloads
    assert call["model"] == DEFAULT_MODEL_NAME
    # while FlashRank downloaded, every requests.get it made carried the timeout
    assert isinstance(call["requests"], _RequestsWithTimeout)
    assert call["requests"]._timeout_s == 4.5
    # and afterwards the model is simply on disk: the next report needs no network
    network.attempts.clear()
    code, lines, _ = run(capsys)
    assert by_role(lines)["reranker"]["present"] is True and network.attempts == []


def test_behind_a_proxy_the_download_itself_decides(capsys, network, monkeypatch,
                                                   flashrank_downloads):
    monkeypatch.setenv("EVIDENCE_ALLOW_MODEL_DOWNLOADS", "1")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    code, lines, _ = run(capsys, "--download")
    assert code == 0
    assert network.attempts == []  # no direct look at the host
    assert len(flashrank_downloads) == 1


def test_a_download_that_fails_for_another_reason_names_it(capsys, network, monkeypatch):
    monkeypatch.setenv("EVIDENCE_ALLOW_MODEL_DOWNLOADS", "1")
    monkeypatch.setenv("EVIDENCE_RERANKER_MODEL", "no-such-flashrank-model")
    network.online = True
    code, _, err = run(capsys, "--download")
    assert code == 1
    [sentence] = err
    assert "The reranker model 'flashrank:no-such-flashrank-model' could not be downloaded: " \
           "FlashRank does not know the model 'no-such-flashrank-model'" in sentence
    assert sentence.endswith(".")


# The installed command ----------------------------------------------------------------------

def test_the_installed_command_reports_offline_and_exits_0(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVIDENCE_", "HF_"))}
    env.update(EVIDENCE_RERANKER_CACHE_DIR=str(tmp_path / "cache"), EVIDENCE_STORE=str(tmp_path))
    result = subprocess.run([str(Path(sys.executable).with_name("evidence")), "models"],
                            capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["model"], line["present"]) for line in lines] == [
        ("embedding", True), ("reranker", False)]
    assert result.stderr == ""
