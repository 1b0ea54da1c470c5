"""The whole sample_data through the real all-MiniLM-L6-v2 and a real ChromaDB store: the
precedence scenarios of sample_data/README.md as a reviewer would see them, on disk, on a
ChromaDB server, and on a team's server behind a TLS proxy that checks a token (nginx, a
certificate of a CA the test makes, EVIDENCE_CHROMA_SSL / _CA_BUNDLE / _TOKEN). No FlashRank
model exists here, so every strategy keeps first-stage order and says so."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import defaultdict

import pytest

from core.hashing import criterion_hash, normalize_text
from core.retrieval.strategies import STRATEGIES
from tests.conftest import AES_CRITERION, SAMPLE_DATA, sample_workbench_on

pytestmark = pytest.mark.model


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.server),
                        pytest.param("team server", marks=pytest.mark.server)])
def sample_workbench(request, sample_store, tmp_path, real_embedder):
    """conftest's sample workbench, and the same through the team's proxied server."""
    return sample_workbench_on(request, request.param, sample_store, tmp_path, real_embedder)

CRITERIA = [line.strip() for line in
            (SAMPLE_DATA / "criteria.txt").read_text(encoding="utf-8").splitlines()
            if line.strip()]
C = {f"C{i}": text for i, text in enumerate(CRITERIA, start=1)}
VENDORS = ("acme", "northwind")


def load_rounds(vendor: str) -> list[dict]:
    folder = SAMPLE_DATA / "vendors" / vendor / "questionnaires"
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]


def linked_responses(vendor: str, criterion: str) -> dict[int, set[str]]:
    """round -> question texts of the responses hash-linked to the criterion, from the files."""
    wanted = criterion_hash(criterion)
    found: dict[int, set[str]] = defaultdict(set)
    for payload in load_rounds(vendor):
        for response in payload["responses"]:
            text = response["criterion_question_text"]
            if text is not None and criterion_hash(text) == wanted:
                found[payload["round_number"]].add(response["question_text"])
    return dict(found)


def context_entries(context: str) -> list[tuple[str, str]]:
    """(source, content) of every <index_N> entry, in order, after the <current_answer> the
    project's strategies lead with; the context must parse."""
    root = ET.fromstring(f"<root>{context}</root>")
    elements = list(root)
    if elements and elements[0].tag == "current_answer":
        elements = elements[1:]
    entries = []
    for i, element in enumerate(elements, start=1):
        assert element.tag == f"index_{i}"
        entries.append((element.findtext("source") or "", (element.findtext("content") or "")))
    return entries


def rounds_in_entry(content: str) -> list[int]:
    """The rounds of a multi-round entry, as the seeds ("[Round 3]") or the project's layout
    ("[Round 3 (2024-01-20): ...]") heads them."""
    return [int(r) for r in re.findall(r"^\[Round (\d+)(?:\]| \(.*\]$)", content,
                                       flags=re.MULTILINE)]


def trace_text(trace) -> str:
    """Everything a trace shows about the evidence (not the notes, which name local paths)."""
    data = trace.model_dump(mode="json", include={
        "context", "prompt", "followups", "evidence", "first_stage", "hash_path",
        "semantic_path", "reranked", "dropped_followups"})
    return json.dumps(data, ensure_ascii=False)


# C1, the AES-256 criterion: five hash-linked rounds ------------------------------------------

@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_strategy_returns_a_trace(sample_workbench, strategy):
    trace = sample_workbench.retrieve("acme", AES_CRITERION, strategy)
    assert trace.strategy == strategy
    assert trace.vendor_id == "acme"
    assert trace.criterion_hash == criterion_hash(AES_CRITERION)
    assert trace.reranker.ran is False
    assert trace.evidence
    entries = context_entries(trace.context)
    assert len(entries) == len(trace.evidence) + (1 if trace.followups else 0)
    assert "Criterion to Evaluate" in trace.prompt


def test_precedence_keeps_the_three_latest_rounds(sample_workbench):
    trace = sample_workbench.retrieve("acme", AES_CRITERION, "precedence")
    assert [f.round_number for f in trace.followups] == [3, 4, 5]
    assert all(f.hash_match for f in trace.followups)
    assert sorted(d.followup.round_number for d in trace.dropped_followups) == [1, 2]
    source, content = context_entries(trace.context)[-1]
    assert source.endswith("(Multiple Rounds)")
    assert rounds_in_entry(content) == [3, 4, 5]


def test_prompt_puts_round_5_first_and_keeps_the_round_3_contradiction(sample_workbench):
    trace = sample_workbench.retrieve("acme", AES_CRITERION, "precedence")
    responses = trace.prompt.split("**Source 2")[0]
    blocks = re.findall(r"^\[(CURRENT ANSWER - |EARLIER ANSWER - )?ROUND (\d+) ", responses,
                        flags=re.MULTILINE)
    assert blocks == [("CURRENT ANSWER - ", "5"), ("EARLIER ANSWER - ", "4"),
                      ("EARLIER ANSWER - ", "3")]
    assert "Migration to AES-256 completed on 2024-02-09" in responses
    assert "AES-128" in responses  # round 3: AES-128 for most stored data


def test_tiers_follow_question_similarity(sample_workbench):
    trace = sample_workbench.retrieve("acme", AES_CRITERION, "precedence")
    by_round = {f.round_number: f for f in trace.followups}
    assert by_round[5].question_text == AES_CRITERION
    assert by_round[5].question_similarity == pytest.approx(1.0)
    assert by_round[5].tier == "high"
    assert by_round[3].question_text.startswith("Describe how stored customer records")
    assert by_round[3].question_similarity < 0.7
    assert by_round[3].tier == "medium"


def test_followup_document_is_boosted_up(sample_workbench):
    trace = sample_workbench.retrieve("acme", AES_CRITERION, "precedence")
    kms = [c for c in trace.evidence if c.source == "kms_key_configuration.md"]
    assert kms, [c.source for c in trace.evidence]
    for chunk in kms:
        assert chunk.type == "followup_document"
        assert chunk.boost == pytest.approx(1.15)
        assert chunk.rank_after_boost < chunk.rank_before_boost
    assert all(c.boost == 1.0 for c in trace.evidence if c.type != "followup_document")
    assert [c.rank_after_boost for c in trace.evidence] == list(range(1, len(trace.evidence) + 1))


def test_terse_yes_of_round_4_reaches_the_context(sample_workbench):
    trace = sample_workbench.retrieve("acme", AES_CRITERION, "precedence")
    round_4 = next(f for f in trace.followups if f.round_number == 4)
    assert round_4.answer_text == "Yes."
    _, content = context_entries(trace.context)[-1]
    assert (f"[Round 4 (2024-02-01): an earlier answer; round 5 (2024-02-12) answered this "
            f"criterion later]\nQuestion: {round_4.question_text}\nAnswer: Yes.") in content


def test_semantic_strategy_has_no_precedence(sample_workbench, capsys):
    """The status quo by design: no follow-up entry; follow-ups compete as plain chunks."""
    trace = sample_workbench.retrieve("acme", AES_CRITERION, "semantic")
    assert trace.followups == []
    assert trace.dropped_followups == []
    entries = context_entries(trace.context)
    assert len(entries) == len(trace.evidence)
    assert not any(source.endswith("(Multiple Rounds)") for source, _ in entries)
    assert "No direct vendor responses available" in trace.prompt
    as_chunks = sorted(c.round_number for c in trace.evidence
                       if c.type.startswith("followup_response"))
    with capsys.disabled():
        print(f"\n[report] semantic on C1: {len(trace.evidence)} excerpts; follow-up rounds "
              f"among them as plain chunks: {as_chunks}; sources: "
              f"{[c.source for c in trace.evidence]}")


# The other scenarios of sample_data/README.md --------------------------------------------------

def test_typo_fixed_criterion_still_surfaces_its_followup(sample_workbench):
    """C3: round 2 linked the follow-up to 'authentcation'; the hash differs, so only the
    near-copy lookup of linked criterion texts can vouch for it, and then only as low tier
    (with the real model it sits at first-stage rank 11, outside the top-10 semantic path)."""
    trace = sample_workbench.retrieve("acme", C["C3"], "precedence")
    typo = [f for f in trace.followups
            if f.criterion_question_text and "authentcation" in f.criterion_question_text]
    ranks = [c.first_stage_rank for c in trace.first_stage
             if "authentcation" in str(c.metadata.get("original_criterion_question_text"))]
    assert typo, f"typo-linked follow-up not in the follow-ups (first-stage rank {ranks})"
    assert typo[0].round_number == 2
    assert typo[0].hash_match is False
    assert typo[0].tier == "low"
    assert "near_copy" in typo[0].found_by


@pytest.mark.parametrize("strategy", ["precedence", "tiered", "hash_extraction"])
def test_edited_criterion_does_not_link_the_old_followup(sample_workbench, strategy):
    """C4 is now 'current SOC 2 Type II'; round 1 answered the old 'Type I' wording."""
    trace = sample_workbench.retrieve("acme", C["C4"], strategy)
    old = "Does the vendor have a SOC 2 Type I report?"
    hits = [f for f in trace.followups + [d.followup for d in trace.dropped_followups]
            + (trace.hash_path or []) + (trace.semantic_path or [])
            if f.criterion_question_text == old]
    assert all(h.hash_match is False for h in hits)
    assert all(h.tier not in ("high", "medium") for h in hits)
    assert not any(f.hash_match for f in trace.followups)
    # It is still shown somewhere: as a low-tier follow-up or as an ordinary excerpt.
    assert hits or any("SOC 2 Type I examination" in c.text for c in trace.evidence)
    if strategy == "precedence":
        # "Type I" -> "current Type II" changes what is asked: never vouched for as a follow-up
        assert not [f for f in trace.followups if f.criterion_question_text == old]


def test_case_and_spacing_variants_link(sample_workbench):
    trace = sample_workbench.retrieve("acme", C["C6"], "precedence")
    linked = [f for f in trace.followups if f.hash_match]
    assert [f.round_number for f in linked] == [1, 4]
    assert {f.tier for f in linked} <= {"high", "medium"}
    assert linked[1].answer_text == "Annually."


def test_criterion_without_followups(sample_workbench):
    trace = sample_workbench.retrieve("acme", C["C11"], "precedence")
    assert trace.followups == []
    assert trace.dropped_followups == []
    assert "No direct vendor responses available" in trace.prompt
    entries = context_entries(trace.context)
    assert len(entries) == len(trace.evidence) > 0


def test_single_followup_uses_the_standard_layout(sample_workbench):
    trace = sample_workbench.retrieve("acme", C["C10"], "precedence")
    assert [f.round_number for f in trace.followups] == [4]
    source, content = context_entries(trace.context)[-1]
    assert source == "Follow-up Questionnaire Round 4"
    assert "15 calendar days" in content
    assert content.startswith("\n[Round 4 (2024-02-01): the current answer]\nQuestion: ")


def test_two_questions_of_one_round_are_both_kept(sample_workbench):
    trace = sample_workbench.retrieve("acme", C["C8"], "precedence")
    assert [f.round_number for f in trace.followups] == [3, 3]
    assert {f.answer_text for f in trace.followups} >= {"Quarterly."}


# Isolation and completeness over every criterion --------------------------------------------

@pytest.mark.parametrize("vendor, foreign", [
    ("acme", ("northwind", "azure")),
    ("northwind", ("acme", "kms", "aes-128")),
])
def test_nothing_of_the_other_vendor_appears(sample_workbench, vendor, foreign):
    for criterion in CRITERIA:
        for strategy in STRATEGIES:
            trace = sample_workbench.retrieve(vendor, criterion, strategy)
            text = trace_text(trace).lower()
            leaked = [word for word in foreign if word in text]
            assert not leaked, f"{vendor} / {strategy} / {criterion}: {leaked}"
            assert all(f.id.startswith(f"followup-{vendor}-") for f in trace.followups)


@pytest.mark.parametrize("vendor", VENDORS)
def test_precedence_includes_every_linked_followup_of_the_latest_three_rounds(
        sample_workbench, vendor, capsys):
    misses = []
    for criterion in CRITERIA:
        linked = linked_responses(vendor, criterion)
        latest = sorted(linked)[-3:]
        expected = {(r, q) for r in latest for q in linked[r]}
        older = {(r, q) for r in linked if r not in latest for q in linked[r]}

        trace = sample_workbench.retrieve(vendor, criterion, "precedence")
        got = {(f.round_number, f.question_text) for f in trace.followups}
        assert expected <= got, f"{criterion}: missing {sorted(expected - got)}"
        dropped = {(d.followup.round_number, d.followup.question_text)
                   for d in trace.dropped_followups}
        assert older <= dropped, f"{criterion}: not reported as dropped {sorted(older - dropped)}"
        assert not older & got

        baseline = sample_workbench.retrieve(vendor, criterion, "hash_extraction")
        found = {(f.round_number, f.question_text) for f in baseline.followups}
        if expected - found:
            misses.append((criterion, sorted(r for r, _ in expected - found)))
    with capsys.disabled():
        total = sum(len(linked_responses(vendor, c)) for c in CRITERIA)
        print(f"\n[report] {vendor}: hash_extraction missed {len(misses)} criteria's linked "
              f"follow-ups (of {total} linked rounds): {misses}")


@pytest.mark.parametrize("vendor", VENDORS)
def test_precedence_never_shows_an_answer_to_another_criterion_as_a_followup(
        sample_workbench, vendor):
    """The follow-up entry has top priority in the prompt (its CURRENT ANSWER): it must hold
    answers to this criterion (or a near-copy of it), never answers to another criterion
    of the same assessment."""
    others = {normalize_text(c) for c in CRITERIA}
    for criterion in CRITERIA:
        trace = sample_workbench.retrieve(vendor, criterion, "precedence")
        wrong = [
            (f.round_number, f.criterion_question_text) for f in trace.followups
            if f.criterion_question_text
            and normalize_text(f.criterion_question_text) in others - {normalize_text(criterion)}
        ]
        assert not wrong, f"{vendor} / {criterion}: follow-ups answering {wrong}"
