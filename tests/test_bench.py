"""`evidence bench`: the generated corpus is what it claims (reproducible, N chunks, answers
planted where the ground truth says), and the command measures every strategy in one run."""

from __future__ import annotations

import io
import json
import statistics

import pytest

from core.bench.corpus import MAX_QUERIES, generate_corpus
from core.bench.results import crowding_curve, load_results, parse_result
from core.bench.run import BenchResult, format_table
from core.cli import main
from core.config import Settings
from core.hashing import criterion_hash
from core.ingest.documents import DocumentFile, prepare_document
from core.outputs.quality import percentile
from core.retrieval.strategies import STRATEGIES
from core.workbench import Workbench
from tests.fakes import FakeEmbedder, FakeReranker


def test_the_same_seed_gives_the_same_corpus_and_another_seed_another():
    first, again = generate_corpus(600, 12), generate_corpus(600, 12)
    other = generate_corpus(600, 12, seed=7)

    assert first.texts() == again.texts()
    assert first.payloads == again.payloads
    assert [q.criterion for q in first.queries] == [q.criterion for q in again.queries]
    assert first.texts() != other.texts()


def test_every_size_asks_the_same_criteria_with_the_same_planted_answers():
    small, large = generate_corpus(300, 20), generate_corpus(3000, 20)

    assert [q.criterion for q in small.queries] == [q.criterion for q in large.queries]
    assert [q.planted for q in small.queries] == [q.planted for q in large.queries]
    assert small.payloads == large.payloads
    assert small.distractor_criteria == large.distractor_criteria
    assert small.criteria_digest() == large.criteria_digest()
    assert generate_corpus(300, 21).criteria_digest() != small.criteria_digest()
    # Only the policy text around the answers grows.
    assert (small.chunks, large.chunks) == (300, 3000)
    responses = small.followup_responses
    assert small.texts()[-responses:] == large.texts()[-responses:]


@pytest.mark.parametrize("chunks", [100, 1000, 2500])
def test_the_chunker_makes_exactly_the_chunks_asked_for(tmp_path, chunks):
    corpus = generate_corpus(chunks, 5)
    folders = corpus.write_documents(tmp_path)
    stored = []
    for folder in folders.values():
        for path in sorted(folder.iterdir()):
            doc = prepare_document(DocumentFile(path, path.name), 1000, 150)
            stored.extend(chunk.text for chunk in doc.chunks)

    assert corpus.chunks == chunks
    assert len(stored) == chunks
    assert sorted(stored) == sorted(p for d in corpus.documents for p in d.paragraphs)
    assert {d.doc_type for d in corpus.documents} == {"tc_files", "followup_document"}


def test_answers_are_planted_terse_and_reworded_for_every_query():
    corpus = generate_corpus(1000, 40)
    responses = [(p["round_number"], r) for p in corpus.payloads for r in p["responses"]]
    for query in corpus.queries:
        linked = [(n, r) for n, r in responses
                  if r.get("criterion_question_text") and
                  criterion_hash(r["criterion_question_text"]) == criterion_hash(query.criterion)]
        assert sorted(n for n, _ in linked) == sorted(p.round_number for p in query.planted)
        assert 1 <= len(query.planted) <= 5
    planted = [p for q in corpus.queries for p in q.planted]
    assert sum(p.reworded for p in planted) / len(planted) > 0.6
    assert all(p.question != q.criterion for q in corpus.queries for p in q.planted
               if p.reworded)
    assert statistics.median(len(p.answer) for p in planted) < 30
    # Noise besides the planted answers: ad-hoc questions and other criteria's answers.
    assert any("criterion_question_text" not in r for _, r in responses)
    assert corpus.followup_responses > len(planted)


def test_expected_ids_are_the_latest_rounds_up_to_the_cap():
    corpus = generate_corpus(300, 60)
    deep = next(q for q in corpus.queries if len(q.planted) >= 4)
    rounds = sorted(p.round_number for p in deep.planted)
    by_id = {p.record_id: p.round_number for p in deep.planted}

    assert sorted(by_id[i] for i in deep.expected_ids(3)) == rounds[-3:]


def test_planted_ids_are_the_ids_the_ingest_stores(tmp_path):
    corpus = generate_corpus(120, 6)
    bench = Workbench(Settings(store=tmp_path / "store"), embedder=FakeEmbedder(),
                      reranker=FakeReranker())
    for payload in corpus.payloads:
        bench.ingest_questionnaire(payload)
    for query in corpus.queries:
        stored = {h.id for h in bench.linked_followups(corpus.vendor_id, query.criterion)}
        assert stored == {p.record_id for p in query.planted}


def test_percentile_interpolates_between_ranks():
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) == 0.0


@pytest.mark.parametrize(("args", "message"), [
    (["--chunks", "5"], "--chunks must be between 100 and 1,000,000, not 5."),
    (["--queries", "0"], f"--queries must be between 1 and {MAX_QUERIES}"),
    (["--queries", "100000"], f"--queries must be between 1 and {MAX_QUERIES}"),
    (["--format", "xml"], "'xml' is not one of"),
])
def test_bad_arguments_are_refused_in_one_sentence(capsys, args, message):
    assert main(["bench", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def _result(chunks: int, linked: dict[str, float], date: str = "2026-11-21T10:00:00+00:00",
            digest: str | None = "c0ffee") -> BenchResult:
    strategies = list(linked)
    return BenchResult(
        chunks=chunks, queries=50, followup_responses=160, seed=1, criteria_digest=digest,
        embedding_model="all-MiniLM-L6-v2", reranker={"name": "none", "ran": False, "reason": ""},
        encode_per_s=40.0, encode_texts=chunks, ingest_per_s=36.0, ingest_texts=chunks,
        ingest_vs_encode=0.9, floor_ms_p50=25.0, floor_ms_p95=30.0,
        retrieve_ms_p50=dict.fromkeys(strategies, 30.0),
        retrieve_ms_p95=dict.fromkeys(strategies, 40.0),
        ratio_to_floor=dict.fromkeys(strategies, 1.2),
        stage_ms_p50={s: {"embed_query": 12.0} for s in strategies},
        stage_ms_p95={s: {"embed_query": 15.0} for s in strategies},
        linked_in_context=linked, linked_reached={s: int(v * 100) for s, v in linked.items()},
        linked_expected=100, peak_rss_mb=900.0, ingest_peak_rss_mb=1100.0, store_mb=50.0,
        phase_s={}, machine={"cpus": 2}, date=date,
    )


def test_the_crowding_curve_takes_the_latest_run_of_each_size(tmp_path):
    runs = [_result(1000, {"precedence": 1.0, "semantic": 0.4}),
            _result(10_000, {"precedence": 1.0, "semantic": 0.2}, "2026-11-20T10:00:00+00:00"),
            _result(10_000, {"precedence": 1.0, "semantic": 0.1}),
            _result(100_000, {"precedence": 1.0, "semantic": 0.05})]
    for i, run in enumerate(runs):
        (tmp_path / f"bench-{i}.json").write_text(run.model_dump_json(), encoding="utf-8")
    (tmp_path / "bench-broken.json").write_text("{not json", encoding="utf-8")

    loaded = load_results(tmp_path)
    curve = crowding_curve(loaded.results)

    assert loaded.problems == ["bench-broken.json is not JSON."]
    assert curve["sizes"] == [1000, 10_000, 100_000]
    assert curve["linked_in_context"] == {"precedence": [1.0, 1.0, 1.0],
                                          "semantic": [0.4, 0.1, 0.05]}
    assert curve["same_criteria"] is True


def test_the_crowding_curve_says_when_the_sizes_asked_different_criteria():
    same = [_result(1000, {"precedence": 1.0}), _result(10_000, {"precedence": 1.0})]
    other = [same[0], _result(10_000, {"precedence": 1.0}, digest="d15ea5e")]
    unrecorded = [same[0], _result(10_000, {"precedence": 1.0}, digest=None)]

    assert crowding_curve(same)["same_criteria"] is True
    assert crowding_curve(other)["same_criteria"] is False
    assert crowding_curve(unrecorded)["same_criteria"] is False


def test_a_file_that_is_not_a_bench_result_is_named_in_one_sentence():
    with pytest.raises(ValueError, match=r"^x.json is not an `evidence bench --format json` "
                                         r"result: chunks: Field required\.$"):
        parse_result(json.dumps({"queries": 3}), "x.json")


def test_a_result_recorded_before_the_runtime_was_measured_still_loads():
    recorded = _result(10_000, {"precedence": 1.0}).model_dump(mode="json")
    for key in ("encode_per_s_torch", "encode_per_s_runtime", "runtime", "criteria_digest"):
        del recorded[key]

    result = parse_result(json.dumps(recorded), "bench-10000.json")

    assert (result.runtime, result.encode_per_s_runtime) == (None, None)
    assert "encode (torch)      40.0 texts/s" in format_table(result)


def test_the_table_shows_the_runtime_and_the_ask_turns():
    result = _result(10_000, {"precedence": 1.0, "ask": 1.0}).model_copy(update={
        "runtime": "onnx", "encode_per_s_torch": 40.0, "encode_per_s_runtime": 71.5,
        "ingest_per_s": 68.0, "ingest_vs_encode": 1.7})
    result.retrieve_ms_p50["ask_continuation"] = 61.0
    result.retrieve_ms_p95["ask_continuation"] = 75.0
    result.ratio_to_floor["ask_continuation"] = 2.44

    lines = format_table(result).splitlines()

    assert any(line.startswith("  encode (torch)      40.0 texts/s") for line in lines)
    assert any(line.startswith("  encode (onnx)       71.5 texts/s") for line in lines)
    assert any("1.70x the torch encode" in line for line in lines)
    [ask] = [line for line in lines if line.startswith("  ask ")]
    assert ask.split()[1:] == ["30.0", "40.0", "1.20", "100/100", "(100%)"]
    [continuation] = [line for line in lines if line.startswith("  ask_continuation ")]
    assert continuation.split()[1:] == ["61.0", "75.0", "2.44", "-"]


@pytest.mark.model
def test_evidence_bench_measures_every_strategy_in_one_run(capsys):
    assert main(["bench", "--chunks", "300", "--queries", "8", "--format", "json"]) == 0
    captured = capsys.readouterr()
    [line] = captured.out.strip().splitlines()
    result = BenchResult.model_validate_json(line)

    measured = [*STRATEGIES, "ask", "ask_continuation"]
    assert (result.chunks, result.queries) == (300, 8)
    assert set(result.retrieve_ms_p50) == set(result.ratio_to_floor) == set(measured)
    # A continuation asks no criterion: it has no linked follow-ups to count.
    assert set(result.linked_in_context) == {*STRATEGIES, "ask"}
    for path in ("precedence", "hybrid", "ask"):
        assert result.linked_in_context[path] == 1.0
        assert result.linked_reached[path] == result.linked_expected >= 8
    assert result.encode_per_s > 0 and result.ingest_per_s > 0
    assert result.encode_per_s_torch == result.encode_per_s
    assert result.runtime and result.encode_per_s_runtime > 0
    assert result.encode_texts == result.ingest_texts == 300 + result.followup_responses
    assert result.floor_ms_p50 > 0
    assert all(result.retrieve_ms_p95[s] >= result.retrieve_ms_p50[s] > 0 for s in measured)
    assert "embed_query" in result.stage_ms_p50["precedence"]
    assert {"embed_question", "first_stage", "save"} <= set(result.stage_ms_p50["ask"])
    assert result.stage_ms_p50["ask_continuation"]["history"] > 0
    # Ingest and retrieval each ran in a fresh process of its own.
    assert 0 < result.peak_rss_mb != result.ingest_peak_rss_mb > 0
    assert {"generate", "encode", "ingest", "retrieve"} <= set(result.phase_s)
    assert result.reranker["ran"] is False  # no FlashRank model on this machine

    table = format_table(result)
    for name in measured:
        assert name in table
    assert "x floor" in table and "300 chunks" in table


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_draws_each_stage_on_a_terminal_only(monkeypatch):
    from core.cli.base import _progress_bar

    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with _progress_bar(width=10) as show:
        show("encoding (raw)", 5, 10)
        show("ingesting", 10, 10)
    lines = terminal.getvalue().split("\n")
    assert "encoding (raw)  [#####-----] 5/10" in lines[0]
    assert "ingesting       [##########] 10/10" in lines[1]

    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    with _progress_bar() as show:
        show("ingesting", 3, 10)
    assert piped.getvalue() == ""
