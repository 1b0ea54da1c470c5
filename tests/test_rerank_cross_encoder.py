"""core.encoders.rerank's CrossEncoder reranker, run for real (sentence-transformers on
torch) on a tiny BERT cross-encoder the tests build and save in a temporary folder; nothing
downloads."""

from __future__ import annotations

import math
import shutil
import socket
from pathlib import Path

import pytest

from core.config import Settings
from core.encoders.rerank import (
    CrossEncoderReranker,
    FlashRankReranker,
    cached_hub_model,
    configured_reranker,
    load_reranker,
)
from core.errors import ModelUnavailableError
from core.workbench import Workbench
from tests.fakes import FakeEmbedder
from tests.support.tiny_bert_cross_encoder import (
    build_tiny_bert_cross_encoder,
    reference_logits,
)

QUERY = "Does the vendor encrypt customer data at rest using AES-256?"
PASSAGES = [
    "The cat sat on the mat.",
    "All customer data is encrypted at rest with AES.",
    "Backups are tested quarterly.",
    "incident response plan",
    "mfa for staff",
]


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


@pytest.fixture(scope="module")
def raw_logit_model(tmp_path_factory) -> Path:
    """One output; configured to return raw logits, as the ms-marco cross-encoders are."""
    return build_tiny_bert_cross_encoder(tmp_path_factory.mktemp("ce") / "tiny-raw")


@pytest.fixture
def no_network(monkeypatch) -> list[str]:
    """Record (and refuse) every attempt to resolve a name or open a connection."""
    attempts: list[str] = []

    def refuse(what):
        def refused(*args, **kwargs):
            attempts.append(what)
            raise OSError(f"network use attempted: {what}")
        return refused

    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    return attempts


# Scores ------------------------------------------------------------------------------------------

def test_raw_logits_are_mapped_to_relevance_by_a_sigmoid(raw_logit_model, no_network):
    reranker = CrossEncoderReranker(str(raw_logit_model))
    scores = reranker.score(QUERY, PASSAGES)

    expected = [sigmoid(row[0]) for row in reference_logits(raw_logit_model, QUERY, PASSAGES)]
    assert scores == pytest.approx(expected, abs=1e-5)
    assert all(type(s) is float and 0.0 <= s <= 1.0 for s in scores)
    # the model's own outputs are not relevance: some fall outside 0..1
    raw = reranker.logits(QUERY, PASSAGES)
    assert any(x < 0.0 or x > 1.0 for x in raw)
    assert len(set(scores)) == len(scores)  # a real model: every passage scored on its own
    assert "raw logits" in reranker.score_note and "sigmoid" in reranker.score_note
    assert no_network == []


def test_a_model_set_up_with_a_sigmoid_gives_the_same_relevance(tmp_path, raw_logit_model):
    sigmoid_model = build_tiny_bert_cross_encoder(tmp_path / "tiny-sigmoid", activation=None)
    raw = CrossEncoderReranker(str(raw_logit_model))
    configured = CrossEncoderReranker(str(sigmoid_model))
    assert configured.score(QUERY, PASSAGES) == pytest.approx(raw.score(QUERY, PASSAGES),
                                                              abs=1e-6)
    assert configured.score_note == "relevance is the sigmoid of its logit, as the model is set up"


def test_a_two_class_model_scores_by_the_probability_of_its_second_class(tmp_path):
    folder = build_tiny_bert_cross_encoder(tmp_path / "tiny-two", labels=2, activation=None)
    scores = CrossEncoderReranker(str(folder)).score(QUERY, PASSAGES)
    expected = [math.exp(b) / (math.exp(a) + math.exp(b))
                for a, b in reference_logits(folder, QUERY, PASSAGES)]
    assert scores == pytest.approx(expected, abs=1e-5)


def test_a_model_with_more_outputs_is_refused(tmp_path):
    folder = build_tiny_bert_cross_encoder(tmp_path / "tiny-three", labels=3, activation=None)
    with pytest.raises(ModelUnavailableError, match="has 3 outputs"):
        CrossEncoderReranker(str(folder)).warm_up()


def test_scores_keep_the_passages_order_and_the_callers_list(raw_logit_model):
    reranker = CrossEncoderReranker(str(raw_logit_model))
    passages = list(PASSAGES)
    forward = reranker.score(QUERY, passages)
    backward = reranker.score(QUERY, passages[::-1])
    assert backward == pytest.approx(forward[::-1], abs=1e-6)
    assert passages == PASSAGES


def test_empty_passage_list_gives_empty_scores(raw_logit_model):
    assert CrossEncoderReranker(str(raw_logit_model)).score(QUERY, []) == []


def test_a_passage_longer_than_the_model_reads_is_truncated(raw_logit_model):
    reranker = CrossEncoderReranker(str(raw_logit_model), max_length=64)
    [score] = reranker.score(QUERY, ["vendor data " * 400])
    assert 0.0 <= score <= 1.0
    assert reranker._model.max_seq_length == 64


# Loading, presence, and the fallback ------------------------------------------------------------

def test_load_reranker_selects_the_cross_encoder(raw_logit_model, no_network):
    settings = Settings(reranker="cross-encoder", cross_encoder_model=str(raw_logit_model))
    reranker, status = load_reranker(settings)
    assert isinstance(reranker, CrossEncoderReranker)
    assert status.ran is True
    assert status.name == f"cross-encoder:{raw_logit_model}"
    assert status.reason == (f"CrossEncoder model loaded from {raw_logit_model}; the model "
                             "returns raw logits (its activation is Identity), mapped to 0..1 "
                             "with a sigmoid")
    assert no_network == []


def test_flashrank_stays_the_default(tmp_path):
    assert isinstance(configured_reranker(Settings(reranker_cache_dir=tmp_path)),
                      FlashRankReranker)


def test_a_missing_folder_falls_back_and_says_why(tmp_path, no_network):
    settings = Settings(reranker="cross-encoder", cross_encoder_model=str(tmp_path / "nothing"))
    reranker, status = load_reranker(settings)
    assert reranker is None
    assert status.ran is False
    assert status.name == "none"
    assert str(tmp_path / "nothing") in status.reason
    assert "EVIDENCE_ALLOW_MODEL_DOWNLOADS=1" in status.reason
    assert status.reason.endswith("evidence kept in first-stage order")
    assert no_network == []


def test_the_default_hub_model_is_not_fetched_while_downloads_are_off(no_network, monkeypatch,
                                                                      tmp_path):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    settings = Settings(reranker="cross-encoder")
    reranker = configured_reranker(settings)
    assert reranker.is_present() is False
    assert reranker.location == str(
        tmp_path / "hub" / "models--cross-encoder--ms-marco-MiniLM-L-6-v2")
    loaded, status = load_reranker(settings)
    assert loaded is None and status.ran is False
    assert "cross-encoder/ms-marco-MiniLM-L-6-v2" in status.reason
    assert no_network == []


def test_a_hub_name_already_in_the_hugging_face_cache_loads_offline(raw_logit_model, tmp_path,
                                                                    monkeypatch, no_network):
    hub = tmp_path / "hub"
    repo = hub / "models--tiny-org--tiny-cross-encoder"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(raw_logit_model, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub))

    assert cached_hub_model("tiny-org/tiny-cross-encoder") == repo / "snapshots" / commit
    settings = Settings(reranker="cross-encoder", cross_encoder_model="tiny-org/tiny-cross-encoder")
    reranker, status = load_reranker(settings)
    assert status.ran is True, status.reason
    assert reranker.is_present() is True
    assert reranker.location == str(repo / "snapshots" / commit)
    assert reranker.score(QUERY, PASSAGES) == pytest.approx(
        CrossEncoderReranker(str(raw_logit_model)).score(QUERY, PASSAGES), abs=1e-6)
    assert no_network == []


def test_presence_is_read_from_disk_without_loading(raw_logit_model, tmp_path):
    present = CrossEncoderReranker(str(raw_logit_model))
    assert present.is_present() is True
    assert present.location == str(raw_logit_model)
    assert present._model is None
    assert CrossEncoderReranker(str(tmp_path / "missing")).is_present() is False
    assert "CrossEncoder on torch" in present.runtime


# Through the Workbench ----------------------------------------------------------------------------

def test_the_workbench_reranks_with_the_cross_encoder(raw_logit_model, tmp_path):
    settings = Settings(store=tmp_path / "store", reranker="cross-encoder",
                        cross_encoder_model=str(raw_logit_model))
    bench = Workbench(settings, embedder=FakeEmbedder())
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, text in enumerate(PASSAGES):
        (docs / f"doc_{i}.txt").write_text(f"vendor {text}\n", encoding="utf-8")
    bench.ingest_documents("acme", [docs])

    trace = bench.retrieve("acme", QUERY, "semantic")

    assert trace.reranker.ran is True
    assert trace.reranker.name == f"cross-encoder:{raw_logit_model}"
    scores = [c.rerank_score for c in trace.evidence]
    assert scores == sorted(scores, reverse=True)
    expected = CrossEncoderReranker(str(raw_logit_model)).score(
        QUERY, [c.text for c in trace.evidence])
    assert scores == pytest.approx(expected, abs=1e-6)
