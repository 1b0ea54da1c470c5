"""Verdicts that show their quotes: every quote a language model gives is checked against the
words of the source it names in the prompt (after typography, case and white space are
folded), a verdict with a quote that does not hold or a quote missing counts as INCONCLUSIVE
while the model's own verdict stays visible, and each source is the vendor's own statement or
independently attested.

Properties (200 examples each): a forged quote (random words, a real span with one word
changed or cut mid-word, a real span named as another source's, the question a round
answered) never verifies; a real span of three or more words of the named source always
verifies, whatever curly quotes, non-breaking or zero-width spaces, line breaks, case or
surrounding quote marks are put into it. The oracle is a plain comparison of word lists, not
the checker's own folding. End to end, `evidence assess` runs through the real `openai`
client against the local stub server."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from core.models import FOLLOWUP_SOURCE_TYPE, Candidate, FollowupHit
from core.review.llm.quotes import (
    PromptSource,
    VerdictQuote,
    check_quotes,
    prompt_sources,
    source_kind,
)
from core.review.verdicts import Verdict, VerdictAnswer, VerdictStore, prompt_sha256
from core.trace.context import format_prompt
from core.workbench import Workbench
from dashboard.views.context import quote_lines, unverified_lines
from dashboard.widgets import verdict_cell
from tests.conftest import AES_CRITERION
from tests.fakes import point_the_command_at
from tests.support import payloads
from tests.support.cli import run_json as run
from tests.support.cli import run_main

pytest_plugins = ["tests.llm_stub"]

PURE = settings(max_examples=200, deadline=None)

# Prompts made of plain words ---------------------------------------------------------------

LETTERS = "abcdefghijklmnopqrstuvwxyz"
WORDS = st.one_of(
    st.text(alphabet=LETTERS, min_size=4, max_size=9),
    st.text(alphabet=LETTERS, min_size=4, max_size=9).map(lambda w: w + "'s"),
    st.text(alphabet=LETTERS, min_size=4, max_size=9).map(str.capitalize),
)
# How the vendor's text separates its words: the prompt shows them as written.
SEPARATORS = st.sampled_from([" ", " ", " ", "\n", "  ", "\u00a0", " \n "])
DOCUMENT_NAMES = ["policy_{i}.md", "iso27001_certificate_{i}.pdf", "overview_{i}.docx",
                  "pentest_attestation_letter_{i}.pdf"]


def words_key(text: str) -> list[str]:
    """The oracle's view of text: its words, curly apostrophes and non-breaking spaces made
    plain, case-folded; nothing else is folded."""
    return text.replace("\u2019", "'").replace("\u00a0", " ").casefold().split()


def holds(source_text: str, quote: str) -> bool:
    """Whether the quote's words are a run of the source's words."""
    source, quoted = words_key(source_text), words_key(quote)
    return any(source[i:i + len(quoted)] == quoted
               for i in range(len(source) - len(quoted) + 1))


@st.composite
def vendor_text(draw, min_words: int = 8) -> str:
    words = draw(st.lists(WORDS, min_size=min_words, max_size=30))
    curly = draw(st.booleans())
    text = words[0]
    for word in words[1:]:
        text += draw(SEPARATORS) + word
    return text.replace("'", "\u2019") if curly else text


def followup(round_number: int, answer: str, *, question: str = "Is it encrypted?",
             source: str | None = None, questionnaire_id: str | None = None) -> FollowupHit:
    """A follow-up answer linked to the AES criterion, as the retrieval hands it over."""
    return FollowupHit(
        id=f"f-{round_number}", round_number=round_number,
        timestamp=f"2024-{round_number:02d}-15T10:30:00Z",
        source=source or f"Follow-up Questionnaire Round {round_number}", content="",
        questionnaire_id=questionnaire_id, criterion_question_text=AES_CRITERION,
        criterion_question_hash="h", question_text=question, answer_text=answer,
        hash_match=True, question_similarity=1.0)


@dataclass(frozen=True)
class Prompt:
    """A seed-003 prompt with its sources: texts[heading] is the words a quote of that source
    must be found in; questions[heading] is the question a round answered."""

    prompt: str
    sources: list[PromptSource]
    texts: dict[str, str]
    questions: dict[str, str]
    kinds: dict[str, str]


@st.composite
def prompts(draw) -> Prompt:
    rounds = draw(st.lists(st.integers(1, 9), min_size=1, max_size=3, unique=True))
    followups = [followup(n, draw(vendor_text()), question=draw(vendor_text())) for n in rounds]
    names = draw(st.lists(st.sampled_from(DOCUMENT_NAMES), min_size=1, max_size=3))
    evidence = [Candidate(id=f"d-{i}", type="document", source=name.format(i=i),
                          text=draw(vendor_text()))
                for i, name in enumerate(names, start=1)]
    sources = prompt_sources(evidence, followups)
    return Prompt(
        prompt=format_prompt(AES_CRITERION, evidence, followups), sources=sources,
        texts={**{f"Round {f.round_number}": f.answer_text for f in followups},
               **{f"Document {i}": c.text for i, c in enumerate(evidence, start=1)}},
        questions={f"Round {f.round_number}": f.question_text for f in followups},
        kinds={s.heading: s.source_kind for s in sources})


def span(draw, text: str, min_words: int = 3) -> str:
    """A run of at least `min_words` of the text's words, joined by single spaces."""
    words = text.replace("\u00a0", " ").split()
    start = draw(st.integers(0, len(words) - min_words))
    end = draw(st.integers(start + min_words, len(words)))
    return " ".join(words[start:end])


def check_one(prompt: Prompt, source: str, quote: str, verdict: str = "MET"):
    return check_quotes([VerdictQuote(source=source, quote=quote)], verdict=verdict,
                        cited_rounds=[], sources=prompt.sources, prompt=prompt.prompt)


# 1. Forged quotes never pass; real spans always do ------------------------------------------

@st.composite
def forgeries(draw) -> tuple[Prompt, str, str]:
    """(prompt, the source named, a quote that is not a run of that source's words)."""
    prompt = draw(prompts())
    named = draw(st.sampled_from(sorted(prompt.texts)))
    how = draw(st.sampled_from(["random words", "one word changed", "cut mid-word",
                                "another source", "the question asked"]))
    event(how)
    if how == "random words":
        quote = " ".join(draw(st.lists(WORDS, min_size=3, max_size=8)))
    elif how == "one word changed":
        words = span(draw, prompt.texts[named]).split()
        at = draw(st.integers(0, len(words) - 1))
        words[at] = draw(WORDS.filter(lambda w, old=words[at]: w.casefold() != old.casefold()))
        quote = " ".join(words)
    elif how == "cut mid-word":
        words = span(draw, prompt.texts[named]).split()
        cut = draw(st.integers(1, len(words[0]) - 1))
        quote = " ".join([words[0][cut:], *words[1:]])
    elif how == "another source":
        others = sorted(set(prompt.texts) - {named})
        assume(others)
        quote = span(draw, prompt.texts[draw(st.sampled_from(others))])
    else:
        assume(named in prompt.questions)
        quote = span(draw, prompt.questions[named])
    assume(not holds(prompt.texts[named], quote))
    return prompt, named, quote


@PURE
@given(forgeries())
def test_a_forged_quote_never_verifies(forged):
    prompt, named, quote = forged
    checked = check_one(prompt, named, quote)

    assert checked.verified is False
    [result] = checked.quotes
    assert result.verified is False and result.source_id is None
    [why] = checked.unverified_quotes
    assert (why.source, why.quote) == (named, quote) and why.reason
    assert checked.rests_on == []


TYPOGRAPHY = {"straight": lambda q: q.replace("\u2019", "'"),
              "curly": lambda q: q.replace("'", "\u2019"),
              "upper": str.upper, "lower": str.lower, "title": str.title,
              "swapcase": str.swapcase,
              "non-breaking spaces": lambda q: q.replace(" ", "\u00a0"),
              "thin and narrow spaces": lambda q: q.replace(" ", "\u2009", 1).replace(
                  " ", "\u202f", 1),
              "line breaks": lambda q: q.replace(" ", "\n  ", 2),
              "zero-width space": lambda q: q[:2] + "\u200b" + q[2:],
              "curly quote marks": lambda q: f"\u201c{q}\u201d",
              "straight quote marks": lambda q: f'"{q}"',
              "ellipsis after": lambda q: q + "\u2026"}


@PURE
@given(prompts(), st.data())
def test_a_real_span_always_verifies_whatever_its_typography(prompt, data):
    named = data.draw(st.sampled_from(sorted(prompt.texts)))
    quote = span(data.draw, prompt.texts[named])
    assume(len(quote) >= 12)
    for name in data.draw(st.lists(st.sampled_from(sorted(TYPOGRAPHY)), max_size=4)):
        event(name)
        quote = TYPOGRAPHY[name](quote)
    source = data.draw(st.sampled_from([named, f"[{named.upper()}]",
                                        f"{named}: as quoted"]))

    checked = check_one(prompt, source, quote)

    assert checked.verified is True, checked.unverified_quotes
    [result] = checked.quotes
    assert result.verified and result.source_label.startswith(named)
    assert result.source_kind == prompt.kinds[named]
    assert checked.rests_on == [prompt.kinds[named]]


@PURE
@given(prompts(), st.data())
def test_a_quote_verifies_exactly_when_it_is_a_run_of_the_named_sources_words(prompt, data):
    named = data.draw(st.sampled_from(sorted(prompt.texts)))
    pool = [*prompt.texts.values(), *prompt.questions.values()]
    quote = span(data.draw, data.draw(st.sampled_from(pool)))

    checked = check_one(prompt, named, quote)

    expected = holds(prompt.texts[named], quote) and len(quote) >= 12
    event(f"expected {expected}")
    assert checked.verified is expected


@pytest.mark.parametrize("quote, reason", [
    pytest.param("encrypted at rest | - | until", "words", id="inside-a-longer-word"),
    pytest.param("compliant with ISO 27001", "words", id="after-a-hyphen"),
    pytest.param("s archive data is", "words", id="after-an-apostrophe"),
    pytest.param("the migration completes; it is non", "words", id="before-a-hyphen"),
    pytest.param("archive data is unencrypted at re", "words", id="cut-at-the-end"),
    pytest.param("the vendor archive data", "words", id="possessive-dropped"),
    pytest.param("data is encrypted at rest", "words", id="one-word-changed"),
    pytest.param("unencrypted", "too short", id="one-word"),
    pytest.param("is unencrypted", "too short", id="two-words"),
    pytest.param("at is on", "too short", id="three-short-words"),
    pytest.param("rest | - | until", "too short", id="punctuation-is-no-word"),
])
def test_short_and_partial_word_quotes_do_not_verify(quote, reason):
    answer = ("The vendor's archive data is unencrypted at rest | - | until the migration "
              "completes; it is non-compliant with ISO 27001.")
    hit = followup(3, answer)
    sources = prompt_sources([], [hit])
    prompt = format_prompt(AES_CRITERION, [], [hit])
    checked = check_quotes([VerdictQuote(source="Round 3", quote=quote)], verdict="MET",
                           cited_rounds=[3], sources=sources, prompt=prompt)

    assert checked.verified is False
    assert reason in checked.unverified_quotes[0].reason
    # The round is quoted (badly), so it is not reported missing as well.
    assert len(checked.unverified_quotes) == 1


@pytest.mark.parametrize("quote", [
    "The vendor\u2019s archive data",
    "it is NON-COMPLIANT with ISO 27001.",
    "\u201cunencrypted at rest until\u201d",
    "Section IV - Tests of controls",
    "Section IV \u2014 Tests of controls",
    "rotated\u00a0every 90\u2013180 days",
])
def test_whole_words_verify_with_their_apostrophes_hyphens_and_dashes(quote):
    answer = ("The vendor's archive data is unencrypted at rest until the migration "
              "completes; it is non-compliant with ISO 27001.\n\nSection IV \u2014 Tests of "
              "controls: keys are rotated every 90-180 days.")
    hit = followup(3, answer)
    checked = check_quotes([VerdictQuote(source="Round 3", quote=quote)], verdict="MET",
                           cited_rounds=[3], sources=prompt_sources([], [hit]),
                           prompt=format_prompt(AES_CRITERION, [], [hit]))
    assert checked.verified is True, checked.unverified_quotes


def test_a_verdict_that_quotes_nothing_or_leaves_a_cited_round_unquoted_is_unverified():
    followups = [followup(n, f"Round {n} says all data at rest is encrypted.") for n in (1, 2)]
    sources = prompt_sources([], followups)
    prompt = format_prompt(AES_CRITERION, [], followups)

    def check(verdict, cited, quotes):
        return check_quotes([VerdictQuote(source=s, quote=q) for s, q in quotes],
                            verdict=verdict, cited_rounds=cited, sources=sources,
                            prompt=prompt)

    silent = check("MET", [], [])
    assert silent.verified is False
    assert [u.reason for u in silent.unverified_quotes] == [
        "the verdict is MET but quotes nothing from the prompt"]
    half = check("NOT_MET", [1, 2], [("Round 1", "all data at rest is encrypted")])
    assert half.verified is False
    assert [(u.source, u.quote) for u in half.unverified_quotes] == [("Round 2", "")]
    assert "round 2 is cited but no quote" in half.unverified_quotes[0].reason
    both = check("MET", [1, 2], [("Round 1", "all data at rest is encrypted"),
                                 ("round 2", "Round 2 says all data")])
    assert both.verified is True and both.unverified_quotes == []
    assert both.rests_on == ["vendor_statement"]
    assert check("INCONCLUSIVE", [], []).verified is True


# 2. Source kinds ----------------------------------------------------------------------------

OPINION = ("Opinion. In our opinion, in all material respects, the controls stated in the "
           "description operated effectively throughout the period.")
TESTS = "CC6.1 Inspected the storage encryption settings of every database. No exceptions noted."
ASSERTION = ("Section II - Management's Assertion. We have prepared the accompanying "
             "description of the Acme Vault storage system.")
COVER = ("This document is an excerpt prepared by Acme Cloud Storage Inc. for prospective "
         "customers. Service auditor: Halvorsen & Pike LLP.")
CLAIM = "Acme is ISO 27001 certified and our SOC 2 auditor noted no exceptions."


@pytest.mark.parametrize("name, excerpt, kind", [
    ("soc2_type2_excerpt.pdf (page 2)", OPINION, "attested"),
    ("SOC 2 Type II report.pdf § Section IV", TESTS, "attested"),
    ("SOC1-report-2023.pdf", OPINION, "attested"),
    ("isae_3402_report.pdf", TESTS, "attested"),
    ("soc2_type2_excerpt.pdf (page 3)", ASSERTION, "vendor_statement"),
    ("soc2_type2_excerpt.pdf (page 1)", COVER, "vendor_statement"),
    ("soc2_bridge_letter.pdf", OPINION, "vendor_statement"),
    ("ISO27001_Certificate.pdf", "", "attested"),
    ("iso-iec-27001 cert 2024.pdf", "", "attested"),
    ("iso_27001_statement_of_applicability.xlsx", "", "vendor_statement"),
    ("certificate_management_policy.md", "", "vendor_statement"),
    ("pentest_attestation_letter_2024.pdf", "", "attested"),
    ("Third-party penetration test summary.pdf", "", "attested"),
    ("penetration_test_report.pdf", "", "vendor_statement"),
    ("penetration_testing_standard.md", "", "vendor_statement"),
    ("PCI_DSS_AOC_2024.pdf", "", "attested"),
    ("independent_auditor's_report.pdf", "", "attested"),
    ("internal_audit_report.pdf", "", "vendor_statement"),
    ("self_assessment_attestation.pdf", "", "vendor_statement"),
    ("information_security_policy.md", CLAIM, "vendor_statement"),
    ("security_overview.pdf", OPINION, "vendor_statement"),
    ("vendor_answers.xlsx", OPINION, "vendor_statement"),
])
def test_source_kind_rules(name, excerpt, kind):
    assert source_kind(name, excerpt) == kind


def test_a_follow_up_is_the_vendors_statement_whatever_it_claims():
    assert source_kind("soc2_report.pdf", OPINION, followup=True) == "vendor_statement"
    excerpt = Candidate(id="c-1", type="follow_up_response", source="soc2_report.pdf",
                        text=OPINION, metadata={"source_type": FOLLOWUP_SOURCE_TYPE})
    [document] = prompt_sources([excerpt], [])
    assert (document.heading, document.source_kind) == ("Document 1", "vendor_statement")


# 3. End to end: `evidence assess` through the real openai client ----------------------------

VENDOR = "acme"
ROUND_1 = "Yes, all customer data at rest is encrypted with AES-256."
ROUND_3 = "Correction: the archive database is not encrypted at rest yet; planned for Q4."
SOC2_TESTS = ("CC6.1 Inspected the storage encryption settings of every production "
              "database. No exceptions noted.")
ANSWER = {"verdict": "NOT_MET",
          "reasoning": "Round 3 withdraws round 1's claim for the archive database.",
          "contradictions": ["Round 1 says all data at rest is encrypted; round 3 says the "
                             "archive database is not."],
          "cited_rounds": [1, 3]}
TRUE_QUOTES = [{"source": "Round 3", "quote": "the archive database is not encrypted at rest"},
               {"source": "Round 1", "quote": "all customer data at rest is encrypted"},
               {"source": "Document 2",
                "quote": "Inspected the storage encryption settings of every production "
                         "database. No exceptions noted."}]


@pytest.fixture
def cli(workbench: Workbench, tmp_path, monkeypatch, llm_stub) -> Workbench:
    """A policy, a SOC 2 excerpt in its auditor's voice and two rounds that contradict each
    other, in a store `evidence` opens, with the stub as its language model."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "encryption_policy.md").write_text(
        "# Encryption\n\nProduction databases encrypt data at rest using AES-256.\n",
        encoding="utf-8")
    (folder / "soc2_type2_report.md").write_text(
        f"# Section IV - Tests of controls\n\n{SOC2_TESTS}\n", encoding="utf-8")
    workbench.ingest_documents(VENDOR, [folder])
    for number, answer in ((1, ROUND_1), (3, ROUND_3)):
        workbench.ingest_questionnaire(payloads.round_payload(
            number, [payloads.response(AES_CRITERION, answer, AES_CRITERION)]))
    point_the_command_at(workbench, monkeypatch)
    monkeypatch.setenv("EVIDENCE_LLM_BASE_URL", llm_stub.base_url)
    monkeypatch.setenv("EVIDENCE_LLM_MODEL", llm_stub.model)
    return workbench


def assess(capsys) -> dict:
    code, [line], err = run(capsys, "assess", "--vendor", VENDOR, "--criterion", AES_CRITERION)
    assert code == 0, err
    return line


def test_true_quotes_verify_and_the_verdict_counts_as_given(cli, capsys, llm_stub):
    code, prompt, _ = run_main(capsys, "retrieve", "--vendor", VENDOR, "--criterion",
                               AES_CRITERION, "--format", "prompt")
    assert code == 0
    assert "[Document 2: soc2_type2_report.md" in prompt  # the quotes name what it shows
    llm_stub.enqueue({**ANSWER, "quotes": TRUE_QUOTES})

    line = assess(capsys)

    assert (line["verdict"], line["verified"], line["counted_as"]) == (
        "NOT_MET", True, "NOT_MET")
    assert line["unverified_quotes"] == []
    assert [(q["source"], q["verified"], q["source_kind"]) for q in line["quotes"]] == [
        ("Round 3", True, "vendor_statement"), ("Round 1", True, "vendor_statement"),
        ("Document 2", True, "attested")]
    assert line["quotes"][2]["source_label"].startswith("Document 2: soc2_type2_report.md")
    assert line["rests_on"] == ["attested", "vendor_statement"]
    # The schema sent asks for the quotes and says what they must be.
    schema = llm_stub.requests[0].response_format["json_schema"]["schema"]
    assert "quotes" in schema["required"]
    assert "exact words" in schema["properties"]["quotes"]["description"]
    [item] = [d for name, d in schema["$defs"].items() if name == "VerdictQuote"]
    assert item["required"] == ["source", "quote"] and item["additionalProperties"] is False
    assert "'Round 3'" in item["properties"]["source"]["description"]

    # Read back from the store: every field as given, without asking again.
    again = assess(capsys)
    assert again["cached"] is True and len(llm_stub.requests) == 1
    for key in ("verified", "counted_as", "quotes", "unverified_quotes", "rests_on"):
        assert again[key] == line[key]


def test_a_fabricated_quote_is_unverified_and_counted_inconclusive(cli, capsys, llm_stub):
    forged = {"source": "Round 3", "quote": "the archive database is encrypted at rest"}
    llm_stub.enqueue({**ANSWER, "verdict": "MET", "quotes": [TRUE_QUOTES[1], forged]})

    line = assess(capsys)

    assert (line["verdict"], line["verified"], line["counted_as"]) == (
        "MET", False, "INCONCLUSIVE")
    assert [q["verified"] for q in line["quotes"]] == [True, False]
    [why] = line["unverified_quotes"]
    assert (why["source"], why["quote"]) == ("Round 3", forged["quote"])
    assert "not in Round 3's words" in why["reason"]
    assert line["rests_on"] == ["vendor_statement"]

    status = cli.verdicts.latest(VENDOR, AES_CRITERION)
    assert (status.verdict.verdict, status.verdict.counted_as) == ("MET", "INCONCLUSIVE")
    assert status.summary.startswith("INCONCLUSIVE (unverified: stub-model said MET")
    # (The command's prompt is not this workbench's, whose reranker differs: it is stale here.)
    assert verdict_cell(status).startswith("INCONCLUSIVE (unverified: the model said MET)")
    again = assess(capsys)
    assert (again["cached"], again["verified"], again["counted_as"]) == (
        True, False, "INCONCLUSIVE")


def test_a_quote_named_as_another_source_is_misattributed(cli, capsys, llm_stub):
    misnamed = {"source": "Document 1", "quote": ROUND_1}
    llm_stub.enqueue({**ANSWER, "verdict": "MET", "cited_rounds": [], "quotes": [misnamed]})

    line = assess(capsys)

    assert (line["verified"], line["counted_as"]) == (False, "INCONCLUSIVE")
    [why] = line["unverified_quotes"]
    assert "attributed to the wrong source" in why["reason"] and "Round 1" in why["reason"]


def test_an_answer_without_quotes_still_validates_and_counts_inconclusive(cli, capsys,
                                                                          llm_stub):
    llm_stub.enqueue(ANSWER)  # a model that leaves the quotes out

    line = assess(capsys)

    assert (line["verdict"], line["verified"], line["counted_as"]) == (
        "NOT_MET", False, "INCONCLUSIVE")
    assert [(u["source"], u["quote"]) for u in line["unverified_quotes"]] == [
        ("Round 1", ""), ("Round 3", "")]
    assert line["quotes"] == [] and line["rests_on"] == []


def test_a_verdict_stored_before_quotes_reads_back_unchecked_and_counts_as_given(cli):
    trace = cli.retrieve(VENDOR, AES_CRITERION)
    given = Verdict(vendor_id=VENDOR, criterion=AES_CRITERION,
                    criterion_hash=trace.criterion_hash, strategy=trace.strategy,
                    verdict="NOT_MET", reasoning="Round 3 withdraws it.", contradictions=[],
                    cited_rounds=[3], model="old-model", prompt_sha256=prompt_sha256(trace.prompt),
                    assessed_at="2024-05-01T00:00:00.000000+00:00")
    # The record exactly as verdicts were stored before they quoted.
    metadata = given.model_dump(include={"vendor_id", "criterion", "criterion_hash", "strategy",
                                         "verdict", "reasoning", "model", "prompt_sha256",
                                         "assessed_at"})
    metadata |= {"contradictions": "[]", "cited_rounds": "[3]"}
    cli.store.verdicts(VENDOR, create=True).write("v-old", json.dumps(ANSWER), metadata)

    [read] = VerdictStore(cli.store, VENDOR).for_criterion(trace.criterion_hash,
                                                           trace.strategy)
    assert (read.verified, read.counted_as, read.quotes, read.rests_on) == (
        None, "NOT_MET", [], [])
    status = cli.verdicts.latest(VENDOR, AES_CRITERION)
    assert status.summary == "NOT_MET (old-model, quotes not checked, current)"
    assert verdict_cell(status) == "NOT_MET"
    assert read.to_json_dict()["counted_as"] == "NOT_MET"


def test_the_dashboard_lines_escape_and_name_each_source():
    verdict = Verdict.model_validate({
        "vendor_id": VENDOR, "criterion": AES_CRITERION, "criterion_hash": "h",
        "strategy": "precedence", "verdict": "MET", "reasoning": "r", "contradictions": [],
        "cited_rounds": [], "model": "m", "prompt_sha256": "s", "assessed_at": "t",
        "verified": False, "rests_on": [],
        "quotes": [{"source": "Document 9", "quote": "*all*\ndata", "verified": False}],
        "unverified_quotes": [{"source": "Document 9", "quote": "*all*\ndata",
                               "reason": "names no source of the prompt"}]})
    assert quote_lines(verdict) == [
        "- not verified · Document 9 (no such source): \u201c\\*all\\* data\u201d"]
    assert unverified_lines(verdict) == [
        "- Document 9 \u201c\\*all\\* data\u201d: names no source of the prompt"]
    assert verdict.counted_text == "INCONCLUSIVE (unverified: the model said MET)"


def test_the_answer_schema_keeps_every_contract_field():
    fields = set(VerdictAnswer.model_fields)
    assert fields >= {"verdict", "reasoning", "contradictions", "cited_rounds", "quotes"}
    assert VerdictAnswer.model_validate({"verdict": "MET", "reasoning": "r",
                                         "contradictions": [], "cited_rounds": []}).quotes == []


def test_sources_are_numbered_as_the_prompt_heads_them():
    hit = followup(2, "Keys are rotated every ninety days.", source="caiq.xlsx › CAIQ › CEK-03.1",
                   questionnaire_id="CEK-03.1")
    documents = [Candidate(id="c-1", type="document", source="policy.md", text="one two three"),
                 Candidate(id="c-2", type="document", source="soc3.pdf", page=4, text=OPINION)]
    sources = prompt_sources(documents, [hit])
    prompt = format_prompt(AES_CRITERION, documents, [hit])
    for source in sources:
        assert f"[{source.heading.replace('Round', 'ROUND')}" in prompt.replace(
            "MOST RECENT - ", "") or f"[{source.label}]" in prompt
    assert [(s.heading, s.source_kind) for s in sources] == [
        ("Round 2", "vendor_statement"), ("Document 1", "vendor_statement"),
        ("Document 2", "attested")]
    by_name = check_quotes([VerdictQuote(source="caiq.xlsx › CAIQ › CEK-03.1",
                                         quote="rotated every ninety days")],
                           verdict="MET", cited_rounds=[2], sources=sources, prompt=prompt)
    assert by_name.verified is True
