"""The relevance gate as CI runs it: `evidence eval --baseline ... --fail-below` on the sample
data's judged set and on the generated bench corpus, with the real embedding model. It passes
on the project as it is and fails on a deliberately worse setting."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from tests.support.cli import run_main

REPO = Path(__file__).resolve().parents[1]
BASELINES = REPO / "benchmarks" / "relevance"


def _relevance_script():
    spec = importlib.util.spec_from_file_location("relevance_sets",
                                                  REPO / "benchmarks" / "relevance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench_set(tmp_path_factory, real_embedder):
    folder = tmp_path_factory.mktemp("relevance-bench")
    workbench, vendor, criteria, judgments = _relevance_script().bench_set(folder,
                                                                           real_embedder)
    return workbench.settings, vendor, criteria, judgments


@pytest.fixture
def sample_set(sample_store, tmp_path):
    store = tmp_path / "sample-store"
    shutil.copytree(sample_store, store)
    judged = REPO / "sample_data" / "judgments"
    return store, "acme", judged / "criteria.txt", judged / "acme.csv"


def gate(capfd, monkeypatch, real_embedder, store: Path, vendor: str, criteria: Path,
         judgments: Path, baseline: Path, *, lexical: Path | None = None):
    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: real_embedder)
    if lexical is not None:
        monkeypatch.setenv("EVIDENCE_LEXICAL_DIR", str(lexical))
    return run_main(capfd, "--store", str(store), "eval", "--vendor", vendor,
                    "--criteria-file", str(criteria), "--judgments", str(judgments),
                    "--baseline", str(baseline), "--fail-below", clear=True)


@pytest.mark.model
def test_the_gate_passes_on_the_sample_judged_set_and_fails_a_worse_setting(
        sample_set, capfd, monkeypatch, real_embedder):
    baseline = BASELINES / "sample-baseline.jsonl"
    code, out, err = gate(capfd, monkeypatch, real_embedder, *sample_set, baseline)
    assert code == 0, err
    assert len(out.splitlines()) == 6  # one line per strategy
    # Two excerpts in the context instead of six: ranking quality falls, and the gate says so.
    monkeypatch.setenv("EVIDENCE_TOP_RERANKED_N", "2")
    code, out, err = gate(capfd, monkeypatch, real_embedder, *sample_set, baseline)
    assert code == 1
    assert err.startswith("evidence: error: below the baseline") and "ndcg@6" in err


@pytest.mark.model
def test_the_gate_passes_on_the_bench_corpus_and_fails_a_worse_setting(
        bench_set, capfd, monkeypatch, real_embedder):
    settings, vendor, criteria, judgments = bench_set
    baseline = BASELINES / "bench-baseline.jsonl"
    code, out, err = gate(capfd, monkeypatch, real_embedder, settings.store, vendor, criteria,
                          judgments, baseline, lexical=settings.lexical_dir)
    assert code == 0, err
    # One round of follow-ups instead of three: the planted earlier answers leave the context.
    monkeypatch.setenv("EVIDENCE_MAX_FOLLOWUP_ROUNDS", "1")
    code, out, err = gate(capfd, monkeypatch, real_embedder, settings.store, vendor, criteria,
                          judgments, baseline, lexical=settings.lexical_dir)
    assert code == 1
    assert err.startswith("evidence: error: below the baseline") and "recall" in err
