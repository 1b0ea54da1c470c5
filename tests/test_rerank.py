"""core.encoders.rerank: the FlashRank adapter run for real on a tiny ONNX cross-encoder
built by the test, and the honest fallback when no model is on disk."""

from __future__ import annotations

import importlib
import logging
import math
from contextlib import contextmanager
from pathlib import Path

import pytest

from core.config import Settings
from core.encoders.rerank import FlashRankReranker, load_reranker
from core.errors import ModelUnavailableError
from core.workbench import Workbench
from tests.conftest import AES_CRITERION
from tests.fakes import FakeEmbedder
from tests.support import payloads
from tests.support.tiny_cross_encoder import (
    DEFAULT_MODEL_NAME,
    LOGIT_BIAS,
    LOGIT_SCALE,
    build_tiny_cross_encoder,
)

QUERY = "Does the vendor encrypt customer data at rest using AES-256?"


def tiny_score(shared_tokens: int) -> float:
    """What the tiny model returns for a passage sharing this many query tokens."""
    return 1.0 / (1.0 + math.exp(-(LOGIT_BIAS + LOGIT_SCALE * shared_tokens)))


@pytest.fixture
def model_cache(tmp_path) -> Path:
    cache = tmp_path / "flashrank-models"
    build_tiny_cross_encoder(cache)
    return cache


@pytest.fixture
def no_downloads(monkeypatch) -> list[str]:
    """Record (and refuse) every attempt FlashRank makes to fetch a model over the network."""
    ranker_module = importlib.import_module("flashrank.Ranker")

    attempts: list[str] = []

    def refuse_download(self, model_name):
        attempts.append(f"download {model_name}")
        raise RuntimeError("network access attempted")

    def refuse_get(url, *args, **kwargs):
        attempts.append(f"GET {url}")
        raise RuntimeError("network access attempted")

    monkeypatch.setattr(ranker_module.Ranker, "_download_model_files", refuse_download)
    monkeypatch.setattr(ranker_module.requests, "get", refuse_get)
    return attempts


@contextmanager
def bare_root_logger():
    """A root logger without handlers, so logging.basicConfig would change it if called.
    (Entered inside the test body: pytest adds its capture handlers for the call phase.)"""
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    root.handlers[:] = []
    root.setLevel(logging.ERROR)
    try:
        yield root
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)


# The adapter on the tiny model ----------------------------------------------------------------

def test_scores_are_python_floats_in_passage_order(model_cache, no_downloads):
    reranker = FlashRankReranker(DEFAULT_MODEL_NAME, model_cache)
    passages = [
        "The cat sat on the mat.",                                    # shares nothing
        "All customer data is encrypted at rest with AES.",          # customer data rest aes
        "Customer data at rest is kept.",                            # customer data rest
    ]
    scores = reranker.score(QUERY, passages)

    assert len(scores) == 3
    assert all(type(s) is float for s in scores)
    # FlashRank itself would return these sorted best-first; the adapter keeps input order.
    assert scores == pytest.approx([tiny_score(0), tiny_score(4), tiny_score(3)], abs=1e-6)
    assert no_downloads == []


def test_a_passage_sharing_more_query_words_scores_higher(model_cache):
    reranker = FlashRankReranker(DEFAULT_MODEL_NAME, model_cache)
    few, many = reranker.score(QUERY, [
        "The vendor publishes a report.",
        "The vendor will encrypt customer data at rest using AES-256 keys.",
    ])
    assert many > few


def test_empty_passage_list_gives_empty_scores(model_cache):
    assert FlashRankReranker(DEFAULT_MODEL_NAME, model_cache).score(QUERY, []) == []


def test_scoring_does_not_reorder_the_callers_list(model_cache):
    passages = ["nothing relevant here", "vendor encrypt customer data rest aes 256"]
    before = list(passages)
    FlashRankReranker(DEFAULT_MODEL_NAME, model_cache).score(QUERY, passages)
    assert passages == before


# Refusals: unknown name, missing model ---------------------------------------------------------

def test_unknown_model_name_is_refused(tmp_path, no_downloads):
    reranker = FlashRankReranker("no-such-cross-encoder", tmp_path)
    with pytest.raises(ModelUnavailableError, match="no-such-cross-encoder"):
        reranker.warm_up()
    with pytest.raises(ModelUnavailableError):
        reranker.score(QUERY, ["some passage"])
    assert no_downloads == []


def test_missing_model_with_downloads_off_is_refused_without_a_download(tmp_path, no_downloads):
    cache = tmp_path / "empty-cache"
    reranker = FlashRankReranker(DEFAULT_MODEL_NAME, cache, allow_downloads=False)
    with pytest.raises(ModelUnavailableError) as raised:
        reranker.warm_up()
    assert DEFAULT_MODEL_NAME in str(raised.value)
    assert "downloads are off" in str(raised.value)
    assert no_downloads == []
    assert not (cache / DEFAULT_MODEL_NAME).exists()


def test_missing_model_with_downloads_on_tries_flashrank_download(tmp_path, no_downloads):
    """Control for the test above: the patched download is the path FlashRank really takes,
    and a failed download surfaces as ModelUnavailableError, not as a crash."""
    reranker = FlashRankReranker(DEFAULT_MODEL_NAME, tmp_path / "cache", allow_downloads=True)
    with pytest.raises(ModelUnavailableError):
        reranker.warm_up()
    assert no_downloads == [f"download {DEFAULT_MODEL_NAME}"]


def test_model_folder_without_the_onnx_file_is_refused(tmp_path, no_downloads):
    model_dir = build_tiny_cross_encoder(tmp_path / "cache")
    next(model_dir.glob("*.onnx")).unlink()
    with pytest.raises(ModelUnavailableError):
        FlashRankReranker(DEFAULT_MODEL_NAME, tmp_path / "cache").warm_up()
    assert no_downloads == []


# Logging -----------------------------------------------------------------------------------------

def test_flashrank_alone_would_configure_the_root_logger(model_cache):
    """Control: FlashRank's Ranker() calls logging.basicConfig, so the next test can fail."""
    from flashrank import Ranker

    with bare_root_logger() as root:
        Ranker(model_name=DEFAULT_MODEL_NAME, cache_dir=str(model_cache), log_level="WARNING")
        changed = (list(root.handlers), root.level)
    assert changed != ([], logging.ERROR)


def test_loading_leaves_the_root_logger_alone(model_cache):
    with bare_root_logger() as root:
        reranker = FlashRankReranker(DEFAULT_MODEL_NAME, model_cache)
        reranker.warm_up()
        reranker.score(QUERY, ["vendor data"])
        after = (list(root.handlers), root.level)
    assert after == ([], logging.ERROR)


def test_load_reranker_leaves_the_root_logger_alone(model_cache):
    with bare_root_logger() as root:
        load_reranker(Settings(reranker_cache_dir=model_cache))
        after = (list(root.handlers), root.level)
    assert after == ([], logging.ERROR)


# load_reranker -----------------------------------------------------------------------------------

def test_load_reranker_with_the_model_on_disk(model_cache, no_downloads):
    reranker, status = load_reranker(Settings(reranker_cache_dir=model_cache))
    assert isinstance(reranker, FlashRankReranker)
    assert status.ran is True
    assert DEFAULT_MODEL_NAME in status.name
    assert reranker.score(QUERY, ["customer data"]) == pytest.approx([tiny_score(2)], abs=1e-6)
    assert no_downloads == []


def test_load_reranker_without_the_model_falls_back_and_says_why(tmp_path, no_downloads):
    reranker, status = load_reranker(Settings(reranker_cache_dir=tmp_path / "nothing-here"))
    assert reranker is None
    assert status.ran is False
    assert DEFAULT_MODEL_NAME in status.reason
    assert "downloads are off" in status.reason
    assert no_downloads == []


def test_load_reranker_with_an_unknown_model_name_falls_back(tmp_path):
    reranker, status = load_reranker(
        Settings(reranker_cache_dir=tmp_path, reranker_model="no-such-cross-encoder"))
    assert reranker is None
    assert status.ran is False
    assert "no-such-cross-encoder" in status.reason


# Through the Workbench ---------------------------------------------------------------------------

# First stage (the fake bag-of-words embedder) prefers A, which repeats two query words; the
# tiny cross-encoder prefers B, which holds all seven of the query's vocabulary words among many
# other words. C shares nothing. So reranking visibly changes the order: A, B, C -> B, A, C.
FILLER = " ".join(f"w{i}" for i in range(40))
DOCS = {
    "a_repetitive.txt": "encrypt encrypt encrypt encrypt encrypt encrypt "
                        "vendor vendor vendor vendor vendor vendor",
    "b_complete.txt": f"The vendor will encrypt customer data at rest using AES-256. {FILLER}",
    "c_unrelated.txt": "The cat sat on the mat with a dog.",
}


def build_store(bench: Workbench, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    bench.ingest_documents("acme", [folder])
    bench.ingest_questionnaire(payloads.round_payload(
        1, [payloads.response(AES_CRITERION, "Yes.", AES_CRITERION)],
        timestamp="2024-01-10T09:15:00Z"))


def sources(trace) -> list[str]:
    return [c.source for c in trace.evidence]


@pytest.fixture
def reranking_bench(tmp_path, model_cache) -> Workbench:
    bench = Workbench(Settings(store=tmp_path / "store", reranker_cache_dir=model_cache),
                      embedder=FakeEmbedder())
    build_store(bench, tmp_path / "docs")
    return bench


@pytest.fixture
def fallback_bench(tmp_path) -> Workbench:
    bench = Workbench(Settings(store=tmp_path / "store",
                               reranker_cache_dir=tmp_path / "no-models"),
                      embedder=FakeEmbedder())
    build_store(bench, tmp_path / "docs")
    return bench


def test_workbench_with_the_model_reranks(reranking_bench):
    trace = reranking_bench.retrieve("acme", QUERY, "semantic")
    assert trace.reranker.ran is True
    assert DEFAULT_MODEL_NAME in trace.reranker.name
    documents = [c for c in trace.evidence if c.type == "tc_files"]
    assert [c.source for c in documents] == ["b_complete.txt", "a_repetitive.txt",
                                             "c_unrelated.txt"]
    assert [c.rerank_score for c in documents] == pytest.approx(
        [tiny_score(7), tiny_score(2), tiny_score(0)], abs=1e-6)
    assert all(c.rerank_score is not None for c in trace.evidence)
    assert not any("no reranker" in note.lower() for note in trace.notes)


def test_first_stage_order_differs_from_reranked_order(reranking_bench):
    """The store is built so that reranking matters: first stage puts A before B."""
    trace = reranking_bench.retrieve("acme", QUERY, "semantic")
    first = [c.source for c in trace.first_stage if c.type == "tc_files"]
    assert first.index("a_repetitive.txt") < first.index("b_complete.txt")


@pytest.mark.parametrize("strategy", ["hash_extraction", "doc_boost", "tiered", "precedence"])
def test_every_strategy_uses_the_model(reranking_bench, strategy):
    trace = reranking_bench.retrieve("acme", QUERY, strategy)
    assert trace.reranker.ran is True
    assert trace.evidence
    assert all(c.rerank_score is not None for c in trace.evidence)
    assert [c for c in trace.evidence if c.type == "tc_files"][0].source == "b_complete.txt"


def test_workbench_without_the_model_keeps_first_stage_order(fallback_bench):
    trace = fallback_bench.retrieve("acme", QUERY, "semantic")
    assert trace.reranker.ran is False
    assert DEFAULT_MODEL_NAME in trace.reranker.reason
    assert any("reranker" in note.lower() for note in trace.notes)
    assert all(c.rerank_score is None for c in trace.evidence)
    assert all(c.rerank_score is None for c in trace.reranked)
    assert [c.id for c in trace.evidence] == [c.id for c in trace.first_stage][:len(trace.evidence)]
    documents = [c.source for c in trace.evidence if c.type == "tc_files"]
    assert documents == ["a_repetitive.txt", "b_complete.txt", "c_unrelated.txt"]
    scores = [c.first_stage_score for c in trace.evidence]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("strategy", ["hash_extraction", "doc_boost", "tiered", "precedence"])
def test_every_strategy_reports_the_fallback(fallback_bench, strategy):
    trace = fallback_bench.retrieve("acme", QUERY, strategy)
    assert trace.reranker.ran is False
    assert any("reranker" in note.lower() for note in trace.notes)
    assert all(c.rerank_score is None for c in trace.evidence)
    # no follow-up document here, so nothing is boosted: first-stage order throughout
    scores = [c.first_stage_score for c in trace.evidence]
    assert scores == sorted(scores, reverse=True)
