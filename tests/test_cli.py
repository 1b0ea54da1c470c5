"""The `evidence` command against CONTRACT.md, run as a user runs it: a separate process, a
store on disk, no FlashRank model (so retrieval reports its fallback).

Refusals happen before any model loads, so they are tested broadly on a store built with the
fake embedder. Runs that embed load the real all-MiniLM-L6-v2 (marked `model`); they share one
store built through the CLI from sample_data and are kept few."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cli import environment, json_lines, run_main, run_process

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data"
ACME = SAMPLE / "vendors" / "acme"
ROUNDS = [ACME / "questionnaires" / f"round_{n}.json" for n in range(1, 6)]
CRITERIA = [line.strip() for line in
            (SAMPLE / "criteria.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
AES = CRITERIA[0]
MESSY_AES = "  does the vendor ENCRYPT data at rest\t using   AES-256?  "
KMS_QUESTION = "Is customer content in Amazon S3 protected with SSE-KMS keys (AES-256-GCM)?"
STRATEGY_NAMES = ["semantic", "hash_extraction", "doc_boost", "tiered", "precedence"]

TOP_KEYS = {"vendor_id", "criterion", "criterion_hash", "strategy", "reranker", "context",
            "current_answer", "followups", "evidence", "timings_ms"}
FOLLOWUP_KEYS = {"id", "round_number", "tier", "hash_match", "question_similarity",
                 "criterion_question_text", "question_text", "answer_text", "later_answer"}
EVIDENCE_KEYS = {"id", "type", "source", "text", "first_stage_score", "rerank_score", "boost",
                 "final_score", "rank_before_boost", "rank_after_boost"}
STATUS_KEYS = {"vendor_id", "documents", "chunks", "followup_responses", "rounds", "by_type"}


# Running the command -------------------------------------------------------------------------

def base_env() -> dict[str, str]:
    return environment(COLUMNS="200")  # help tables are not wrapped mid-option


@dataclass
class Space:
    """A working folder, its store and an empty FlashRank cache, as a user would have them."""

    root: Path
    store: Path
    cache: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = base_env()
        env["EVIDENCE_STORE"] = str(self.store)
        env["EVIDENCE_RERANKER_CACHE_DIR"] = str(self.cache)
        env.update(extra)
        return env

    def run(self, *args: str | Path, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
        return run_process(*args, env=env if env is not None else self.env(),
                           cwd=cwd or self.root)

    def ok(self, *args: str | Path) -> subprocess.CompletedProcess:
        result = self.run(*args)
        assert result.returncode == 0, f"{args}: exit {result.returncode}\n{result.stderr}"
        return result

    def status(self) -> list[str]:
        return self.ok("status").stdout.splitlines()


def make_space(root: Path) -> Space:
    root.mkdir(parents=True, exist_ok=True)
    cache = root / "flashrank-empty"
    cache.mkdir()
    return Space(root=root, store=root / ".evidence", cache=cache)


def stderr_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def assert_refused(result: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2, nothing on stdout, one plain line on stderr naming the needles."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, f"exit {result.returncode}: {result.stderr}"
    lines = stderr_lines(result)
    assert len(lines) == 1, f"expected one line on stderr, got {lines}"
    assert result.stdout == ""
    for needle in needles:
        assert needle.lower() in lines[0].lower(), f"{needle!r} not named in {lines[0]!r}"


def status_in_process(store: Path, capsys) -> list[str]:
    """`evidence --store STORE status` through the CLI's own main(), in this process: the same
    output as the command, without starting a process for every refusal checked."""
    code, out, _ = run_main(capsys, "--store", store, "status", clear=True)
    assert code == 0
    return out.splitlines()


def expected_hash(criterion: str) -> str:
    normalized = " ".join(criterion.lower().split())
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()[:16]


# Checking what `retrieve` prints -------------------------------------------------------------

def context_entries(context: str) -> list[tuple[str, str]]:
    """(source, content) of every <index_N> entry, after the <current_answer> the project's
    strategies lead with."""
    elements = list(ET.fromstring(f"<root>{context}</root>"))
    if elements and elements[0].tag == "current_answer":
        elements = elements[1:]
    entries = []
    for i, element in enumerate(elements, start=1):
        assert element.tag == f"index_{i}"
        entries.append(((element.findtext("source") or "").strip(),
                        (element.findtext("content") or "").strip()))
    return entries


def progression(content: str) -> list[tuple[int, str, str]]:
    """(round, question, answer) of a '(Multiple Rounds)' entry, in the order shown."""
    heading = r"\[Round (\d+)(?:\]| \([^\n]*\])"  # the seeds', or the project's labelled one
    blocks = re.split(r"\n\n(?=\[Round \d+(?:\]| \([^\n]*\])\n)", content)
    parsed = []
    for block in blocks:
        match = re.fullmatch(rf"{heading}\nQuestion: (.*?)\nAnswer: (.*)", block.strip(),
                             flags=re.DOTALL)
        assert match, f"not a [Round k] / Question: / Answer: block: {block!r}"
        parsed.append((int(match[1]), match[2].strip(), match[3].strip()))
    return parsed


def check_trace(trace: dict, *, strategy: str, criterion: str) -> None:
    """Every CONTRACT key, and `followups`/`evidence` exactly as the context shows them."""
    assert trace.keys() >= TOP_KEYS, TOP_KEYS - trace.keys()
    assert trace["vendor_id"] == "acme"
    assert trace["strategy"] == strategy
    assert trace["criterion"] == criterion.strip()
    assert trace["criterion_hash"] == expected_hash(criterion)
    assert trace["reranker"]["ran"] is False
    assert "total" in trace["timings_ms"] and len(trace["timings_ms"]) > 1
    assert all(isinstance(v, int | float) and v >= 0 for v in trace["timings_ms"].values())

    for hit in trace["followups"]:
        assert hit.keys() >= FOLLOWUP_KEYS, FOLLOWUP_KEYS - hit.keys()
        assert hit["tier"] in {"high", "medium", "low"}
    for chunk in trace["evidence"]:
        assert chunk.keys() >= EVIDENCE_KEYS, EVIDENCE_KEYS - chunk.keys()
        assert chunk["rerank_score"] is None  # no reranker ran
        if chunk["type"] != "followup_document" or strategy in ("semantic", "hash_extraction",
                                                                "tiered"):
            assert chunk["boost"] == 1.0

    entries = context_entries(trace["context"])
    followups, evidence = trace["followups"], trace["evidence"]
    assert len(entries) == len(evidence) + (1 if followups else 0)
    for (source, content), chunk in zip(entries, evidence, strict=False):
        assert source.startswith(chunk["source"])
        assert content == chunk["text"].strip()
    if len(followups) == 1:
        _, content = entries[-1]
        assert followups[0]["question_text"].strip() in content
        assert followups[0]["answer_text"].strip() in content
    elif followups:
        source, content = entries[-1]
        assert source.endswith("(Multiple Rounds)")
        assert progression(content) == [
            (f["round_number"], f["question_text"].strip(), f["answer_text"].strip())
            for f in followups]


# A store built with the fake embedder, for refusals (no model loads) ---------------------------

BUILD_FAKE_STORE = """
import json, sys
from pathlib import Path
from core.config import Settings
from core.workbench import Workbench
from tests.fakes import FakeEmbedder
store, cache, docs, payload = sys.argv[1:]
bench = Workbench(Settings(store=Path(store), reranker_cache_dir=Path(cache)),
                  embedder=FakeEmbedder())
bench.ingest_documents("acme", [Path(docs)])
bench.ingest_questionnaire(json.loads(Path(payload).read_text()))
"""


@pytest.fixture(scope="module")
def fake_space(tmp_path_factory) -> Space:
    space = make_space(tmp_path_factory.mktemp("cli-fake"))
    env = space.env(PYTHONPATH=str(REPO))
    built = subprocess.run(
        [sys.executable, "-c", BUILD_FAKE_STORE, str(space.store), str(space.cache),
         str(ACME / "documents"), str(ROUNDS[0])],
        cwd=space.root, env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    space.baseline = space.status()
    assert len(space.baseline) == 1 and json.loads(space.baseline[0])["vendor_id"] == "acme"
    return space


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """Bad (and a few good) input files, written once."""
    folder = tmp_path_factory.mktemp("cli-inputs")
    good = {
        "vendor_id": "acme", "round_number": 6, "timestamp": "2024-03-01T10:00:00Z",
        "responses": [
            {"criterion_question_text": AES, "question_text": "Is AES-256 still used?",
             "answer_text": "Yes."},
            {"criterion_question_text": None, "question_text": "Who is your DPO?",
             "answer_text": "Jane Doe."},
        ],
    }

    def payload(name: str, change) -> None:
        data = json.loads(json.dumps(good))
        change(data)
        (folder / name).write_text(json.dumps(data), encoding="utf-8")

    payload("good_round_6.json", lambda d: None)
    (folder / "not_json.json").write_text('{"vendor_id": "acme",', encoding="utf-8")
    payload("array.json", lambda d: d.clear())
    (folder / "array.json").write_text("[]", encoding="utf-8")
    payload("missing_timestamp.json", lambda d: d.pop("timestamp"))
    payload("missing_answer.json", lambda d: d["responses"][1].pop("answer_text"))
    payload("round_as_text.json", lambda d: d.update(round_number="6"))
    payload("responses_not_a_list.json", lambda d: d.update(responses={"a": 1}))
    payload("no_responses.json", lambda d: d.update(responses=[]))
    payload("too_many.json", lambda d: d.update(responses=[
        {"criterion_question_text": None, "question_text": f"Question {i}?",
         "answer_text": "Yes."} for i in range(101)]))
    payload("duplicate_pair.json",
            lambda d: d["responses"].append(dict(d["responses"][0], answer_text="No.")))
    payload("blank_answer.json", lambda d: d["responses"][1].update(answer_text="   "))
    payload("blank_question.json", lambda d: d["responses"][0].update(question_text=""))
    payload("round_zero.json", lambda d: d.update(round_number=0))
    payload("bad_timestamp.json", lambda d: d.update(timestamp="15/01/2024 10:30"))
    payload("bad_vendor_slash.json", lambda d: d.update(vendor_id="a/b"))
    payload("bad_vendor_long.json", lambda d: d.update(vendor_id="a" * 64))
    payload("bad_vendor_dash.json", lambda d: d.update(vendor_id="-x"))

    (folder / "notes.odt").write_bytes(b"PK\x03\x04 not a document we read")
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\ngarbage")
    (folder / "fake.pdf").write_text("just text, no PDF header", encoding="utf-8")
    (folder / "latin1.txt").write_bytes("Verschl\xfcsselung".encode("latin-1"))
    (folder / "nothing_supported").mkdir()
    (folder / "nothing_supported" / "image.png").write_bytes(b"\x89PNG")
    (folder / "blank_criteria.txt").write_text("\n   \n\n", encoding="utf-8")
    (folder / "criteria.txt").write_text(AES + "\n", encoding="utf-8")
    return folder


# --help ------------------------------------------------------------------------------------------

HELP = {
    (): ["--store", "--chroma-host", "--chroma-port"],
    ("ingest",): [],
    ("ingest", "docs"): ["--vendor", "--type", "--round"],
    ("ingest", "questionnaire"): [],
    ("status",): ["--vendor"],
    ("retrieve",): ["--vendor", "--criterion", "--criteria-file", "--strategy", "--format"],
}


def option_line(text: str, option: str) -> str:
    for line in text.splitlines():
        if re.search(rf"(^|\s){re.escape(option)}(\s|,|$)", line):
            return line
    raise AssertionError(f"{option} is not in the help:\n{text}")


@pytest.mark.parametrize("command", list(HELP), ids=lambda c: " ".join(c) or "evidence")
def test_help_describes_every_option(tmp_path, command):
    space = make_space(tmp_path)
    result = space.run(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout
    for option in HELP[command]:
        line = option_line(result.stdout, option)
        described = re.sub(r"[│╭╮╰╯─*]|<[^>]*>|--[\w-]+", " ", line)
        assert len(re.findall(r"[A-Za-z]{3,}", described)) >= 2, f"{option} undescribed: {line}"


def test_top_level_help_lists_the_contract_commands(tmp_path):
    result = make_space(tmp_path).run("--help")
    for command in ("ingest", "status", "retrieve"):
        assert re.search(rf"(^|\s){command}\s", result.stdout), f"{command} not listed"


def test_ingest_help_lists_both_ingest_commands(tmp_path):
    result = make_space(tmp_path).run("ingest", "--help")
    assert result.returncode == 0
    assert "docs" in result.stdout and "questionnaire" in result.stdout


def test_retrieve_help_names_every_strategy_and_format(tmp_path):
    text = make_space(tmp_path).run("retrieve", "--help").stdout
    for name in STRATEGY_NAMES + ["json", "xml", "prompt"]:
        assert name in text


def test_installed_console_script_runs(tmp_path):
    script = Path(sys.executable).with_name("evidence")
    space = make_space(tmp_path)
    result = subprocess.run([str(script), "--help"], cwd=tmp_path, env=space.env(),
                            capture_output=True, text=True)
    assert result.returncode == 0
    assert "retrieve" in result.stdout


# Selecting the store -----------------------------------------------------------------------------

def test_store_from_env_option_and_default(fake_space, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    env_elsewhere = fake_space.env(EVIDENCE_STORE=str(elsewhere))
    by_option = fake_space.run("--store", fake_space.store, "status", env=env_elsewhere)
    assert by_option.returncode == 0, by_option.stderr
    assert by_option.stdout.splitlines() == fake_space.baseline
    assert not elsewhere.exists()  # the option beats the environment

    default_env = fake_space.env()
    del default_env["EVIDENCE_STORE"]
    by_default = fake_space.run("status", env=default_env, cwd=fake_space.root)  # ./.evidence
    assert by_default.returncode == 0, by_default.stderr
    assert by_default.stdout.splitlines() == fake_space.baseline


def test_status_of_one_vendor(fake_space):
    result = fake_space.ok("status", "--vendor", "acme")
    assert result.stdout.splitlines() == fake_space.baseline
    line = json.loads(result.stdout)
    assert line.keys() >= STATUS_KEYS
    assert line["rounds"] == [1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("how", ["option", "env"])
def test_an_unreachable_chroma_server_is_a_program_failure(tmp_path, how):
    space = make_space(tmp_path)
    port = str(free_port())
    if how == "option":
        result = space.run("--chroma-host", "127.0.0.1", "--chroma-port", port, "status")
    else:
        result = space.run("status", env=space.env(EVIDENCE_CHROMA_HOST="127.0.0.1",
                                                   EVIDENCE_CHROMA_PORT=port))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = stderr_lines(result)
    assert len(lines) == 1 and port in lines[0]
    assert not space.store.exists()  # the server was used, not the embedded store


def test_a_missing_embedding_model_is_a_program_failure_that_writes_nothing(tmp_path, inputs):
    space = make_space(tmp_path)
    env = space.env(EVIDENCE_EMBEDDING_MODEL=str(tmp_path / "no-such-model"))
    result = space.run("ingest", "questionnaire", inputs / "good_round_6.json", env=env)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(stderr_lines(result)) == 1
    assert space.status() == []


# Refusals: exit 2, one line, nothing written ----------------------------------------------------

DOCS = str(ACME / "documents")
LONG_ID = "a" * 64

REFUSALS = {
    # options
    "unknown option": (["--bogus", "status"], ["--bogus"]),
    "unknown status option": (["status", "--bogus"], ["--bogus"]),
    "unknown retrieve option": (["retrieve", "--vendor", "acme", "--criterion", AES, "--bogus"],
                                ["--bogus"]),
    "unknown ingest option": (["ingest", "docs", "--vendor", "acme", "--bogus", DOCS],
                              ["--bogus"]),
    "retrieve without --vendor": (["retrieve", "--criterion", AES], ["--vendor"]),
    "ingest without --vendor": (["ingest", "docs", DOCS], ["--vendor"]),
    "neither criterion option": (["retrieve", "--vendor", "acme"], ["--criterion"]),
    "both criterion options": (["retrieve", "--vendor", "acme", "--criterion", AES,
                                "--criteria-file", "{inputs}/criteria.txt"], ["--criteria-file"]),
    "unknown strategy": (["retrieve", "--vendor", "acme", "--criterion", AES,
                          "--strategy", "bogus"], ["bogus"]),
    "unknown format": (["retrieve", "--vendor", "acme", "--criterion", AES, "--format", "html"],
                       ["html"]),
    "blank criterion": (["retrieve", "--vendor", "acme", "--criterion", "   "], ["criterion"]),
    "missing criteria file": (["retrieve", "--vendor", "acme", "--criteria-file",
                               "{inputs}/nope.txt"], ["nope.txt"]),
    "criteria file without criteria": (["retrieve", "--vendor", "acme", "--criteria-file",
                                        "{inputs}/blank_criteria.txt"], ["blank_criteria.txt"]),
    # vendors
    "unknown vendor": (["retrieve", "--vendor", "nobody", "--criterion", AES], ["nobody"]),
    "status of an unknown vendor": (["status", "--vendor", "nobody"], ["nobody"]),
    "retrieve vendor a/b": (["retrieve", "--vendor", "a/b", "--criterion", AES], ["a/b"]),
    "retrieve vendor -x": (["retrieve", "--vendor", "-x", "--criterion", AES], ["-x"]),
    "retrieve vendor 64 chars": (["retrieve", "--vendor", LONG_ID, "--criterion", AES],
                                 [LONG_ID]),
    "ingest vendor a/b": (["ingest", "docs", "--vendor", "a/b", DOCS], ["a/b"]),
    "ingest vendor -x": (["ingest", "docs", "--vendor", "-x", DOCS], ["-x"]),
    "ingest vendor 64 chars": (["ingest", "docs", "--vendor", LONG_ID, DOCS], [LONG_ID]),
    "ingest vendor with a space": (["ingest", "docs", "--vendor", "ac me", DOCS], ["ac me"]),
    "ingest empty vendor": (["ingest", "docs", "--vendor", "", DOCS], ["vendor"]),
    # documents
    "missing path": (["ingest", "docs", "--vendor", "acme", "{inputs}/absent"], ["absent"]),
    "one good and one missing path": (["ingest", "docs", "--vendor", "acme",
                                       str(ACME / "soc2_summary"), "{inputs}/absent"],
                                      ["absent"]),
    "unsupported explicit file": (["ingest", "docs", "--vendor", "acme",
                                   "{inputs}/notes.odt"], ["notes.odt"]),
    "folder without documents": (["ingest", "docs", "--vendor", "acme",
                                  "{inputs}/nothing_supported"], []),
    "followup_document without --round": (["ingest", "docs", "--vendor", "acme", "--type",
                                           "followup_document", DOCS], ["--round"]),
    "followup_document round 0": (["ingest", "docs", "--vendor", "acme", "--type",
                                   "followup_document", "--round", "0", DOCS], ["--round"]),
    "round that is not a number": (["ingest", "docs", "--vendor", "acme", "--type",
                                    "followup_document", "--round", "two", DOCS], ["--round"]),
    "bad --type": (["ingest", "docs", "--vendor", "acme", "--type", "policies", DOCS],
                   ["policies"]),
    "soc2_summary without a track": (["ingest", "docs", "--vendor", "acme", "--type",
                                      "soc2_summary:", DOCS], ["soc2_summary:"]),
    "corrupt pdf": (["ingest", "docs", "--vendor", "acme", DOCS, "{inputs}/corrupt.pdf"],
                    ["corrupt.pdf"]),
    "pdf that is not a pdf": (["ingest", "docs", "--vendor", "acme", "{inputs}/fake.pdf"],
                              ["fake.pdf"]),
    "text that is not UTF-8": (["ingest", "docs", "--vendor", "acme", "{inputs}/latin1.txt"],
                               ["latin1.txt"]),
    "case-only clash with an existing vendor": (["ingest", "docs", "--vendor", "ACME",
                                                 str(ACME / "soc2_summary")], ["ACME"]),
    # questionnaires: file and field (and index) named
    "not JSON": (["ingest", "questionnaire", "{inputs}/not_json.json"], ["not_json.json"]),
    "not an object": (["ingest", "questionnaire", "{inputs}/array.json"], ["array.json"]),
    "missing questionnaire file": (["ingest", "questionnaire", "{inputs}/absent.json"],
                                   ["absent.json"]),
    "missing field": (["ingest", "questionnaire", "{inputs}/missing_timestamp.json"],
                      ["missing_timestamp.json", "timestamp"]),
    "missing answer": (["ingest", "questionnaire", "{inputs}/missing_answer.json"],
                       ["missing_answer.json", "answer_text", "1"]),
    "wrong type": (["ingest", "questionnaire", "{inputs}/round_as_text.json"],
                   ["round_as_text.json", "round_number"]),
    "responses not a list": (["ingest", "questionnaire", "{inputs}/responses_not_a_list.json"],
                             ["responses_not_a_list.json", "responses"]),
    "empty responses": (["ingest", "questionnaire", "{inputs}/no_responses.json"],
                        ["no_responses.json", "responses"]),
    "101 responses": (["ingest", "questionnaire", "{inputs}/too_many.json"],
                      ["too_many.json", "101"]),
    "duplicate pair": (["ingest", "questionnaire", "{inputs}/duplicate_pair.json"],
                       ["duplicate_pair.json", "responses", "2"]),
    "blank answer": (["ingest", "questionnaire", "{inputs}/blank_answer.json"],
                     ["blank_answer.json", "answer_text", "1"]),
    "blank question": (["ingest", "questionnaire", "{inputs}/blank_question.json"],
                       ["blank_question.json", "question_text", "0"]),
    "round 0": (["ingest", "questionnaire", "{inputs}/round_zero.json"],
                ["round_zero.json", "round_number"]),
    "bad timestamp": (["ingest", "questionnaire", "{inputs}/bad_timestamp.json"],
                      ["bad_timestamp.json", "timestamp"]),
    "payload vendor a/b": (["ingest", "questionnaire", "{inputs}/bad_vendor_slash.json"],
                           ["bad_vendor_slash.json", "vendor_id"]),
    "payload vendor 64 chars": (["ingest", "questionnaire", "{inputs}/bad_vendor_long.json"],
                                ["bad_vendor_long.json", "vendor_id"]),
    "payload vendor -x": (["ingest", "questionnaire", "{inputs}/bad_vendor_dash.json"],
                          ["bad_vendor_dash.json", "vendor_id"]),
    "a good file then a bad one": (["ingest", "questionnaire", "{inputs}/good_round_6.json",
                                    "{inputs}/blank_answer.json"], ["blank_answer.json"]),
}
NEEDS_EXISTING_VENDOR = {"case-only clash with an existing vendor"}


def refusal_args(case: str, inputs: Path) -> tuple[list[str], list[str]]:
    args, needles = REFUSALS[case]
    return [a.replace("{inputs}", str(inputs)) for a in args], needles


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_and_the_store_is_unchanged(fake_space, inputs, case, capsys):
    args, needles = refusal_args(case, inputs)
    assert_refused(fake_space.run(*args), *needles)
    assert status_in_process(fake_space.store, capsys) == fake_space.baseline


@pytest.mark.parametrize("case", [c for c in REFUSALS if c not in NEEDS_EXISTING_VENDOR])
def test_refused_on_a_new_store_writes_nothing(tmp_path, inputs, case):
    space = make_space(tmp_path / "work")
    before = sorted(p.name for p in space.root.iterdir())
    args, needles = refusal_args(case, inputs)
    assert_refused(space.run(*args), *needles)
    assert not space.store.exists(), sorted(
        f"{p.relative_to(space.store)} {p.stat().st_size}" for p in space.store.rglob("*"))
    assert sorted(p.name for p in space.root.iterdir()) == before


def test_a_refused_ingest_is_refused_whatever_the_argument_order(fake_space, inputs, capsys):
    """Every path is read and checked before any is written: the bad file comes last."""
    result = fake_space.run("ingest", "docs", "--vendor", "acme", str(ACME / "soc2_summary"),
                            inputs / "fake.pdf")
    assert_refused(result, "fake.pdf")
    assert status_in_process(fake_space.store, capsys) == fake_space.baseline


def test_unchanged_documents_are_not_ingested_again(fake_space):
    """Unchanged files are recognised without loading any model: nothing is embedded."""
    env = fake_space.env(EVIDENCE_EMBEDDING_MODEL="fake-bag-of-words")
    result = fake_space.run("ingest", "docs", "--vendor", "acme", DOCS, env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {d["status"] for d in report["documents"]} == {"unchanged"}
    assert report["chunks_written"] == 0
    assert fake_space.status() == fake_space.baseline


def test_criterion_hash_definition():
    """The contract's definition, checked on its own: case and spacing only."""
    assert expected_hash(MESSY_AES) == expected_hash(AES)
    assert expected_hash(AES.replace("AES-256", "AES256")) != expected_hash(AES)


# The real model: one store built through the CLI from sample_data -------------------------------

@pytest.fixture(scope="module")
def model_space(tmp_path_factory) -> Space:
    space = make_space(tmp_path_factory.mktemp("cli-model"))
    summary = space.root / "inputs" / "overview.md"
    summary.parent.mkdir()
    summary.write_bytes((ACME / "soc2_summary" / "overview.md").read_bytes())
    space.summary = summary
    space.docs_report = json.loads(space.ok("ingest", "docs", "--vendor", "acme", DOCS).stdout)
    space.followup_report = json.loads(space.ok(
        "ingest", "docs", "--vendor", "acme", "--type", "followup_document", "--round", "2",
        ACME / "followup_documents" / "round_2").stdout)
    space.summary_report = json.loads(space.ok(
        "ingest", "docs", "--vendor", "acme", "--type", "soc2_summary:overview", summary).stdout)
    # round 5 twice: the same (vendor, content, round) replaces, never duplicates
    space.rounds_output = space.ok("ingest", "questionnaire", *ROUNDS, ROUNDS[-1]).stdout
    space.status_lines = space.status()
    return space


@pytest.fixture(scope="module")
def retrievals(model_space, tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every retrieve run at once, before any test changes the store."""
    folder = tmp_path_factory.mktemp("criteria")
    all_criteria = folder / "all.txt"
    all_criteria.write_text("\n" + "\n\n".join([MESSY_AES] + CRITERIA[1:]) + "\n  \n\t\n",
                            encoding="utf-8")
    two = folder / "two.txt"
    two.write_text(f"{AES}\n\n{KMS_QUESTION}\n", encoding="utf-8")
    runs = {
        "file": ("--criteria-file", all_criteria),
        "xml": ("--criterion", MESSY_AES, "--format", "xml"),
        "prompt": ("--criterion", AES, "--format", "prompt"),
        **{name: ("--criteria-file", two, "--strategy", name)
           for name in STRATEGY_NAMES if name != "precedence"},
    }
    return {key: model_space.run("retrieve", "--vendor", "acme", *args)
            for key, args in runs.items()}


@pytest.mark.model
def test_ingest_docs_reports_every_document(model_space):
    report = model_space.docs_report
    assert report["vendor_id"] == "acme" and report["type"] == "tc_files"
    sources = {d["source"] for d in report["documents"]}
    assert sources == {p.name for p in (ACME / "documents").iterdir()}
    assert {d["status"] for d in report["documents"]} == {"added"}
    assert report["chunks_written"] == sum(d["chunks"] for d in report["documents"]) > 0
    assert next(d for d in report["documents"]
                if d["source"] == "soc2_type2_excerpt.pdf")["pages"] == 8


@pytest.mark.model
def test_ingest_followup_document_with_its_round(model_space):
    report = model_space.followup_report
    assert report["type"] == "followup_document" and report["round_number"] == 2
    assert [d["source"] for d in report["documents"]] == ["kms_key_configuration.md"]
    assert model_space.summary_report["type"] == "soc2_summary:overview"


@pytest.mark.model
def test_ingest_questionnaire_prints_one_line_per_round(model_space):
    lines = [json.loads(line) for line in model_space.rounds_output.splitlines()]
    expected = [{"indexed_count": len(json.loads(p.read_text())["responses"]),
                 "round_number": n, "vendor_id": "acme"}
                for n, p in enumerate(ROUNDS + [ROUNDS[-1]], start=1)]
    expected[-1]["round_number"] = 5
    assert lines == expected


@pytest.mark.model
def test_status_counts_what_was_ingested(model_space):
    assert len(model_space.status_lines) == 1
    status = json.loads(model_space.status_lines[0])
    assert status.keys() >= STATUS_KEYS
    docs = model_space.docs_report["chunks_written"]
    kms = model_space.followup_report["chunks_written"]
    summary = model_space.summary_report["chunks_written"]
    per_round = {n: len(json.loads(p.read_text())["responses"])
                 for n, p in enumerate(ROUNDS, start=1)}
    assert status["vendor_id"] == "acme"
    assert status["documents"] == len(model_space.docs_report["documents"]) + 2
    assert status["chunks"] == docs + kms + summary
    assert status["followup_responses"] == sum(per_round.values())  # round 5 not doubled
    assert status["rounds"] == [1, 2, 3, 4, 5]
    assert status["by_type"] == {
        "tc_files": docs, "followup_document": kms, "soc2_summary:overview": summary,
        **{f"followup_response:{n}": count for n, count in per_round.items()},
    }


@pytest.mark.model
def test_reingesting_unchanged_documents_changes_nothing(model_space):
    before = model_space.status()
    report = json.loads(model_space.ok("ingest", "docs", "--vendor", "acme", DOCS).stdout)
    assert {d["status"] for d in report["documents"]} == {"unchanged"}
    assert report["chunks_written"] == 0
    assert model_space.status() == before


@pytest.mark.model
def test_retrieve_json_one_line_per_criterion(retrievals):
    result = retrievals["file"]
    assert result.returncode == 0, result.stderr
    traces = json_lines(result.stdout)
    assert len(result.stdout.splitlines()) == len(traces) == len(CRITERIA)
    for trace, criterion in zip(traces, [MESSY_AES] + CRITERIA[1:], strict=True):
        check_trace(trace, strategy="precedence", criterion=criterion)


@pytest.mark.model
def test_retrieve_links_case_and_spacing_variants_only(retrievals):
    traces = json_lines(retrievals["file"].stdout)
    aes = traces[0]
    assert aes["criterion_hash"] == expected_hash(AES)  # the messy spelling links
    assert [f["round_number"] for f in aes["followups"]] == [3, 4, 5]
    assert all(f["hash_match"] for f in aes["followups"])
    by_text = {t["criterion"]: t for t in traces}
    typo_fixed, edited = by_text[CRITERIA[2]], by_text[CRITERIA[3]]
    assert not any(f["hash_match"] for f in typo_fixed["followups"] + edited["followups"])
    assert {f["round_number"] for f in by_text[CRITERIA[5]]["followups"]
            if f["hash_match"]} == {1, 4}


@pytest.mark.model
def test_retrieve_reports_the_reranker_fallback(retrievals):
    result = retrievals["file"]
    traces = json_lines(result.stdout)
    reason = traces[0]["reranker"]["reason"]
    assert traces[0]["reranker"]["ran"] is False
    assert "ms-marco-TinyBERT-L-2-v2" in reason
    notes = stderr_lines(result)
    assert len(notes) == 1 and "reranker" in notes[0].lower()
    assert reason.rstrip(".") in notes[0]
    assert "Traceback" not in result.stderr


@pytest.mark.model
def test_retrieve_xml_prints_the_context(retrievals):
    result = retrievals["xml"]
    assert result.returncode == 0, result.stderr
    entries = context_entries(result.stdout)
    source, content = entries[-1]
    assert source.endswith("(Multiple Rounds)")
    assert [r for r, _, _ in progression(content)] == [3, 4, 5]
    assert not any(s.endswith("(Multiple Rounds)") for s, _ in entries[:-1])
    same_criterion = json_lines(retrievals["file"].stdout)[0]
    assert result.stdout.strip() == same_criterion["context"].strip()


@pytest.mark.model
def test_retrieve_prompt_has_the_seed_003_sections(retrievals):
    result = retrievals["prompt"]
    assert result.returncode == 0, result.stderr
    text = result.stdout
    marks = ["Source 1: Direct Vendor Responses", "CURRENT ANSWER - ROUND 5",
             "Source 2: General Documentation", "Criterion to Evaluate",
             "MET, NOT_MET, or INCONCLUSIVE"]
    positions = [text.find(mark) for mark in marks]
    assert -1 not in positions, [m for m, p in zip(marks, positions, strict=True) if p < 0]
    assert positions == sorted(positions)
    assert AES in text[positions[3]:positions[4]]
    assert "AES-128" in text[positions[0]:positions[2]]  # round 3's contradiction is shown


@pytest.mark.model
@pytest.mark.parametrize("strategy", [s for s in STRATEGY_NAMES if s != "precedence"])
def test_every_strategy_works(retrievals, strategy):
    result = retrievals[strategy]
    assert result.returncode == 0, result.stderr
    traces = json_lines(result.stdout)
    assert len(traces) == 2
    for trace, criterion in zip(traces, [AES, KMS_QUESTION], strict=True):
        check_trace(trace, strategy=strategy, criterion=criterion)
    aes, kms = traces
    if strategy in ("semantic", "doc_boost"):
        assert aes["followups"] == []  # no precedence in these designs
    else:
        assert 0 < len(aes["followups"]) <= 3
    if strategy == "hash_extraction":
        assert [f["round_number"] for f in aes["followups"]] == [3, 4, 5]
    uploaded = [c for c in kms["evidence"] if c["type"] == "followup_document"]
    assert uploaded, [c["source"] for c in kms["evidence"]]
    expected_boost = 1.15 if strategy == "doc_boost" else 1.0
    assert all(c["boost"] == pytest.approx(expected_boost) for c in uploaded)


@pytest.mark.model
def test_a_changed_file_replaces_its_old_chunks(model_space):
    """Last in the file: it changes the shared store."""
    before = json.loads(model_space.status()[0])
    old_chunks = model_space.summary_report["chunks_written"]
    model_space.summary.write_text("# SOC 2 overview\n\nRevised: one short paragraph only.\n",
                                   encoding="utf-8")
    report = json.loads(model_space.ok("ingest", "docs", "--vendor", "acme", "--type",
                                       "soc2_summary:overview", model_space.summary).stdout)
    assert [(d["source"], d["status"], d["chunks"]) for d in report["documents"]] == [
        ("overview.md", "replaced", 1)]
    after = json.loads(model_space.status()[0])
    assert after["documents"] == before["documents"]
    assert after["by_type"]["soc2_summary:overview"] == 1
    assert after["chunks"] == before["chunks"] - old_chunks + 1
