"""The "Evidence pack" page: one vendor's evidence per criterion under the sidebar's strategy,
how many criteria have verdicts, and the pack downloaded as Markdown, HTML and JSON lines."""

from __future__ import annotations

import json

import pytest
import streamlit as st

from core.criteria import CriterionEntry
from core.outputs.report import CriterionPack, EvidencePack, build_pack
from tests.conftest import AES_CRITERION
from tests.dashboard.conftest import page
from tests.support.sentences import one_sentence

pytest_plugins = ["tests.llm_stub"]

SOC2 = "Does the vendor have a current SOC 2 Type II report?"
LABELS = ["Markdown (.md)", "One HTML page (.html)", "JSON lines (.jsonl)"]


@pytest.fixture
def downloads(monkeypatch) -> dict[str, tuple[str, str]]:
    """Every download button drawn: label -> (file name, data)."""
    offered: dict[str, tuple[str, str]] = {}
    real = st.download_button

    def recording(label, data, file_name=None, *args, **kwargs):
        offered[label] = (file_name, data)
        return real(label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", recording)
    return offered


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def rows(at):
    return next(d.value for d in at.dataframe if "Verdict" in d.value.columns)


def jsonl(downloads) -> list[dict]:
    return [json.loads(line) for line in downloads["JSON lines (.jsonl)"][1].splitlines()]


def test_the_pack_of_the_vendors_criteria(dashboard_workbench, downloads):
    at = page("pack").run()

    assert not at.exception and not at.error
    assert at.title[0].value == "Evidence pack"
    # The sample's 12 criteria used with acme, and the two its rounds answer besides.
    assert metrics(at) == {"Criteria": "14", "With a verdict": "0 of 14",
                           "With a linked answer": "11 of 14"}
    table = rows(at).set_index("Criterion")
    assert len(table) == 14
    aes = table.loc[AES_CRITERION]
    assert aes["Linked rounds"] == "rounds 1, 2, 3, 4, 5"
    assert aes["In context"] == "3 of 5"  # the latest three rounds
    assert (aes["Verdict"], aes["Verdict state"]) == ("—", "none")
    assert table.loc[SOC2, "Linked rounds"] == "none"

    assert [(label, downloads[label][0]) for label in LABELS] == [
        ("Markdown (.md)", "evidence_pack_acme_precedence.md"),
        ("One HTML page (.html)", "evidence_pack_acme_precedence.html"),
        ("JSON lines (.jsonl)", "evidence_pack_acme_precedence.jsonl")]
    markdown = downloads["Markdown (.md)"][1]
    assert markdown.startswith("# Evidence pack: vendor acme\n")
    assert "## 1. Does the vendor encrypt data at rest using AES-256?" in markdown
    assert downloads["One HTML page (.html)"][1].startswith("<!DOCTYPE html>")
    header, *criteria = jsonl(downloads)
    assert (header["record"], header["strategy"], header["criteria"]) == ("pack", "precedence",
                                                                          14)
    assert [c["criterion"] for c in criteria] == list(table.index)
    first = criteria[0]
    assert [r["round_number"] for r in first["rounds"]] == [5, 4, 3, 2, 1]
    assert first["verdict"]["state"] == "none"


def test_the_pack_follows_the_sidebars_strategy(dashboard_workbench, downloads):
    at = page("pack", strategy="semantic").run()

    assert not at.exception and not at.error
    assert downloads["JSON lines (.jsonl)"][0] == "evidence_pack_acme_semantic.jsonl"
    header, *criteria = jsonl(downloads)
    assert header["strategy"] == "semantic"
    assert {c["strategy"] for c in criteria} == {"semantic"}
    expected = build_pack(dashboard_workbench, "acme", _entries(criteria), "semantic")
    # The same evidence as the command line's pack (the time it was made aside).
    assert [c.model_dump() for c in expected.criteria] == [
        c.model_dump() for c in _pack_of(downloads).criteria]


def _entries(criteria: list[dict]) -> list[CriterionEntry]:
    return [CriterionEntry(c["criterion"], id=c["id"]) for c in criteria]


def _pack_of(downloads) -> EvidencePack:
    """The pack read back from its JSON lines."""
    header, *criteria = jsonl(downloads)
    return EvidencePack(vendor_id=header["vendor_id"], strategy=header["strategy"],
                        generated_at=header["generated_at"], store=header["store"],
                        criteria=[CriterionPack.model_validate(
                            {k: v for k, v in c.items() if k not in ("record", "vendor_id")})
                            for c in criteria])


def test_an_uploaded_criteria_file(dashboard_workbench, downloads):
    at = page("pack").run()
    at.radio(key="pack_criteria_source").set_value("file").run()
    at.file_uploader(key="pack_criteria_file").upload(
        "criteria.txt", f"{SOC2}\n\n{AES_CRITERION}\n".encode(), "text/plain")
    at.run()

    assert not at.exception and not at.error
    assert metrics(at)["Criteria"] == "2"
    assert rows(at)["Criterion"].tolist() == [SOC2, AES_CRITERION]
    markdown = downloads["Markdown (.md)"][1]
    assert markdown.index(SOC2) < markdown.index(AES_CRITERION)


def test_a_verdict_given_on_the_context_page_shows_in_the_pack(dashboard_workbench_llm,
                                                               llm_stub, downloads):
    at = page("pack").run()
    assert metrics(at)["With a verdict"] == "0 of 14"

    llm_stub.enqueue({"verdict": "MET", "reasoning": "Rounds 3 to 5 confirm AES-256.",
                      "contradictions": [], "cited_rounds": [3, 4, 5]})
    context = page("context").run()
    context.button(key="context_assess").click().run()
    assert not context.exception and not context.error

    at.run()  # the pack kept before the verdict is not shown again
    assert not at.exception and not at.error
    assert metrics(at)["With a verdict"] == "1 of 14"
    aes = rows(at).set_index("Criterion").loc[AES_CRITERION]
    # The stub quotes nothing for the rounds it cites: the verdict counts as INCONCLUSIVE.
    unverified = "INCONCLUSIVE (unverified: the model said MET)"
    assert (aes["Verdict"], aes["Verdict state"]) == (unverified, "current")
    first = jsonl(downloads)[1]
    assert first["verdict"]["state"] == "current"
    assert first["verdict"]["verdict"]["reasoning"] == "Rounds 3 to 5 confirm AES-256."
    assert f"**{unverified}** by stub-model" in downloads["Markdown (.md)"][1]
    assert len(llm_stub.requests) == 1  # building the pack asks no language model


def test_an_unknown_vendor_is_one_sentence(dashboard_workbench):
    at = page("pack", vendor="nobody").run()

    assert not at.exception
    [error] = at.error
    assert "nobody" in error.value and one_sentence(error.value)
    assert not at.get("download_button")

