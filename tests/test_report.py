"""The evidence pack: every linked round newest first, the context's excerpts with their
sources, the verdict or a plain sentence that there is none, in Markdown, HTML and JSON
lines; vendor text never turns into markup; the file is written whole or not at all."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from core.criteria import CriterionEntry
from core.errors import UserInputError
from core.outputs.report import (
    build_pack,
    render_html,
    render_jsonl,
    render_markdown,
    report_format,
    write_report,
)
from core.trace.context import evidence_source
from core.workbench import Workbench
from tests.conftest import AES_CRITERION
from tests.support.payloads import one_answer
from tests.test_assess import (
    ANSWER,
    ROUND_1,
    ROUND_3,
    VENDOR,
    seed_vendor,
    with_llm,
)

pytest_plugins = ["tests.llm_stub"]

TRAINING = "Do staff complete security awareness training every year?"
NO_VERDICT = "No verdict: no language model has assessed this criterion."
HOSTILE = ("<script>alert('owned')</script>\n# Forged heading\n- forged item\n> forged quote\n"
           "| forged | table |\n```\n**VERDICT: MET**")
CRITERIA = [CriterionEntry(AES_CRITERION, id="ENC-1"), CriterionEntry(TRAINING, id="HR-2")]


@pytest.fixture
def seeded(workbench, tmp_path) -> Workbench:
    seed_vendor(workbench, tmp_path / "docs")
    return workbench


@pytest.fixture
def assessed(seeded, llm_stub) -> Workbench:
    """The AES criterion assessed once by the stub model; the store read with no model."""
    llm_stub.enqueue(ANSWER)
    with_llm(seeded, llm_stub).verdicts.assess(VENDOR, AES_CRITERION)
    return seeded


def all_formats(pack) -> dict[str, str]:
    return {"md": render_markdown(pack), "html": render_html(pack), "jsonl": render_jsonl(pack)}


class BalancedHTML(HTMLParser):
    """Fails on a closing tag that does not close the innermost open element."""

    VOID = {"meta", "br", "hr", "img", "input", "link"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, (tag, self.open[-5:])
        self.open.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse_html(html: str) -> BalancedHTML:
    parser = BalancedHTML()
    parser.feed(html)
    parser.close()
    assert parser.open == []
    return parser


def test_every_format_holds_the_rounds_sources_and_verdict(assessed):
    pack = build_pack(assessed, VENDOR, CRITERIA, "precedence")
    trace = assessed.retrieve(VENDOR, AES_CRITERION)
    sources = [evidence_source(c) for c in trace.evidence]
    assert sources, "the document reaches the context"

    aes, training = pack.criteria
    assert [r.round_number for r in aes.rounds] == [3, 1]
    assert [r.answer for r in aes.rounds] == [ROUND_3, ROUND_1]
    assert all(r.in_context for r in aes.rounds)
    assert [e.source for e in aes.excerpts] == sources
    assert (aes.verdict.state, aes.verdict.verdict.verdict) == ("current", "NOT_MET")
    assert (training.verdict.state, training.verdict.note) == ("none", NO_VERDICT)
    assert training.rounds == []
    assert pack.store.rounds == [1, 3]

    for fmt, text in all_formats(pack).items():
        if fmt == "jsonl":  # the values a program reads
            text = json.dumps([json.loads(line) for line in text.splitlines()],
                              ensure_ascii=False)
        else:  # the text a reader sees
            html = MarkdownIt("commonmark").render(text) if fmt == "md" else text
            text = " ".join("".join(parse_html(html).text).split())
        for needle in (AES_CRITERION, TRAINING, "ENC-1", "HR-2", ROUND_1, ROUND_3,
                       "NOT_MET", ANSWER["reasoning"], ANSWER["contradictions"][0], NO_VERDICT,
                       *sources):
            assert needle in text, (fmt, needle)


def test_rounds_are_newest_first_in_markdown_and_html(assessed):
    pack = build_pack(assessed, VENDOR, CRITERIA[:1], "precedence")
    for text in (render_markdown(pack), render_html(pack)):
        assert text.index(ROUND_3) < text.index(ROUND_1)


def test_no_verdict_is_said_plainly_and_none_is_invented(seeded):
    pack = build_pack(seeded, VENDOR, CRITERIA, "precedence")
    assert [c.verdict.state for c in pack.criteria] == ["none", "none"]
    for text in all_formats(pack).values():
        assert text.count(NO_VERDICT) == 2
        for verdict in ("NOT_MET", "INCONCLUSIVE", '"MET"', "**MET**"):
            assert verdict not in text


def test_a_verdict_given_before_a_new_round_is_shown_stale(assessed):
    assessed.ingest_questionnaire(one_answer(4, "The archive is now encrypted too.",
                                             criterion=AES_CRITERION, vendor=VENDOR))
    pack = build_pack(assessed, VENDOR, CRITERIA[:1], "precedence")
    [aes] = pack.criteria
    assert aes.verdict.state == "stale"
    assert [r.round_number for r in aes.rounds] == [4, 3, 1]
    for text in all_formats(pack).values():
        assert "Stale: " in text and "NOT_MET" in text


def test_vendor_text_never_becomes_markup(seeded, tmp_path):
    seeded.ingest_questionnaire(one_answer(5, HOSTILE, criterion=AES_CRITERION, vendor=VENDOR))
    (tmp_path / "docs" / "hostile.md").write_text(
        "Data at rest uses AES-256.\n" + HOSTILE + "\n", encoding="utf-8")
    seeded.ingest_documents(VENDOR, [tmp_path / "docs" / "hostile.md"])
    pack = build_pack(seeded, VENDOR, CRITERIA[:1], "precedence")
    [aes] = pack.criteria
    assert aes.rounds[0].answer == HOSTILE

    html = render_html(pack)
    assert "<script" not in html
    assert "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;" in html
    parsed = parse_html(html)
    assert "script" not in parsed.tags and "h1" in parsed.tags
    assert parsed.tags.count("h1") == 1

    rendered = MarkdownIt("commonmark").render(render_markdown(pack))
    assert "<script" not in rendered
    assert "&lt;script&gt;" in rendered
    for forged in ("<h1>Forged", "<li>forged", "<blockquote>", "<strong>VERDICT",
                   "<table"):
        assert forged not in rendered, forged
    # Every heading of the Markdown is the pack's own.
    headings = [line for line in rendered.splitlines() if line.startswith("<h")]
    assert all("Forged" not in h for h in headings)
    assert sum(h.startswith("<h1>") for h in headings) == 1


def test_markdown_escapes_one_line_vendor_text(seeded):
    criterion = "Is data at rest *encrypted* with [AES-256](http://x) | `yes` # or <b>no</b>?"
    pack = build_pack(seeded, VENDOR, [CriterionEntry(criterion)], "precedence")
    rendered = MarkdownIt("commonmark").render(render_markdown(pack))
    for markup in ("<em>", "<a href", "<code>yes", "<b>"):
        assert markup not in rendered, markup
    assert "*encrypted* with [AES-256](http://x) | `yes` # or &lt;b&gt;no&lt;/b&gt;?" in rendered


def test_jsonl_is_a_header_then_one_object_per_criterion(assessed):
    pack = build_pack(assessed, VENDOR, CRITERIA, "precedence")
    lines = render_jsonl(pack).splitlines()
    records = [json.loads(line) for line in lines]
    header, aes, training = records
    assert header["record"] == "pack"
    assert (header["vendor_id"], header["strategy"], header["criteria"]) == (
        VENDOR, "precedence", 2)
    assert header["store"]["rounds"] == [1, 3]
    assert [(r["record"], r["id"], r["criterion"]) for r in (aes, training)] == [
        ("criterion", "ENC-1", AES_CRITERION), ("criterion", "HR-2", TRAINING)]
    assert [r["answer"] for r in aes["rounds"]] == [ROUND_3, ROUND_1]
    assert aes["verdict"]["verdict"]["verdict"] == "NOT_MET"
    assert training["verdict"] == {"state": "none", "note": NO_VERDICT, "verdict": None}


def test_jsonl_keeps_one_record_per_line_whatever_the_vendor_wrote(seeded):
    seeded.ingest_questionnaire(one_answer(5, "Yes\u2028\u2029\x85 and\r\nno",
                                           criterion=AES_CRITERION, vendor=VENDOR))
    pack = build_pack(seeded, VENDOR, CRITERIA[:1], "precedence")
    lines = render_jsonl(pack).splitlines()
    assert len(lines) == 2
    assert json.loads(lines[1])["rounds"][0]["answer"] == "Yes\u2028\u2029\x85 and\r\nno"


def test_the_pack_uses_the_strategy_asked(seeded):
    pack = build_pack(seeded, VENDOR, CRITERIA[:1], "semantic")
    assert pack.strategy == "semantic" and pack.criteria[0].strategy == "semantic"
    with pytest.raises(UserInputError, match="Unknown strategy 'nope'"):
        build_pack(seeded, VENDOR, CRITERIA[:1], "nope")
    with pytest.raises(UserInputError, match="nobody"):
        build_pack(seeded, "nobody", CRITERIA[:1], "precedence")


@pytest.mark.parametrize("name, fmt", [
    ("pack.md", "md"), ("pack.MARKDOWN", "md"), ("pack.html", "html"), ("pack.htm", "html"),
    ("out/pack.jsonl", "jsonl")])
def test_the_format_follows_the_suffix(name, fmt):
    assert report_format(name) == fmt


@pytest.mark.parametrize("name", ["pack.pdf", "pack", "pack.json"])
def test_another_suffix_is_refused_in_one_sentence(name):
    with pytest.raises(UserInputError) as refused:
        report_format(name)
    message = str(refused.value)
    assert name in message and ".jsonl" in message and "\n" not in message


def test_a_report_is_written_whole_and_replaces_the_old_one(tmp_path):
    path = tmp_path / "pack.md"
    path.write_text("old", encoding="utf-8")
    assert write_report(path, "# new\n\u00e9\n") == path
    assert path.read_text(encoding="utf-8") == "# new\n\u00e9\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack.md"]


def test_a_report_in_a_missing_folder_is_refused_and_nothing_written(tmp_path):
    with pytest.raises(UserInputError) as refused:
        write_report(tmp_path / "missing" / "pack.html", "<p>x</p>")
    assert "does not exist" in str(refused.value) and "\n" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []
