"""The relevance lab in the dashboard: excerpts graded with one click on the Criterion overview,
Precedence tiers and Boosted vs unboosted pages, every page showing the grade kept in the
store, and each strategy's rank metrics against the grades on the Strategy quality page (fake
models over the sample data)."""

from __future__ import annotations

import math

import pytest

from core.errors import UserInputError
from core.outputs.relevance import Judgments, context_ranking, excerpt_sha
from core.retrieval.strategies import STRATEGIES
from dashboard import judging
from tests.conftest import AES_CRITERION
from tests.dashboard.conftest import page

TLS_CRITERION = "Does the vendor encrypt data in transit using TLS 1.2 or higher?"


@pytest.fixture
def lab(dashboard_workbench, results_folder):
    """The app's workbench, its benchmark results folder empty."""
    return dashboard_workbench


def grade_control(at, page_name: str, excerpt_id: str):
    return at.segmented_control(key=f"judge_{page_name}_{excerpt_id}")


def click(at, page_name: str, excerpt_id: str, grade: int):
    """One click on a grade beside an excerpt, and the page drawn again."""
    grade_control(at, page_name, excerpt_id).set_value(grade).run()
    assert not at.exception and not at.error
    return at


def stored(workbench) -> dict[str, tuple[str, int]]:
    """excerpt sha -> (criterion, grade) of every grade a person gave acme."""
    return {j.excerpt_sha: (j.criterion, j.grade)
            for j in Judgments(workbench.store, "acme").all()}


def relevance_rows(at) -> dict[str, dict]:
    found = next(d.value for d in at.dataframe if "ndcg@6" in d.value.columns
                 and "strategy" in d.value.columns)
    return found.set_index("strategy").to_dict("index")


def test_one_click_on_the_overview_is_kept_and_shown_on_the_other_pages(lab):
    trace = lab.retrieve("acme", AES_CRITERION, "precedence")
    top, followup = trace.evidence[0], trace.followups[-1]
    at = page("overview").run()
    assert not at.exception
    assert "Judge these excerpts" in [e.label for e in at.expander]
    assert grade_control(at, "overview", top.id).value is None
    assert grade_control(at, "overview", top.id).options == [
        "0 not relevant", "1 on the topic", "2 relevant", "3 answers it"]

    click(at, "overview", top.id, 3)
    assert stored(lab) == {excerpt_sha(top.text): (AES_CRITERION, 3)}
    assert grade_control(at, "overview", top.id).value == 3
    click(at, "overview", followup.id, 2)
    assert stored(lab)[excerpt_sha(followup.content)] == (AES_CRITERION, 2)
    assert any("judged so far: 2 of 9" in c.value for c in at.caption)

    tiers = page("tiers").run()
    assert not tiers.exception
    assert grade_control(tiers, "tiers", followup.id).value == 2
    others = [h for h in trace.hash_path if h.id != followup.id]
    assert others and all(grade_control(tiers, "tiers", h.id).value is None for h in others)

    rankings = page("rankings").run()
    assert not rankings.exception
    assert grade_control(rankings, "rankings", top.id).value == 3

    # Graded again elsewhere, the grade is replaced, and the first page shows the new one.
    click(rankings, "rankings", top.id, 1)
    assert stored(lab)[excerpt_sha(top.text)] == (AES_CRITERION, 1)
    assert len(stored(lab)) == 2
    at.run()
    assert grade_control(at, "overview", top.id).value == 1


def test_a_grade_belongs_to_its_criterion_and_a_second_click_keeps_it(lab):
    top = lab.retrieve("acme", AES_CRITERION, "precedence").evidence[0]
    at = page("overview").run()
    click(at, "overview", top.id, 2)

    # Clicking the chosen grade again unselects it on screen; the stored grade stands.
    click(at, "overview", top.id, None)
    assert grade_control(at, "overview", top.id).value == 2
    assert stored(lab) == {excerpt_sha(top.text): (AES_CRITERION, 2)}

    other = page("overview", criterion=TLS_CRITERION).run()
    assert not other.exception
    controls = [c for c in other.segmented_control if c.key.startswith("judge_overview_")]
    assert controls and all(c.value is None for c in controls)


def test_a_grade_the_store_refuses_is_one_sentence_and_nothing_shows_as_kept(lab,
                                                                            monkeypatch):
    def refuse(*args, **kwargs):
        raise UserInputError("The store is read-only.")

    top = lab.retrieve("acme", AES_CRITERION, "precedence").evidence[0]
    at = page("overview").run()
    monkeypatch.setattr(judging, "judge", refuse)
    grade_control(at, "overview", top.id).set_value(3).run()

    assert not at.exception
    assert [e.value for e in at.error] == ["The store is read-only."]
    assert grade_control(at, "overview", top.id).value is None
    assert stored(lab) == {}


def expected_ndcg(workbench, strategy: str, sha: str, depth: int) -> float:
    """nDCG@depth when one excerpt alone is graded (3): 1/log2(rank + 1) at its rank in the
    strategy's context, 0 when it is deeper or absent."""
    ranking = [r.sha for r in context_ranking(
        workbench.retrieve("acme", AES_CRITERION, strategy))]
    rank = ranking.index(sha) + 1 if sha in ranking else None
    return 1 / math.log2(rank + 1) if rank and rank <= depth else 0.0


def test_the_quality_page_measures_every_strategy_against_the_grades(lab):
    # What precedence's context is read first: the criterion's current answer, round 5.
    top = context_ranking(lab.retrieve("acme", AES_CRITERION, "precedence"))[0]
    click(page("overview").run(), "overview", top.id, 3)

    at = page("quality").run()

    assert not at.exception and not at.error
    rows = relevance_rows(at)
    assert list(rows) == list(STRATEGIES)
    # What precedence puts first is the only one graded: its ranking is ideal.
    assert rows["precedence"]["ndcg@6"] == pytest.approx(1.0)
    assert rows["precedence"]["mrr"] == pytest.approx(1.0)
    sha = top.sha
    expected = {name: expected_ndcg(lab, name, sha, 6) for name in STRATEGIES}
    assert min(expected.values()) < 1.0  # some strategy ranks it lower, or leaves it out
    for name in STRATEGIES:
        assert rows[name]["ndcg@6"] == pytest.approx(expected[name], abs=1e-6)
        assert rows[name]["criteria"] == 1 and rows[name]["judged"] == 1

    deltas = next(d.value for d in at.dataframe if "criterion" in d.value.columns
                  and "ndcg@6" in d.value.columns)
    assert at.selectbox(key="quality_delta_a").value == "hybrid"
    assert at.selectbox(key="quality_delta_b").value == "precedence"
    assert deltas["criterion"].tolist() == [AES_CRITERION]
    assert deltas["ndcg@6"].iloc[0] == pytest.approx(
        expected["precedence"] - expected["hybrid"], abs=1e-6)

    # A grade given on another page measures again: a relevant candidate precedence left
    # out of its context lowers its recall.
    trace = lab.retrieve("acme", AES_CRITERION, "precedence")
    in_context = {r.sha for r in context_ranking(trace)}
    rankings = page("rankings").run()
    outside = next(c for c in trace.reranked if excerpt_sha(c.text) not in in_context
                   and c.rank_after_boost <= 2 * trace.constants.top_reranked_n)
    click(rankings, "rankings", outside.id, 3)
    at.run()
    rows = relevance_rows(at)
    assert rows["precedence"]["recall@6"] == pytest.approx(0.5)
    assert rows["precedence"]["ndcg@6"] < 1.0


def test_the_missed_list_names_what_a_strategy_left_out(lab):
    precedence = lab.retrieve("acme", AES_CRITERION, "precedence")
    contexts = {name: {r.sha for r in context_ranking(lab.retrieve("acme", AES_CRITERION,
                                                                   name))}
                for name in STRATEGIES}
    # A follow-up in precedence's context that another strategy left out of its own.
    left_out = [(h, name) for h in precedence.followups for name in STRATEGIES
                if excerpt_sha(h.content) not in contexts[name]]
    assert left_out
    followup, strategy = left_out[0]
    tiers = page("tiers").run()
    click(tiers, "tiers", followup.id, 2)

    at = page("quality").run()
    assert not at.exception
    at.selectbox(key="quality_missed_strategy").set_value(strategy).run()
    missed = next(d.value for d in at.dataframe if "grade" in d.value.columns
                  and "source" in d.value.columns)
    assert missed.to_dict("records") == [{
        "criterion": AES_CRITERION, "grade": "2 relevant", "id": followup.id,
        "source": followup.source}]  # "Follow-up Questionnaire Round N" names its round

    at.selectbox(key="quality_missed_strategy").set_value("precedence").run()
    assert not any("grade" in d.value.columns and "source" in d.value.columns
                   for d in at.dataframe)
    assert any("The precedence strategy left no excerpt judged relevant out of its context"
               in m.value for m in at.markdown)


def test_without_a_judgment_the_section_says_how_to_judge(lab, monkeypatch):
    calls: list[str] = []
    original = lab.retrieve
    monkeypatch.setattr(lab, "retrieve", lambda *a, **k: calls.append(a) or original(*a, **k))

    at = page("quality").run()

    assert not at.exception and not at.error
    [info] = [i.value for i in at.info if "judged" in i.value]
    assert info == ("No excerpt of acme is judged yet: grade excerpts 0 to 3 under “Judge these "
                    "excerpts” on the Criterion overview, Precedence tiers or Boosted vs "
                    "unboosted pages, or run `evidence eval --judgments FILE`.")
    assert not any("ndcg@6" in d.value.columns for d in at.dataframe)
    assert not calls  # nothing measured, nothing retrieved


def test_grades_of_zero_alone_leave_nothing_to_measure(lab):
    top = lab.retrieve("acme", AES_CRITERION, "precedence").evidence[0]
    click(page("overview").run(), "overview", top.id, 0)

    at = page("quality").run()

    assert not at.exception
    assert any(i.value.startswith("Every excerpt judged for acme is graded 0")
               for i in at.info)
    assert not any("ndcg@6" in d.value.columns for d in at.dataframe)
