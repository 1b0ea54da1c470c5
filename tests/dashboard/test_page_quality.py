"""The "Strategy quality" page: recorded benchmark results (folder and uploads), and every
strategy compared live on a vendor of the fake sample store."""

from __future__ import annotations

import json
import re

import pytest

from core.ingest.rounds.payload import parse_payload
from core.outputs.quality import StrategyComparison, StrategyRun
from core.retrieval.strategies import STRATEGIES as LIVE_STRATEGIES
from core.review.llm.client import describe_missing
from dashboard import resources
from dashboard.views import quality
from tests.conftest import AES_CRITERION, SAMPLE_CRITERIA
from tests.dashboard.conftest import empty_results_folder, page
from tests.support import payloads
from tests.support.bench_results import SHARES, STRATEGIES, bench_result, write_results
from tests.support.sentences import one_sentence

pytest_plugins = ["tests.llm_stub"]

LIVE = list(LIVE_STRATEGIES)  # what the live comparison runs: every strategy

SOC2 = "Does the vendor have a current SOC 2 Type II report?"


@pytest.fixture
def recorded(results_folder):
    """Three recorded runs, 1k, 10k and 100k chunks."""
    write_results(results_folder)
    return results_folder


def chart(at, key: str) -> dict:
    return json.loads(next(c for c in at.get("plotly_chart") if c.proto.id.endswith(key)
                           ).proto.spec)


def table(at, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_recorded_runs_draw_the_curve_and_the_latest_run(recorded):
    at = page("quality").run()

    assert not at.exception
    assert at.title[0].value == "Strategy quality"
    curve = chart(at, "crowding_figure")
    assert [t["name"] for t in curve["data"]] == STRATEGIES
    for trace, index in zip(curve["data"], range(5), strict=True):
        assert trace["x"] == [1_000, 10_000, 100_000]
        assert trace["y"] == [SHARES[n][index] for n in (1_000, 10_000, 100_000)]
    assert curve["layout"]["xaxis"]["type"] == "log"

    choice = at.selectbox(key="quality_run_choice")
    assert choice.options == [
        f"{n} chunks · 2025-03-01 10:00 UTC · recorded" for n in ("1,000", "10,000", "100,000")]
    assert choice.value == 2  # the largest run is shown first
    rows = table(at, "x_floor").set_index("strategy")
    assert list(rows.index) == STRATEGIES
    assert rows.loc["precedence", "linked"] == "150/150 (100%)"
    assert rows.loc["semantic", "linked"] == "45/150 (30%)"
    assert rows.loc["tiered", "p50_ms"] == 23.0 and rows.loc["tiered", "p95_ms"] == 33.0
    assert rows.loc["doc_boost", "x_floor"] == pytest.approx(22.0 / 12.0, abs=1e-3)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Floor p50"] == "12.0 ms"
    assert metrics["Ingest vs raw encode"] == "75%"
    assert metrics["Peak memory retrieving"] == "512 MB"
    captions = [c.value.replace("\\", "") for c in at.caption]  # markdown-escaped text
    assert any("2 CPUs" in c and "Measured 2025-03-01 10:00 UTC" in c for c in captions)

    stages = chart(at, "bench_stages")
    assert [t["name"] for t in stages["data"]] == ["embed_query", "first_stage", "select"]
    assert stages["layout"]["shapes"][0]["x0"] == 12.0  # the floor

    choice.set_value(0).run()
    rows = table(at, "x_floor").set_index("strategy")
    assert rows.loc["semantic", "linked"] == "135/150 (90%)"


def test_an_unreadable_recorded_file_is_named_and_the_rest_shown(recorded):
    (recorded / "bench-500.json").write_text("{not json")
    at = page("quality").run()

    assert not at.exception
    assert [w.value for w in at.warning] == ["bench-500.json is not JSON."]
    assert len(at.selectbox(key="quality_run_choice").options) == 3


def test_no_results_says_so_and_gives_the_commands(results_folder):
    at = page("quality").run()

    assert not at.exception
    assert len(at.info) >= 1
    assert at.info[0].value.startswith(f"No benchmark results are recorded in {results_folder}")
    commands = at.code[0].value
    assert "evidence bench --chunks 10000 --format json" in commands
    assert "python benchmarks/crowding.py" in commands
    assert not at.get("plotly_chart") or all(
        "crowding" not in c.proto.id for c in at.get("plotly_chart"))


def test_an_uploaded_result_joins_the_curve(results_folder):
    at = page("quality").run()
    other = bench_result(50_000, [0.5, 0.9, 0.5, 0.9, 1.0], date="2025-04-02T08:30:00+00:00")
    at.file_uploader(key="quality_uploads").upload(
        "laptop.json", other.model_dump_json().encode(), "application/json")
    at.run()

    assert not at.exception and not at.error
    assert chart(at, "crowding_figure")["data"][0]["x"] == [50_000]
    choice = at.selectbox(key="quality_run_choice")
    assert choice.options[choice.index] == (
        "50,000 chunks · 2025-04-02 08:30 UTC · uploaded laptop.json")


@pytest.mark.parametrize("content, sentence", [
    (b"{not json", "notes.json is not JSON."),
    (json.dumps({"chunks": 10}).encode(),
     "notes.json is not an `evidence bench --format json` result: queries: Field required."),
])
def test_a_bad_upload_is_one_sentence_and_changes_nothing(recorded, content, sentence):
    at = page("quality").run()
    before = table(at, "x_floor").to_dict()
    at.file_uploader(key="quality_uploads").upload("notes.json", content, "application/json")
    at.run()

    assert not at.exception
    assert [e.value for e in at.error] == [sentence]
    assert one_sentence(at.error[0].value)
    assert len(at.selectbox(key="quality_run_choice").options) == 3
    assert table(at, "x_floor").to_dict() == before


def count_retrieves(workbench, monkeypatch) -> list[str]:
    calls: list[str] = []
    original = workbench.retrieve

    def counted(vendor_id, criterion, strategy="precedence"):
        calls.append(strategy)
        return original(vendor_id, criterion, strategy)

    monkeypatch.setattr(workbench, "retrieve", counted)
    return calls


def summary(at) -> dict[str, dict]:
    return table(at, "complete").set_index("strategy").to_dict("index")


def test_the_live_comparison_counts_each_strategys_linked_answers(
        results_folder, dashboard_workbench, monkeypatch):
    calls = count_retrieves(dashboard_workbench, monkeypatch)
    at = page("quality").run()
    criteria = at.text_area(key="quality_criteria").value.splitlines()
    # The vendor's criteria: the sample's list used with it, then the two its rounds answer
    # besides (the SOC 2 Type I wording, the MFA criterion with a typo).
    assert criteria[:12] == SAMPLE_CRITERIA and len(criteria) == 14
    at.text_area(key="quality_criteria").set_value("\n".join(SAMPLE_CRITERIA)).run()
    assert not calls  # nothing runs before the button

    at.button(key="quality_compare").click().run()

    assert not at.exception and not at.error
    assert len(calls) == 12 * len(LIVE)
    rows = summary(at)
    assert list(rows) == LIVE
    # acme: 9 of the 12 criteria have linked follow-ups, 18 expected answers in all
    assert rows["precedence"]["linked"] == "18/18 (100%)"
    assert rows["precedence"]["complete"] == "9 of 9"
    assert rows["tiered"]["linked"] == "17/18 (94%)"
    assert rows["hash_extraction"]["linked"] == "16/18 (89%)"
    assert rows["semantic"]["linked"] == "4/18 (22%)"
    assert rows["semantic"]["complete"] == "1 of 9"
    assert rows["doc_boost"]["complete"] == "1 of 9"
    assert rows["hybrid"]["linked"] == "18/18 (100%)"  # precedence's design, hybrid search

    matrix = table(at, "Linked by hash").set_index("Criterion")
    # precedence, the default, first: in view beside the criterion without scrolling
    assert list(matrix.columns) == ["Linked by hash", "precedence", "semantic",
                                    "hash_extraction", "doc_boost", "tiered", "hybrid"]
    aes = matrix.loc[AES_CRITERION]
    assert aes["Linked by hash"] == "5; latest 3: rounds 3, 4, 5"
    assert aes["precedence"] == "3/3"
    assert aes["semantic"] == "2/3 (missing round 3)"
    assert aes["tiered"] == "2/3 (missing round 3)"
    assert set(matrix.loc[SOC2, LIVE]) == {"no linked follow-up"}
    assert matrix.loc[SOC2, "Linked by hash"] == "none"

    stages = chart(at, "live_stages")
    assert [t["y"] for t in stages["data"]][0] == LIVE
    names = [t["name"] for t in stages["data"]]
    assert "hash_fetch" in names and "total" not in names and "load_model" not in names
    assert not stages["layout"].get("shapes")  # no floor measured live

    # Redrawing the page, or pressing the button again, does not run anything again.
    at.run()
    at.button(key="quality_compare").click().run()
    assert len(calls) == 12 * len(LIVE)
    assert summary(at)["precedence"]["linked"] == "18/18 (100%)"


def test_an_edited_list_on_another_vendor(results_folder):
    at = page("quality", vendor="northwind").run()
    at.text_area(key="quality_criteria").set_value(f"\n  {AES_CRITERION}  \n\n").run()
    at.button(key="quality_compare").click().run()

    assert not at.exception and not at.error
    rows = summary(at)
    assert rows["precedence"]["linked"] == "3/3 (100%)"
    assert rows["hash_extraction"]["linked"] == "3/3 (100%)"
    assert rows["semantic"]["linked"] == "1/3 (33%)"
    matrix = table(at, "Linked by hash").set_index("Criterion")
    assert list(matrix.index) == [AES_CRITERION]
    assert matrix.loc[AES_CRITERION, "semantic"] == "1/3 (missing rounds 2, 3)"
    assert matrix.loc[AES_CRITERION, "doc_boost"] == "1/3 (missing rounds 2, 3)"

    # Switching vendor does not show northwind's numbers as acme's.
    at.session_state["vendor"] = "acme"
    at.run()
    assert not any(d.value.columns[0] == "strategy" and "complete" in d.value.columns
                   for d in at.dataframe)
    assert any("Press the button" in i.value for i in at.info)


def test_a_typed_criterion_joins_the_default_list(results_folder):
    typed = "Does the vendor log administrator sign-ins?"
    at = page("quality", criterion=typed).run()
    criteria = at.text_area(key="quality_criteria").value.splitlines()
    assert criteria[-1] == typed and criteria[0] == AES_CRITERION


@pytest.mark.parametrize("text, pattern", [
    ("  \n\n ", r"The criteria list is empty; enter one criterion per line\."),
    ("\n".join(f"Criterion {i}?" for i in range(51)),
     r"The list holds 51 criteria; at most 50 are compared at once, since each runs every "
     r"strategy\."),
    (f"{AES_CRITERION}\n{'x' * 5000}", r"Line 2 is 5,000 characters long; a criterion may be "
                                       r"at most [\d,]+\."),
])
def test_a_refused_list_is_one_sentence(results_folder, dashboard_workbench, monkeypatch,
                                        text, pattern):
    calls = count_retrieves(dashboard_workbench, monkeypatch)
    at = page("quality").run()
    at.text_area(key="quality_criteria").set_value(text).run()
    at.button(key="quality_compare").click().run()

    assert not at.exception
    assert len(at.error) == 1 and re.fullmatch(pattern, at.error[0].value)
    assert not calls


def test_an_unknown_vendor_is_one_plain_error(results_folder):
    at = page("quality", vendor="nobody").run()
    at.button(key="quality_compare").click().run()

    assert not at.exception
    assert len(at.error) == 1
    assert "nobody" in at.error[0].value and one_sentence(at.error[0].value)


def test_an_ingest_makes_the_comparison_run_again(results_folder, dashboard_workbench):
    at = page("quality").run()
    at.text_area(key="quality_criteria").set_value(AES_CRITERION).run()
    at.button(key="quality_compare").click().run()
    assert table(at, "Linked by hash")["Linked by hash"].tolist() == [
        "5; latest 3: rounds 3, 4, 5"]

    payload = payloads.round_payload(6, [payloads.response(
        "Confirm the key length for stored data.", "AES-256 throughout.", AES_CRITERION)],
        timestamp="2024-09-01T09:00:00Z")
    list(dashboard_workbench.ingest_questionnaires([parse_payload(payload)]))
    resources.store_changed()  # what the Evidence library page calls after an ingest
    at.run()
    assert any("The store changed" in i.value for i in at.info)

    at.button(key="quality_compare").click().run()
    assert not at.exception
    assert table(at, "Linked by hash")["Linked by hash"].tolist() == [
        "6; latest 3: rounds 4, 5, 6"]


def _run(expected: tuple[int, ...], reached: tuple[int, ...], linked: int = 5) -> StrategyRun:
    return StrategyRun(criterion="C?", strategy="semantic", linked=linked,
                       expected_rounds=expected, reached_rounds=reached, timings_ms={})


@pytest.mark.parametrize("run, cell", [
    (_run((3, 4, 5), (3, 4, 5)), "3/3"),
    (_run((3, 4, 5), (5,)), "1/3 (missing rounds 3, 4)"),
    (_run((2, 4), (4,)), "1/2 (missing round 2)"),
    # one round answered the criterion twice, one answer reached the context
    (_run((3, 3), (3,), linked=2), "1/2 (missing round 3)"),
    (_run((3, 3), (), linked=2), "0/2 (missing round 3 ×2)"),
    (_run((), (), linked=0), "no linked follow-up"),
])
def test_matrix_cells(run, cell):
    assert quality.matrix_cell(run) == cell


def test_criteria_text_skips_blank_lines_and_repeats():
    text = f"\n {AES_CRITERION} \n\n{SOC2}\n{AES_CRITERION}\n"
    assert quality.parse_criteria(text) == [AES_CRITERION, SOC2]


def test_a_comparison_begun_before_an_ingest_is_not_kept():
    comparisons = resources._Comparisons()
    comparison = StrategyComparison(vendor_id="acme", runs=[_run((3,), (3,))])
    began = comparisons.version
    comparisons.clear()  # store_changed() while the comparison ran
    comparisons.put(("acme", ("C?",)), comparison, began)
    assert comparisons.get(("acme", ("C?",))) is None
    comparisons.put(("acme", ("C?",)), comparison, comparisons.version)
    assert comparisons.get(("acme", ("C?",))) == comparison


def test_the_kept_comparisons_are_bounded():
    comparisons = resources._Comparisons()
    comparison = StrategyComparison(vendor_id="acme", runs=[])
    for i in range(comparisons.MAX_COMPARISONS + 1):
        comparisons.put(("acme", (f"C{i}?",)), comparison, comparisons.version)
    assert comparisons.get(("acme", ("C0?",))) is None  # the oldest went first
    assert comparisons.get(("acme", (f"C{comparisons.MAX_COMPARISONS}?",))) == comparison


# Verdicts of every strategy side by side ---------------------------------------------------

def verdict_rows(at) -> dict[str, dict[str, str]]:
    found = next(d.value for d in at.dataframe
                 if "Criterion" in d.value.columns and "Linked by hash" not in d.value.columns)
    assert list(found.columns) == ["Criterion", *quality.matrix_columns(LIVE)]
    return found.set_index("Criterion").to_dict("index")


def test_without_a_language_model_verdicts_are_read_and_none_is_asked(results_folder,
                                                                       dashboard_workbench):
    missing = describe_missing(dashboard_workbench.settings)
    at = page("quality").run()

    assert not at.exception and not at.error
    assert missing in [i.value for i in at.info]
    assert at.button(key="quality_assess").disabled
    assert verdict_rows(at) == {AES_CRITERION: dict.fromkeys(LIVE, "—")}

    # After a comparison, its criteria join the sidebar's (first).
    at.button(key="quality_compare").click().run()
    rows = verdict_rows(at)
    assert list(rows)[0] == AES_CRITERION and len(rows) == 14
    assert {cell for row in rows.values() for cell in row.values()} == {"—"}


@pytest.fixture
def llm_results(dashboard_workbench_llm, tmp_path):
    empty_results_folder(dashboard_workbench_llm, tmp_path)
    return dashboard_workbench_llm


def quoting(workbench, strategy: str) -> list[dict[str, str]]:
    """A true quote of the strategy's first excerpt, as a model that reads its prompt gives."""
    first = workbench.retrieve("acme", AES_CRITERION, strategy).evidence[0]
    return [{"source": first.source, "quote": " ".join(first.text.split()[:8])}]


def test_assess_with_every_strategy_shows_the_verdicts_side_by_side(llm_results, llm_stub):
    order = quality.matrix_columns(LIVE)
    given = dict(zip(order, ["MET", "NOT_MET", "INCONCLUSIVE", "MET", "NOT_MET", "MET"],
                     strict=True))
    for name in order:
        llm_stub.enqueue({"verdict": given[name], "reasoning": f"From the {name} prompt.",
                          "contradictions": [], "cited_rounds": [],
                          "quotes": quoting(llm_results, name)})
    at = page("quality").run()
    assert not [i for i in at.info if "No language model" in i.value]
    assert not llm_stub.requests

    at.button(key="quality_assess").click().run()

    assert not at.exception and not at.error
    # Each strategy's own prompt was sent, in the order of the table's columns.
    prompts = [r.messages[0]["content"] for r in llm_stub.requests]
    assert prompts == [llm_results.retrieve("acme", AES_CRITERION, name).prompt
                       for name in order]
    assert [s.value for s in at.success] == [
        "Assessed with 6 strategies: 6 sent to the language model, 0 read back from the "
        "store (prompt already answered)."]
    assert verdict_rows(at) == {AES_CRITERION: given}

    # A new linked round changes the prompt of every strategy that puts it in the context:
    # those verdicts are now stale, the others still current.
    payload = payloads.round_payload(6, [payloads.response(
        "Is the archive encrypted now?", "Yes, since August.", AES_CRITERION)],
        timestamp="2024-09-01T09:00:00Z")
    list(llm_results.ingest_questionnaires([parse_payload(payload)]))
    resources.store_changed()
    at.run()
    changed = {name for name, before in zip(order, prompts, strict=True)
               if llm_results.retrieve("acme", AES_CRITERION, name).prompt != before}
    assert "precedence" in changed  # it fetches every hash-linked answer
    assert verdict_rows(at) == {AES_CRITERION: {
        name: f"{v} (stale)" if name in changed else v for name, v in given.items()}}


def test_a_failing_endpoint_stops_the_run_in_one_sentence(llm_results, llm_stub):
    llm_stub.enqueue({"verdict": "MET", "reasoning": "Fine.", "contradictions": [],
                      "cited_rounds": [], "quotes": quoting(llm_results, "precedence")})
    llm_stub.enqueue(status=503, error="overloaded")
    at = page("quality").run()
    at.button(key="quality_assess").click().run()

    assert not at.exception
    [error] = at.error
    assert error.value.startswith("The language model at ") and one_sentence(error.value)
    assert len(llm_stub.requests) == 2  # the first strategy's verdict is kept, no more asked
    row = verdict_rows(at)[AES_CRITERION]
    assert row["precedence"] == "MET"
    assert {row[name] for name in LIVE if name != "precedence"} == {"—"}
