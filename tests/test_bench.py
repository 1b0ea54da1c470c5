"""`evidence bench`: the generated corpus is what it claims (reproducible, N chunks, answers
planted where the ground truth says), and the command measures every strategy in one run."""

from __future__ import annotations

import io
import json
import statistics
from collections import Counter, defaultdict
from datetime import date

import pytest

from core.bench.corpus import MAX_QUERIES, generate_corpus
from core.bench.results import crowding_curve, load_results, parse_result
from core.bench.run import BenchResult, _summarise, format_table, ingest_all, retrieve_all
from core.bench.vocabulary import DOMAIN_CONTROLS
from core.cli import main
from core.config import Settings
from core.controls.ids import parse_control_id
from core.hashing import criterion_hash
from core.ingest.documents import DocumentFile, prepare_document
from core.outputs.quality import ids_in_context, percentile
from core.retrieval.strategies import STRATEGIES
from core.timeline.reading import read_facts
from core.timeline.series import StoredDocument, timeline
from core.workbench import Workbench
from tests.fakes import FakeEmbedder, FakeReranker

SUPERSEDED = ["soc2_type2_report_2023.txt", "soc2_type2_report_2024.txt",
              "information_security_policy_v3.txt", "iso27001_certificate_2022.txt"]


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


def test_the_criteria_and_their_answers_are_those_the_recorded_runs_asked():
    corpus = generate_corpus(1000, 50)

    # benchmarks/README.md: the 50 criteria of every recorded size, 121 expected answers.
    assert corpus.criteria_digest() == "832bcbe80ac72570"
    assert sum(len(q.expected_ids(3)) for q in corpus.queries) == 121


@pytest.mark.parametrize("chunks", [100, 300, 3000])
def test_documents_in_versions_are_part_of_the_chunks_asked_for(chunks):
    corpus = generate_corpus(chunks, 5)
    series = Counter(d.series for d in corpus.documents if d.series)

    assert corpus.chunks == chunks
    assert series == {"soc2-type2-report": 3, "information-security-policy": 2,
                      "iso27001-certificate": 2}
    assert corpus.superseded_documents == SUPERSEDED


def test_what_each_document_states_of_itself_supersedes_exactly_the_older_versions():
    corpus = generate_corpus(3000, 5)
    stored = [StoredDocument(doc_key=d.name, source=d.name, type=d.doc_type,
                             received_at="2026-01-05T10:00:00+00:00",
                             facts=read_facts([d.text], source=d.name))
              for d in corpus.documents]

    versions = timeline(stored, today=date(2026, 1, 6))

    assert sorted(k for k, v in versions.items() if not v.current) == sorted(SUPERSEDED)
    # A series each for the report, the policy and the certificate; the vendor's other
    # documents state no date or version, so each is a series of its own.
    assert sorted(n for n in Counter(v.series for v in versions.values()).values()
                  if n > 1) == [2, 2, 3]
    by_name = {v.source: v for v in versions.values()}
    assert (by_name["soc2_type2_report_2024.txt"].date,
            by_name["information_security_policy_v3.txt"].version,
            by_name["iso27001_certificate_2022.txt"].valid_until) == (
        "2024-12-31", "3", "2025-03-13")
    assert by_name["soc2_type2_report_2023.txt"].later_version.source == (
        "soc2_type2_report_2025.txt")


def test_the_control_matrix_answers_by_800_53_ids_and_every_criterion_has_a_control():
    corpus = generate_corpus(300, 40)
    matrix = [(p["round_number"], r) for p in corpus.payloads for r in p["responses"]
              if "questionnaire_id" in r]

    assert len(matrix) == len(corpus.control_answers) > 0
    rounds: defaultdict[str, set[int]] = defaultdict(set)
    for round_number, response in matrix:
        # Linked to no criterion: only a criterion mapped to its control links it.
        assert "criterion_question_text" not in response
        ref = parse_control_id(response["questionnaire_id"])
        assert ref is not None and ref.key.startswith("sp800-53:")
        assert response["question_text"] == f"{ref.id} {ref.title}"
        rounds[ref.id].add(round_number)
    assert set().union(*rounds.values()) == {2, 4}
    assert any(len(found) == 2 for found in rounds.values())  # answered again in round 4
    table = {control for controls in DOMAIN_CONTROLS.values() for control in controls}
    assert all(len(q.controls) == 1 and q.controls[0] in table for q in corpus.queries)
    assert sum(q.controls[0] in rounds for q in corpus.queries) >= len(corpus.queries) // 2


@pytest.fixture(scope="module")
def bench_store(tmp_path_factory, controls_cache):
    """A bench store of 300 chunks and 12 criteria, ingested as `evidence bench`'s ingesting
    process does (the criteria's controls kept after), with the words embedder."""
    corpus = generate_corpus(300, 12)
    root = tmp_path_factory.mktemp("bench-store")
    settings = Settings(store=root / "store", lexical_dir=root / "lexical",
                        reranker_cache_dir=root / "no-models", controls_cache_dir=controls_cache,
                        chroma_host=None, llm_base_url=None, llm_model=None)
    folders = corpus.write_documents(root / "corpus")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("core.bench.run.runtime_embedder", lambda _settings: FakeEmbedder())
        ingest_all(settings.model_dump(mode="json"), corpus.vendor_id,
                   [(doc_type, number, str(folder)) for (doc_type, number), folder
                    in folders.items()],
                   corpus.payloads, len(corpus.texts()), [],
                   (corpus.chunks, corpus.followup_responses), lambda *_: None,
                   corpus.criteria_controls())
    return corpus, settings


def test_the_bench_retrieves_with_versions_and_control_links_in_the_store(bench_store,
                                                                          monkeypatch):
    corpus, settings = bench_store
    monkeypatch.setattr("core.bench.run.runtime_embedder", lambda _settings: FakeEmbedder())

    measured = retrieve_all(settings.model_dump(mode="json"), corpus.vendor_id,
                            [(q.criterion, q.expected_ids(settings.max_followup_rounds))
                             for q in corpus.queries], list(STRATEGIES), lambda *_: None)
    result = _summarise(corpus, 1, len(corpus.texts()), 1.0,
                        {"ingest_s": 1.0, "encode_s": None, "runtime": "torch",
                         "embedding_model": "fake-bag-of-words", "peak_rss_mb": 1.0},
                        measured, 1.0, {})

    assert (result.superseded_documents, result.versioned_series, result.control_keyed_answers,
            result.mapped_criteria) == (4, 3, len(corpus.control_answers), 12)
    for path in ("precedence", "hybrid", "ask"):
        assert result.linked_in_context[path] == 1.0  # the ground truth is whole
        assert result.control_linked_contexts[path] > 0
        assert {"control_fetch", "later_versions"} <= set(result.stage_ms_p50[path])
    # The seeds' designs have no control tier.
    assert all(result.control_linked_contexts[s] == 0
               for s in ("semantic", "hash_extraction", "doc_boost", "tiered"))
    # Every excerpt of a superseded version is labelled so, whichever design found it.
    assert result.superseded_marked == result.superseded_excerpts
    assert all(result.superseded_with_current[s] <= result.superseded_excerpts[s]
               for s in result.superseded_excerpts)
    table = format_table(result)
    assert "4 superseded documents in 3 series" in table
    assert "12 of the 12 criteria mapped to controls" in table


def test_the_control_tier_and_the_versions_run_on_the_bench_store(bench_store):
    corpus, settings = bench_store
    bench = Workbench(settings, embedder=FakeEmbedder())
    matrix = {a.record_id: a for a in corpus.control_answers}

    linked = []
    for query in corpus.queries:
        trace = bench.retrieve(corpus.vendor_id, query.criterion, "precedence")
        assert [c.id for c in trace.controls] == list(query.controls)
        assert set(query.expected_ids(settings.max_followup_rounds)) <= ids_in_context(trace)
        linked += [(query, f) for f in trace.followups if f.tier == "control"]
    assert linked
    for query, followup in linked:
        answer = matrix[followup.id]
        assert followup.linked_by_control.id == answer.control == query.controls[0]
        # The control's newest round: an earlier round's answer to it is dropped.
        assert answer.round_number == max(a.round_number for a in corpus.control_answers
                                          if a.control == answer.control)

    # Questions the documents in versions answer: each excerpt of a superseded version is
    # labelled with its series' current version, whose excerpt stands ahead of it.
    for question, current in (
            ("Does the vendor have a current SOC 2 Type II report?",
             "soc2_type2_report_2025.txt"),
            ("Is the vendor's information security management system certified to "
             "ISO/IEC 27001?", "iso27001_certificate_2025.txt")):
        for strategy in ("precedence", "hybrid"):
            trace = bench.retrieve(corpus.vendor_id, question, strategy)
            sources = [e.source for e in trace.evidence]
            marked = [e for e in trace.evidence if e.later_version is not None]
            assert marked and {e.source for e in marked} <= set(SUPERSEDED)
            for excerpt in marked:
                assert excerpt.later_version.source == current
                assert sources.index(current) < sources.index(excerpt.source)
        turn = bench.ask(corpus.vendor_id, question)
        shown = [e.source for e in turn.answer_evidence]
        assert any(e.later_version is not None for e in turn.answer_evidence)
        assert all(shown.index(current) < shown.index(e.source)
                   for e in turn.answer_evidence if e.later_version is not None)


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
