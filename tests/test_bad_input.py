"""Bad input, everywhere a user can give it, is refused in one plain sentence naming the
problem, and the store is left exactly as it was.

Three doors are tried: the library API (Workbench, raising UserInputError), the `evidence`
command (exit 2, one line on stderr starting `evidence: error:`, nothing on stdout), and the
dashboard's Evidence library uploads (the functions behind its buttons, and the page itself).
"Exactly as it was" is checked with tests/support/snapshot.py: every row of ChromaDB's
database and every record of every collection, before and after. Refusals that
test_questionnaire.py, test_documents.py and test_cli.py already cover are not repeated.

Most command-line cases run the command's own `main()` in this process with the output
captured at the file-descriptor level, which is fast; a handful run the real command in its
own process. The PDF fuzz below runs 30 hypothesis examples.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fpdf import FPDF
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pypdf import PdfReader, PdfWriter

from core.cli import main
from core.config import (
    MAX_ANSWER_CHARS,
    MAX_DOCUMENT_BYTES,
    MAX_QUESTION_CHARS,
    MAX_QUESTIONNAIRE_BYTES,
    MAX_ROUND_NUMBER,
    Settings,
)
from core.errors import UserInputError
from core.ingest.documents import DocumentFile, check_documents, prepare_document
from core.ingest.rounds.payload import load_payload_file, parse_payload
from core.ingest.uploads import (
    ingest_uploaded_documents,
    ingest_uploaded_questionnaires,
    read_questionnaires,
    read_uploaded_rounds,
)
from core.models import PayloadLimits
from core.workbench import Workbench
from tests.conftest import AES_CRITERION
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.cli import environment, error_message, run_main, run_process
from tests.support.payloads import response, round_payload
from tests.support.sentences import assert_one_sentence
from tests.support.snapshot import assert_unchanged, database_snapshot, store_snapshot

REPO = Path(__file__).resolve().parents[1]
POLICY = "# Key management\n\nCustomer data keys are rotated every 90 days and logged.\n"


# Checking a refusal ------------------------------------------------------------------------

@contextmanager
def refused(workbench: Workbench, *names: str) -> Iterator[None]:
    """The block raises UserInputError in one sentence naming `names`; the store is as before."""
    before = store_snapshot(workbench)
    with pytest.raises(UserInputError) as caught:
        yield
    assert_one_sentence(str(caught.value), *names, any_case=True)
    assert_unchanged(before, store_snapshot(workbench))


def make_workbench(store: Path, **overrides: Any) -> Workbench:
    return Workbench(Settings(store=store, reranker_cache_dir=store.parent / "no-models",
                              **overrides),
                     embedder=FakeEmbedder(), reranker=FakeReranker())


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


# Inputs --------------------------------------------------------------------------------------

def payload(vendor_id: str = "acme", round_number: int = 7, **changes: Any) -> dict[str, Any]:
    """A valid round of two responses; keyword arguments change the first response."""
    first = response("Which cipher protects stored customer data?", "AES-256 in GCM mode.",
                     AES_CRITERION) | changes
    return round_payload(round_number, [
        first, response("Who is your data protection officer?", "Jane Doe.")],
        vendor=vendor_id, timestamp="2024-03-01T10:00:00Z")


def pdf_bytes(text: str | None = "Customer data keys are rotated every 90 days.", *,
              compress: bool = True) -> bytes:
    pdf = FPDF()
    pdf.set_compression(compress)
    pdf.add_page()
    if text:
        pdf.set_font("helvetica", size=12)
        pdf.cell(text=text)
    return bytes(pdf.output())


def encrypted_pdf_bytes() -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes())))
    writer.encrypt("reviewers-only")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def pageless_pdf_bytes() -> bytes:
    out = io.BytesIO()
    PdfWriter().write(out)
    return out.getvalue()


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
DOCX = b"PK\x03\x04\x14\x00\x06\x00\x08\x00\x00\x00!\x00word/document.xml" + bytes(64)
SCRAMBLED_PDF = b"%PDF-1.7\n" + bytes(range(256)) * 8


# Document files a user may hand in, by bytes (what an upload can carry too) ...
BAD_DOCUMENT_BYTES: dict[str, tuple[str, Callable[[], bytes], list[str]]] = {
    "encrypted PDF": ("locked.pdf", encrypted_pdf_bytes, ["locked.pdf", "encrypted"]),
    "PDF without text": ("blank.pdf", lambda: pdf_bytes(None), ["blank.pdf", "no extractable"]),
    "PDF without pages": ("nopages.pdf", pageless_pdf_bytes, ["nopages.pdf", "no extractable"]),
    "PDF scrambled after its header": ("scrambled.pdf", lambda: SCRAMBLED_PDF,
                                       ["scrambled.pdf", "not a readable PDF"]),
    "PDF named .md": ("report.md", pdf_bytes, ["report.md", "rename it to .pdf"]),
    "uncompressed PDF named .txt": ("report.txt", lambda: pdf_bytes(compress=False),
                                    ["report.txt", "rename it to .pdf"]),
    "PNG image named .md": ("diagram.md", lambda: PNG, ["diagram.md", "not a text file"]),
    "Word document named .txt": ("policy.txt", lambda: DOCX, ["policy.txt", "not a text file"]),
    "NUL bytes in text": ("notes.txt", lambda: b"Keys rotate.\x00\x00\n", ["notes.txt", "NUL"]),
    "invalid UTF-8 in text": ("notes.md", lambda: "Schl\xfcssel rotate.\n".encode("latin-1"),
                              ["notes.md", "UTF-8"]),
}


def _bytes_case(case: str) -> Callable[[Path], list[Path]]:
    name, make, _ = BAD_DOCUMENT_BYTES[case]
    return lambda folder: [write(folder / "good.md", POLICY), write(folder / name, make())]


def _sparse_huge(folder: Path) -> list[Path]:
    huge = folder / "huge.txt"
    write(huge, b"")
    os.truncate(huge, 60_000_000)  # sparse: nothing is written to the disk
    return [write(folder / "good.md", POLICY), huge]


def _folder_with(make_bad: Callable[[Path], None]) -> Callable[[Path], list[Path]]:
    def build(folder: Path) -> list[Path]:
        docs = folder / "docs"
        write(docs / "good.md", POLICY)
        make_bad(docs)
        return [docs]
    return build


def _pipe(docs: Path) -> None:
    os.mkfifo(docs / "pipe.md")


def _device(docs: Path) -> None:
    os.symlink("/dev/zero", docs / "zero.md")


def _self_loop(docs: Path) -> None:
    os.symlink("loop.md", docs / "loop.md")


def _folder_loop(docs: Path) -> None:
    (docs / "sub").mkdir()
    os.symlink("..", docs / "sub" / "back")


def _broken_link(docs: Path) -> None:
    os.symlink("moved-away.md", docs / "gone.md")


def _bad_name(docs: Path) -> None:
    write(Path(os.fsdecode(os.fsencode(docs) + b"/caf\xe9.md")), POLICY)


def _explicit_loop(folder: Path) -> list[Path]:
    good = write(folder / "good.md", POLICY)
    os.symlink("pong.md", folder / "ping.md")
    os.symlink("ping.md", folder / "pong.md")
    return [good, folder / "ping.md"]


# ... and on disk (what only a path can be).
BAD_DOCUMENTS: dict[str, tuple[Callable[[Path], list[Path]], list[str]]] = {
    **{case: (_bytes_case(case), needles) for case, (_, _, needles) in BAD_DOCUMENT_BYTES.items()},
    "file over the size limit": (_sparse_huge, ["huge.txt", "60 MB", "50 MB"]),
    "pipe in a folder": (_folder_with(_pipe), ["pipe.md", "not a regular file"]),
    "link to a device in a folder": (_folder_with(_device), ["zero.md", "not a regular file"]),
    "link to itself in a folder": (_folder_with(_self_loop), ["loop.md", "loop"]),
    "folder link back to its parent": (_folder_with(_folder_loop), ["back", "loop"]),
    "broken link in a folder": (_folder_with(_broken_link), ["gone.md", "does not exist"]),
    "file name that is not UTF-8": (_folder_with(_bad_name), ["caf\\xe9.md", "UTF-8"]),
    "links to each other, named": (_explicit_loop, ["ping.md", "loop"]),
    "NUL in a path": (lambda folder: [write(folder / "good.md", POLICY), Path("bad\x00.md")],
                      ["bad\\x00.md", "NUL"]),
}


def _response(field: str, value: Any) -> Callable[[dict], None]:
    return lambda p: p["responses"][0].__setitem__(field, value)


def _top(field: str, value: Any) -> Callable[[dict], None]:
    return lambda p: p.__setitem__(field, value)


PAYLOAD_REFUSALS: dict[str, tuple[Callable[[dict], None], list[str]]] = {
    "1 MB answer": (_response("answer_text", "x" * 1_000_000),
                    ["responses[0].answer_text", "1,000,000", "10,000"]),
    "answer one character too long": (_response("answer_text", "y" * (MAX_ANSWER_CHARS + 1)),
                                      ["responses[0].answer_text", "10,001"]),
    "1 MB question": (_response("question_text", "q" * 1_000_000),
                      ["responses[0].question_text", "2,000"]),
    "question one character too long": (_response("question_text", "q" * 2001),
                                        ["responses[0].question_text", "2,001"]),
    "criterion too long": (_response("criterion_question_text", "c" * 2001),
                           ["responses[0].criterion_question_text", "2,000"]),
    "NUL in an answer": (_response("answer_text", "Yes.\x00"), ["answer_text", "NUL"]),
    "NUL in a question": (_response("question_text", "Which\x00 cipher?"),
                          ["question_text", "NUL"]),
    "NUL in a criterion": (_response("criterion_question_text", "Is\x00 data encrypted?"),
                           ["criterion_question_text", "NUL"]),
    "unpaired surrogate in an answer": (_response("answer_text", "Yes \ud800."),
                                        ["answer_text", "surrogate"]),
    "unpaired surrogate in a question": (_response("question_text", "Which \udfff?"),
                                         ["question_text", "surrogate"]),
    "unpaired surrogate in a criterion": (_response("criterion_question_text", "\udc80"),
                                          ["criterion_question_text", "surrogate"]),
    "round number above the maximum": (_top("round_number", MAX_ROUND_NUMBER + 1),
                                       ["round_number", str(MAX_ROUND_NUMBER)]),
    "round number beyond 64 bits": (_top("round_number", 2**64), ["round_number"]),
    "timestamp past year 9999 in UTC": (_top("timestamp", "9999-12-31T23:00:00-05:00"),
                                        ["timestamp", "9999"]),
    "timestamp before year 1 in UTC": (_top("timestamp", "0001-01-01T01:00:00+05:00"),
                                       ["timestamp"]),
    "answer is a list": (_response("answer_text", ["Yes."]), ["answer_text", "a string"]),
    "question is an object": (_response("question_text", {"text": "Q?"}),
                              ["question_text", "a string"]),
    "criterion is a boolean": (_response("criterion_question_text", True),
                               ["criterion_question_text"]),
    "round number is null": (_top("round_number", None), ["round_number", "null"]),
    "timestamp is a list": (_top("timestamp", ["2024-03-01"]), ["timestamp"]),
    "responses is null": (_top("responses", None), ["responses"]),
    "a response is null": (lambda p: p["responses"].__setitem__(1, None), ["responses[1]"]),
    "vendor_id is a list": (_top("vendor_id", ["acme"]), ["vendor_id"]),
    "101 responses": (_top("responses", [{"question_text": f"Question {i}?", "answer_text": "Yes."}
                                         for i in range(101)]), ["responses", "101", "100"]),
}

BAD_VENDOR_IDS = {
    "slash": "acme/evil",
    "backslash": "acme\\evil",
    "parent folder": "../acme",
    "unicode letter": "v\u00ebndor",
    "fullwidth letters": "\uff41\uff43\uff4d\uff45",
    "Cyrillic a": "\u0430cme",
    "200 characters": "a" * 200,
    "trailing newline": "acme\n",
    "NUL": "ac\x00me",
    "empty": "",
}
CASE_CLASHES = ["ACME", "Acme"]


# Stores --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def populated(tmp_path_factory) -> Workbench:
    """Vendor acme with one document and one round, shared: refusals must not change it, and
    every test compares its own before and after."""
    root = tmp_path_factory.mktemp("populated")
    workbench = make_workbench(root / "store")
    workbench.ingest_documents("acme", [write(root / "docs" / "policy.md", POLICY)])
    workbench.ingest_questionnaire(payload(round_number=1))
    return workbench


def test_the_snapshot_sees_a_write_and_ignores_a_read(tmp_path):
    """The check used everywhere below is not vacuous."""
    workbench = make_workbench(tmp_path / "store")
    workbench.ingest_questionnaire(payload(round_number=1))
    before = store_snapshot(workbench)
    workbench.status()
    workbench.retrieve("acme", AES_CRITERION)
    assert_unchanged(before, store_snapshot(workbench))
    workbench.ingest_questionnaire(payload(round_number=1, answer_text="AES-256-GCM, yes."))
    with pytest.raises(AssertionError, match="the store changed"):
        assert_unchanged(before, store_snapshot(workbench))


def test_what_the_limits_allow_is_stored_whole(workbench):
    """At the limits, nothing is refused and nothing is cut."""
    longest_answer = ("A" * (MAX_ANSWER_CHARS - 1)) + "."
    round_ = payload(round_number=MAX_ROUND_NUMBER, answer_text=longest_answer,
                     question_text="Q" * MAX_QUESTION_CHARS,
                     criterion_question_text="C" * MAX_QUESTION_CHARS)
    round_["timestamp"] = "9999-12-31T23:59:59Z"
    round_["responses"][1]["answer_text"] = "Ja \u2014 \u5bc6\u94a5 \U0001f510 \x01\x1b[0m."
    assert workbench.ingest_questionnaire(round_).indexed_count == 2
    stored = workbench.store.open_vendor("acme").chunks.get(include=["metadatas"])["metadatas"]
    assert sorted(m["answer_text"] for m in stored) == sorted(
        r["answer_text"] for r in round_["responses"])
    assert workbench.status()[0].rounds == [MAX_ROUND_NUMBER]


def test_the_pdfs_made_here_are_read_when_nothing_is_wrong(workbench, tmp_path):
    """The PDF refusals below are about their defect, not about how the files are made."""
    for name, data in (("plain.pdf", pdf_bytes()), ("raw.pdf", pdf_bytes(compress=False))):
        write(tmp_path / "docs" / name, data)
    report = workbench.ingest_documents("acme", [tmp_path / "docs"])
    assert sorted((d.source, d.status) for d in report.documents) == [
        ("plain.pdf", "added"), ("raw.pdf", "added")]


# Library API: documents ----------------------------------------------------------------------

@pytest.mark.parametrize("case", list(BAD_DOCUMENTS))
def test_a_bad_document_leaves_the_store_as_it_was(populated, tmp_path, case):
    build, needles = BAD_DOCUMENTS[case]
    paths = build(tmp_path)
    with refused(populated, *needles):
        populated.ingest_documents("acme", paths)


@pytest.mark.parametrize("case", list(BAD_DOCUMENTS))
def test_a_bad_document_creates_no_store(workbench, settings, tmp_path, case):
    build, needles = BAD_DOCUMENTS[case]
    paths = build(tmp_path / "inputs")
    with pytest.raises(UserInputError) as caught:
        workbench.ingest_documents("newco", paths)
    assert_one_sentence(str(caught.value), *needles, any_case=True)
    assert not settings.store.exists()


def test_the_document_size_limit_is_a_setting(tmp_path):
    assert Settings().max_document_bytes == MAX_DOCUMENT_BYTES
    assert Settings(max_document_bytes=1234).max_document_bytes == 1234
    big = write(tmp_path / "big.md", "x" * 2000)
    with pytest.raises(UserInputError) as caught:
        check_documents([big], doc_type="tc_files", round_number=None, max_bytes=1000)
    assert_one_sentence(str(caught.value), "big.md", "2 kB", "1 kB", any_case=True)
    with pytest.raises(UserInputError):
        prepare_document(DocumentFile(big, "big.md"), 1000, 150, max_bytes=1000)
    assert prepare_document(DocumentFile(big, "big.md"), 1000, 150, max_bytes=2000).chunks


def test_one_byte_over_the_document_limit_is_refused_and_named_exactly(tmp_path):
    """Just over the limit, both numbers are given in bytes: rounded they would be equal."""
    huge = write(tmp_path / "huge.txt", b"")
    os.truncate(huge, MAX_DOCUMENT_BYTES + 1)
    with pytest.raises(UserInputError) as caught:
        prepare_document(DocumentFile(huge, "huge.txt"), 1000, 150)
    assert_one_sentence(str(caught.value), "huge.txt", f"{MAX_DOCUMENT_BYTES + 1:,} bytes",
                        f"{MAX_DOCUMENT_BYTES:,} bytes", any_case=True)
    at_limit = write(tmp_path / "at_limit.md", "word " * 200)
    assert prepare_document(DocumentFile(at_limit, "at_limit.md"), 1000, 150,
                            max_bytes=1000).chunks


@pytest.mark.parametrize("round_number", [MAX_ROUND_NUMBER + 1, 2**64, True, "2"])
def test_a_followup_document_round_out_of_range_is_refused(populated, tmp_path, round_number):
    path = write(tmp_path / "kms.md", POLICY)
    with refused(populated, "--round"):
        populated.ingest_documents("acme", [path], doc_type="followup_document",
                                   round_number=round_number)


# Library API: questionnaire rounds -----------------------------------------------------------

@pytest.mark.parametrize("case", list(PAYLOAD_REFUSALS))
def test_a_bad_payload_leaves_the_store_as_it_was(populated, case):
    change, needles = PAYLOAD_REFUSALS[case]
    round_ = payload()
    change(round_)
    with refused(populated, "payload", *needles):
        populated.ingest_questionnaire(round_)


@pytest.mark.parametrize("case", ["1 MB answer", "NUL in an answer", "round number beyond 64 bits",
                                  "unpaired surrogate in a question"])
def test_a_bad_payload_creates_no_store(workbench, settings, case):
    change, needles = PAYLOAD_REFUSALS[case]
    round_ = payload(vendor_id="newco")
    change(round_)
    with pytest.raises(UserInputError) as caught:
        workbench.ingest_questionnaire(round_)
    assert_one_sentence(str(caught.value), *needles, any_case=True)
    assert not settings.store.exists()


def test_the_text_limits_are_settings(tmp_path):
    strict = PayloadLimits.from_settings(Settings(max_answer_chars=20, max_question_chars=60))
    assert PayloadLimits.from_settings(Settings()) == PayloadLimits()
    with pytest.raises(UserInputError) as caught:
        parse_payload(payload(answer_text="x" * 21), limits=strict)
    assert_one_sentence(str(caught.value), "answer_text", "21", "20", any_case=True)
    with pytest.raises(UserInputError) as caught:
        parse_payload(payload(question_text="q" * 61), limits=strict)
    assert_one_sentence(str(caught.value), "question_text", "60", any_case=True)
    assert parse_payload(payload(answer_text="x" * 20), limits=strict).responses


def _json_file(folder: Path, name: str, data: Any) -> Path:
    return write(folder / name, json.dumps(data))


def _big_file(folder: Path) -> Path:
    """A real 50 MB round: well-formed JSON, one enormous answer."""
    return _json_file(folder, "round_50mb.json", payload(answer_text="z" * 50_000_000))


def _pipe_file(folder: Path) -> Path:
    os.mkfifo(folder / "pipe.json")
    return folder / "pipe.json"


def _looped_file(folder: Path) -> Path:
    os.symlink("loop.json", folder / "loop.json")
    return folder / "loop.json"


def _folder_named_json(folder: Path) -> Path:
    (folder / "round.json").mkdir()
    return folder / "round.json"


def _raw(name: str, data: bytes) -> Callable[[Path], Path]:
    return lambda folder: write(folder / name, data)


GOOD_JSON = json.dumps(payload())
BAD_PAYLOAD_FILES: dict[str, tuple[Callable[[Path], Path], list[str]]] = {
    "50 MB file": (_big_file, ["round_50mb.json", "50 MB", "10 MB"]),
    "trailing comma": (_raw("comma.json", GOOD_JSON[:-1].encode() + b",}"),
                       ["comma.json", "not valid JSON"]),
    "single quotes": (_raw("quotes.json", GOOD_JSON.replace('"', "'").encode()),
                      ["quotes.json", "not valid JSON"]),
    "nested a million deep": (_raw("deep.json", b"[" * 1_000_000 + b"]" * 1_000_000),
                              ["deep.json", "nested too deeply"]),
    "a number of 5,000 digits": (_raw("digits.json", GOOD_JSON.replace(
        '"round_number": 7', '"round_number": ' + "9" * 5000).encode()),
                                 ["digits.json", "number"]),
    "raw NUL byte in a string": (_raw("nul.json", GOOD_JSON.replace("Jane", "Ja\x00ne").encode()),
                                 ["nul.json", "not valid JSON", "control character"]),
    "escaped NUL in an answer": (_raw("escaped_nul.json", GOOD_JSON.replace(
        "Jane", "Ja\\u0000ne").encode()), ["escaped_nul.json", "responses[1].answer_text", "NUL"]),
    "escaped lone surrogate in a question": (_raw("surrogate.json", GOOD_JSON.replace(
        "Who is", "Who \\ud800is").encode()),
        ["surrogate.json", "responses[1].question_text", "surrogate"]),
    "invalid UTF-8 inside an answer": (_raw("latin1.json", GOOD_JSON.replace(
        "Jane Doe", "J\u00fcrgen").encode("latin-1")), ["latin1.json", "UTF-8"]),
    "UTF-16 file": (_raw("utf16.json", GOOD_JSON.encode("utf-16")), ["utf16.json", "UTF-8"]),
    "pipe named .json": (_pipe_file, ["pipe.json", "not a regular file"]),
    "link loop named .json": (_looped_file, ["loop.json", "loop"]),
    "folder named .json": (_folder_named_json, ["round.json", "folder"]),
}


@pytest.fixture(scope="module")
def payload_files(tmp_path_factory) -> dict[str, Path]:
    """Every bad payload file, written once (one of them is 50 MB)."""
    folder = tmp_path_factory.mktemp("payload-files")
    made = {case: make(folder) for case, (make, _) in BAD_PAYLOAD_FILES.items()}
    made["good"] = _json_file(folder, "good.json", payload(round_number=8))
    return made


@pytest.mark.parametrize("case", list(BAD_PAYLOAD_FILES))
def test_a_bad_payload_file_is_refused_before_anything_is_written(populated, payload_files,
                                                                   case):
    _, needles = BAD_PAYLOAD_FILES[case]
    with refused(populated, *needles):
        for round_ in populated.load_questionnaires([payload_files["good"],
                                                     payload_files[case]]):
            populated.ingest_questionnaire(round_)


def test_an_oversized_payload_file_is_refused_by_its_size(tmp_path):
    """A sparse file: refused from its size alone, before its (empty) bytes are parsed."""
    huge = write(tmp_path / "huge.json", b"")
    os.truncate(huge, MAX_QUESTIONNAIRE_BYTES + 1)
    with pytest.raises(UserInputError) as caught:
        load_payload_file(huge)
    assert_one_sentence(str(caught.value), "huge.json", f"{MAX_QUESTIONNAIRE_BYTES:,} bytes",
                        any_case=True)


# Library API: vendor ids, retrieve, status ---------------------------------------------------

def _ingest_documents(workbench: Workbench, vendor_id: str, tmp_path: Path) -> None:
    workbench.ingest_documents(vendor_id, [write(tmp_path / "policy.md", POLICY)])


def _ingest_round(workbench: Workbench, vendor_id: str, tmp_path: Path) -> None:
    workbench.ingest_questionnaire(payload(vendor_id=vendor_id))


def _retrieve(workbench: Workbench, vendor_id: str, tmp_path: Path) -> None:
    workbench.retrieve(vendor_id, AES_CRITERION)


def _status(workbench: Workbench, vendor_id: str, tmp_path: Path) -> None:
    workbench.status(vendor_id)


OPERATIONS = {"ingest_documents": _ingest_documents, "ingest_questionnaire": _ingest_round,
              "retrieve": _retrieve, "status": _status}


@pytest.mark.parametrize(("operation", "vendor_case"), [
    (operation, vendor_case) for operation in OPERATIONS for vendor_case in BAD_VENDOR_IDS
    # Workbench.status("") means every vendor, as status(None) does; the command refuses it.
    if (operation, vendor_case) != ("status", "empty")])
def test_a_bad_vendor_id_is_refused_everywhere(populated, tmp_path, operation, vendor_case):
    with refused(populated, "vendor"):
        OPERATIONS[operation](populated, BAD_VENDOR_IDS[vendor_case], tmp_path)


@pytest.mark.parametrize("operation", list(OPERATIONS))
@pytest.mark.parametrize("vendor_id", CASE_CLASHES)
def test_a_vendor_id_differing_only_in_case_is_refused_everywhere(populated, tmp_path,
                                                                  operation, vendor_id):
    with refused(populated, vendor_id, "'acme'", "case"):
        OPERATIONS[operation](populated, vendor_id, tmp_path)


CRITERIA = {
    "empty": "",
    "white space only": " \t\n ",
    "one character too long": "x" * 2001,
    "1 MB": "Is data encrypted? " * 55_000,
    "NUL": "Is data\x00 encrypted at rest?",
}


@pytest.mark.parametrize("case", list(CRITERIA))
def test_a_bad_criterion_is_refused(populated, case):
    with refused(populated, "criterion"):
        populated.retrieve("acme", CRITERIA[case])


# The command ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cli_inputs(tmp_path_factory, payload_files) -> Path:
    """Inputs the command-line cases name, beside the payload files."""
    folder = payload_files["good"].parent
    for case, (name, make, _) in BAD_DOCUMENT_BYTES.items():
        write(folder / "docs" / case.replace(" ", "_") / name, make())
    write(folder / "good.md", POLICY)
    _sparse_huge(folder / "big")
    for name, make_bad in (("pipe", _pipe), ("loop", _folder_loop), ("bad_name", _bad_name)):
        docs = folder / "folders" / name
        write(docs / "good.md", POLICY)
        make_bad(docs)
    for name, change in (("answer_1mb", PAYLOAD_REFUSALS["1 MB answer"][0]),
                         ("nul_answer", PAYLOAD_REFUSALS["NUL in an answer"][0]),
                         ("round_1001", PAYLOAD_REFUSALS["round number above the maximum"][0]),
                         ("answer_list", PAYLOAD_REFUSALS["answer is a list"][0])):
        round_ = payload()
        change(round_)
        _json_file(folder, f"{name}.json", round_)
    _json_file(folder, "acme_upper.json", payload(vendor_id="ACME"))
    _json_file(folder, "newco.json", payload(vendor_id="newco"))
    _json_file(folder, "NEWCO_upper.json", payload(vendor_id="NEWCO"))
    write(folder / "criteria_long.txt", f"{AES_CRITERION}\n{'x' * 2001}\n")
    write(folder / "criteria_nul.txt", f"{AES_CRITERION}\nIs data\x00 encrypted?\n")
    return folder


def _docs(case: str) -> str:
    return f"{{in}}/docs/{case.replace(' ', '_')}/{BAD_DOCUMENT_BYTES[case][0]}"


CLI_REFUSALS: dict[str, tuple[list[str], list[str]]] = {
    # questionnaire rounds
    **{f"questionnaire: {case}": (["ingest", "questionnaire", "{in}/good.json",
                                   f"{{in}}/{path.name}"], needles)
       for case, (path, needles) in {
           "50 MB file": (Path("round_50mb.json"), ["round_50mb.json", "10 MB"]),
           "nested too deeply": (Path("deep.json"), ["deep.json"]),
           "a number of 5,000 digits": (Path("digits.json"), ["digits.json"]),
           "escaped lone surrogate": (Path("surrogate.json"), ["surrogate.json", "surrogate"]),
           "invalid UTF-8 inside an answer": (Path("latin1.json"), ["latin1.json", "UTF-8"]),
           "pipe": (Path("pipe.json"), ["pipe.json", "regular file"]),
           "1 MB answer": (Path("answer_1mb.json"), ["answer_1mb.json", "answer_text"]),
           "NUL in an answer": (Path("nul_answer.json"), ["nul_answer.json", "NUL"]),
           "round 1001": (Path("round_1001.json"), ["round_1001.json", "round_number"]),
           "answer is a list": (Path("answer_list.json"), ["answer_list.json", "answer_text"]),
           "vendor differing only in case": (Path("acme_upper.json"), ["ACME", "case"]),
       }.items()},
    "questionnaire: two new vendors differing only in case": (
        ["ingest", "questionnaire", "{in}/newco.json", "{in}/NEWCO_upper.json"],
        ["NEWCO", "'newco'", "case", "same batch"]),
    # acme was indexed with the fake embedder; the command's model is all-MiniLM-L6-v2
    "questionnaire: a new vendor, then one indexed with another model": (
        ["ingest", "questionnaire", "{in}/newco.json", "{in}/good.json"],
        ["'acme'", "fake-bag-of-words", "all-MiniLM-L6-v2"]),
    # documents
    **{f"docs: {case}": (["ingest", "docs", "--vendor", "acme", "{in}/good.md", _docs(case)],
                         needles)
       for case, (_, _, needles) in BAD_DOCUMENT_BYTES.items()
       if case in ("encrypted PDF", "PDF without text", "PDF named .md", "PNG image named .md")},
    "docs: file over the size limit": (["ingest", "docs", "--vendor", "acme", "{in}/big"],
                                       ["huge.txt", "60 MB", "50 MB"]),
    "docs: pipe in a folder": (["ingest", "docs", "--vendor", "acme", "{in}/folders/pipe"],
                               ["pipe.md", "regular file"]),
    "docs: folder link loop": (["ingest", "docs", "--vendor", "acme", "{in}/folders/loop"],
                               ["back", "loop"]),
    "docs: file name not UTF-8": (["ingest", "docs", "--vendor", "acme",
                                   "{in}/folders/bad_name"], ["caf\\xe9.md", "UTF-8"]),
    "docs: --round above the maximum": (["ingest", "docs", "--vendor", "acme", "--type",
                                         "followup_document", "--round", "1001", "{in}/good.md"],
                                        ["--round", "1000"]),
    **{f"docs: vendor {case}": (["ingest", "docs", "--vendor", vendor_id, "{in}/good.md"],
                                ["vendor"])
       for case, vendor_id in BAD_VENDOR_IDS.items() if case not in ("NUL", "empty")},
    # retrieve
    "retrieve: criterion of 100,000 characters": (
        ["retrieve", "--vendor", "acme", "--criterion", "x" * 100_000], ["criterion", "2000"]),
    "retrieve: criterion that is not UTF-8": (
        ["retrieve", "--vendor", "acme", "--criterion", "Is data \udcff encrypted?"],
        ["--criterion", "UTF-8"]),
    "retrieve: too long a line after a good one": (
        ["retrieve", "--vendor", "acme", "--criteria-file", "{in}/criteria_long.txt"],
        ["criteria_long.txt", "line 2"]),
    "retrieve: NUL in a criteria file": (
        ["retrieve", "--vendor", "acme", "--criteria-file", "{in}/criteria_nul.txt"],
        ["criteria_nul.txt", "line 2", "NUL"]),
    **{f"retrieve: vendor {case}": (["retrieve", "--vendor", vendor_id, "--criterion",
                                     AES_CRITERION], ["vendor"])
       for case, vendor_id in BAD_VENDOR_IDS.items() if case not in ("NUL", "empty")},
    "retrieve: vendor differing only in case": (
        ["retrieve", "--vendor", "ACME", "--criterion", AES_CRITERION], ["ACME", "case"]),
    # status
    **{f"status: vendor {case}": (["status", "--vendor", vendor_id], ["vendor"])
       for case, vendor_id in BAD_VENDOR_IDS.items() if case != "NUL"},
    "status: vendor differing only in case": (["status", "--vendor", "Acme"], ["Acme", "case"]),
}


def cli_args(case: str, inputs: Path, store: Path) -> tuple[list[str], list[str]]:
    args, needles = CLI_REFUSALS[case]
    return ["--store", str(store), *(a.replace("{in}", str(inputs)) for a in args)], needles


def assert_cli_refused(code: int, out: str, err: str, *needles: str, exit_code: int = 2) -> None:
    """Exit 2 (or `exit_code`: 1 for a failure), nothing on stdout, one line on stderr:
    `evidence: error:` and one sentence."""
    assert "Traceback" not in err, err
    assert code == exit_code, f"exit {code}: {err}"
    assert out == ""
    assert_one_sentence(error_message(err), *needles, any_case=True)


@pytest.mark.parametrize("case", list(CLI_REFUSALS))
def test_the_command_refuses_in_one_line_and_writes_nothing(populated, cli_inputs, case, capfd,
                                                            monkeypatch):
    if "another model" not in case:  # the model the store was indexed with, as a user would
        monkeypatch.setenv("EVIDENCE_EMBEDDING_MODEL", "fake-bag-of-words")
    args, needles = cli_args(case, cli_inputs, populated.settings.store)
    before = store_snapshot(populated)
    code, out, err = run_main(capfd, *args, clear=True)
    assert_cli_refused(code, out, err, *needles)
    assert_unchanged(before, store_snapshot(populated))


def test_the_document_size_setting_reaches_the_command(populated, cli_inputs, capfd,
                                                       monkeypatch):
    monkeypatch.setenv("EVIDENCE_MAX_DOCUMENT_BYTES", "40")
    before = store_snapshot(populated)
    capfd.readouterr()
    code = main(["--store", str(populated.settings.store), "ingest", "docs", "--vendor", "acme",
                 str(cli_inputs / "good.md")])
    assert_cli_refused(code, *capfd.readouterr(), "good.md", "40 bytes")
    assert_unchanged(before, store_snapshot(populated))


def command_env(cwd: Path) -> dict[str, str]:
    """The environment of the command run in its own process: no FlashRank model."""
    return environment(EVIDENCE_RERANKER_CACHE_DIR=str(cwd / "no-models"))


@pytest.mark.parametrize("case", [
    "questionnaire: 50 MB file",
    "questionnaire: two new vendors differing only in case",
    "docs: pipe in a folder",
    "docs: file name not UTF-8",
    "retrieve: criterion that is not UTF-8",
    "retrieve: too long a line after a good one",
])
def test_the_real_command_refuses_in_one_line_and_writes_nothing(populated, cli_inputs,
                                                                 tmp_path, case):
    """The installed command in its own process, for a few of the cases above."""
    args, needles = cli_args(case, cli_inputs, populated.settings.store)
    before = database_snapshot(populated.settings.store)
    result = run_process(*map(os.fsencode, args), env=command_env(tmp_path), cwd=tmp_path,
                         text=False)
    out, err = result.stdout.decode(), result.stderr.decode("utf-8", "replace")
    assert_cli_refused(result.returncode, out, err, *needles)
    assert_unchanged(before, database_snapshot(populated.settings.store))


def test_a_refused_batch_of_rounds_creates_no_store(cli_inputs, tmp_path):
    """Before, the first round was written and then the second refused."""
    store = tmp_path / "store"
    args, needles = cli_args("questionnaire: two new vendors differing only in case",
                             cli_inputs, store)
    result = run_process(*args, env=command_env(tmp_path), cwd=tmp_path, text=False)
    assert_cli_refused(result.returncode, result.stdout.decode(), result.stderr.decode(),
                       *needles)
    assert not store.exists()


# The dashboard's uploads ---------------------------------------------------------------------

def _uploaded(case: str) -> list[tuple[str, bytes]]:
    name, make, _ = BAD_DOCUMENT_BYTES[case]
    return [("good.md", POLICY.encode()), (name, make())]


@pytest.mark.parametrize("case", list(BAD_DOCUMENT_BYTES))
def test_a_bad_document_upload_is_refused(populated, case):
    needles = BAD_DOCUMENT_BYTES[case][2]
    with refused(populated, *needles):
        ingest_uploaded_documents(populated, "acme", _uploaded(case), "tc_files", None)


BAD_UPLOAD_NAMES = {
    "NUL": "bad\x00name.md",
    "line break": "two\nlines.md",
    "300 characters": "n" * 300 + ".md",
    "not UTF-8": "caf\udce9.md",
    "parent folder": "../",
}


@pytest.mark.parametrize("case", list(BAD_UPLOAD_NAMES))
def test_an_upload_name_that_cannot_be_stored_is_refused(populated, case):
    with refused(populated, "file name"):
        ingest_uploaded_documents(populated, "acme",
                                  [("good.md", POLICY.encode()),
                                   (BAD_UPLOAD_NAMES[case], POLICY.encode())],
                                  "tc_files", None)


def test_an_upload_over_the_size_setting_is_refused(populated, tmp_path):
    small = make_workbench(populated.settings.store, max_document_bytes=1000)
    with refused(small, "big.txt", "1,001 bytes", "1,000 bytes"):
        ingest_uploaded_documents(small, "acme", [("good.md", POLICY.encode()),
                                                  ("big.txt", b"x" * 1001)], "tc_files", None)


@pytest.mark.parametrize("vendor_id", [*BAD_VENDOR_IDS.values(), *CASE_CLASHES],
                         ids=[*BAD_VENDOR_IDS, *CASE_CLASHES])
def test_a_bad_vendor_id_is_refused_on_upload(populated, vendor_id):
    with refused(populated, "vendor"):
        ingest_uploaded_documents(populated, vendor_id, [("good.md", POLICY.encode())],
                                  "tc_files", None)


def _upload_payload(case: str) -> bytes:
    change, _ = PAYLOAD_REFUSALS[case]
    round_ = payload()
    change(round_)
    return json.dumps(round_).encode()


@pytest.mark.parametrize("case", list(PAYLOAD_REFUSALS))
def test_a_bad_round_upload_is_refused(populated, case):
    needles = PAYLOAD_REFUSALS[case][1]
    uploads = [("good.json", json.dumps(payload(round_number=9)).encode()),
               ("bad.json", _upload_payload(case))]
    with refused(populated, "bad.json", *needles):
        ingest_uploaded_questionnaires(populated, uploads)


UPLOADED_FILE_CASES = ["50 MB file", "nested a million deep", "a number of 5,000 digits",
                       "raw NUL byte in a string", "escaped lone surrogate in a question",
                       "invalid UTF-8 inside an answer", "UTF-16 file", "trailing comma"]


@pytest.mark.parametrize("case", UPLOADED_FILE_CASES)
def test_a_bad_round_file_upload_is_refused(populated, payload_files, case):
    path = payload_files[case]
    needles = BAD_PAYLOAD_FILES[case][1]
    uploads = [("good.json", payload_files["good"].read_bytes()),
               (path.name, path.read_bytes())]
    with refused(populated, *needles):
        ingest_uploaded_questionnaires(populated, uploads)


@pytest.mark.parametrize(("vendors", "needles"), [
    (["ACME"], ["ACME", "'acme'"]),
    (["newco", "NewCo"], ["NewCo", "'newco'"]),
    (["newco", "acme", "NEWCO"], ["NEWCO", "'newco'"]),
])
def test_round_uploads_whose_vendors_differ_only_in_case_are_refused(populated, vendors,
                                                                     needles):
    uploads = [(f"{v}_{i}.json", json.dumps(payload(vendor_id=v, round_number=9)).encode())
               for i, v in enumerate(vendors)]
    with refused(populated, "case", *needles):
        ingest_uploaded_questionnaires(populated, uploads)


def test_the_round_upload_limits_follow_the_settings(populated):
    strict = make_workbench(populated.settings.store, max_answer_chars=10,
                            max_questionnaire_bytes=100_000)
    with refused(strict, "round.json", "answer_text", "10"):
        ingest_uploaded_questionnaires(strict, [("round.json", json.dumps(
            payload(answer_text="Eleven char")).encode())])
    with pytest.raises(UserInputError) as caught:
        read_questionnaires([("round.json", b" " * 100_001)],
                            limits=PayloadLimits.from_settings(strict.settings))
    assert_one_sentence(str(caught.value), "round.json", "100,001 bytes", "100,000 bytes",
                        any_case=True)


# The page itself: the refusal is an st.error, and the counts stay ---------------------------

@pytest.fixture
def library_page(populated, monkeypatch):
    import streamlit
    from streamlit.testing.v1 import AppTest

    from dashboard import resources

    monkeypatch.setattr(resources, "make_workbench", lambda: populated)
    streamlit.cache_resource.clear()
    streamlit.cache_data.clear()
    at = AppTest.from_file(str(REPO / "dashboard" / "views" / "library.py"), default_timeout=120)
    at.session_state["vendor"] = "acme"
    at.session_state["criterion"] = AES_CRITERION
    yield at.run()
    streamlit.cache_resource.clear()
    streamlit.cache_data.clear()


@pytest.mark.parametrize(("uploader", "button", "files", "needles"), [
    ("upload_documents", "ingest_documents",
     [("good.md", POLICY.encode()), ("locked.pdf", encrypted_pdf_bytes())],
     ["locked.pdf", "encrypted"]),
    ("upload_questionnaires", "ingest_questionnaires",
     [("round_9.json", json.dumps(payload(answer_text="x" * 1_000_000)).encode())],
     ["round_9.json", "answer_text", "10,000"]),
], ids=["encrypted PDF", "1 MB answer"])
def test_the_page_shows_one_error_and_writes_nothing(populated, library_page, uploader, button,
                                                     files, needles):
    at = library_page
    before = store_snapshot(populated)
    at.file_uploader(key=uploader).set_value([(n, d, "application/octet-stream")
                                              for n, d in files])
    at.run()
    at.button(key=button).click().run()
    assert not at.exception
    assert len(at.error) == 1 and not at.success
    assert_one_sentence(at.error[0].value, *needles, any_case=True)
    assert "evidence-upload-" not in at.error[0].value
    assert_unchanged(before, store_snapshot(populated))


# Damaged PDFs: refused in one sentence or read, never a crash --------------------------------

GOOD_PDF = pdf_bytes("Backups are encrypted with AES-256 and tested every quarter.")


@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, len(GOOD_PDF) - 1), st.binary(max_size=8)),
                      min_size=1, max_size=6),
       cut=st.integers(len("%PDF-1.3"), len(GOOD_PDF)))
def test_a_damaged_pdf_is_refused_in_one_sentence_or_read(tmp_path, edits, cut):
    data = bytearray(GOOD_PDF)
    for offset, replacement in edits:
        data[offset:offset + len(replacement)] = replacement
    path = write(tmp_path / "damaged.pdf", bytes(data[:cut]))
    try:
        prepared = prepare_document(DocumentFile(path, "damaged.pdf"), 1000, 150)
    except UserInputError as exc:
        assert_one_sentence(str(exc), "damaged.pdf", any_case=True)
    else:
        assert prepared.chunks and all(chunk.text.strip() for chunk in prepared.chunks)


# Word files and web pages: bad .docx, .html and .htm files -----------------------------------
# Each is refused through the command and through the uploads, next to a good document that
# is not written either.

def docx_bytes(*paragraphs: str) -> bytes:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


GOOD_DOCX = docx_bytes("Customer data keys are rotated every 90 days and logged.")
OLE_HEADER = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # how encrypted Office files and .doc begin


def repacked(data: bytes, *, drop: str = "", add: dict[str, bytes] | None = None,
             content_types: Callable[[bytes], bytes] | None = None) -> bytes:
    """A .docx package with one part left out, parts added or its content types changed."""
    import zipfile

    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for name in source.namelist():
            part = source.read(name)
            if name == "[Content_Types].xml" and content_types:
                part = content_types(part)
            if name != drop:
                target.writestr(name, part)
        for name, part in (add or {}).items():
            target.writestr(name, part)
    return out.getvalue()


def as_docm(content_types: bytes) -> bytes:
    return content_types.replace(b"wordprocessingml.document.main+xml",
                                 b"ms-word.document.macroEnabled.main+xml")


def zip_bomb_bytes() -> bytes:
    """A real .docx with 283 MB of zeros in it, which deflate to a few hundred kB."""
    import zipfile

    out = io.BytesIO(repacked(GOOD_DOCX))
    with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED) as package:
        for number in range(3):
            with package.open(f"word/media/image{number}.bin", "w", force_zip64=True) as part:
                for _ in range(90):
                    part.write(bytes(1 << 20))
    return out.getvalue()


OFFICE_REFUSALS: dict[str, tuple[str, Callable[[], bytes], list[str]]] = {
    "encrypted Word file": ("locked.docx", lambda: OLE_HEADER + bytes(1024),
                            ["locked.docx", "encrypted", ".doc"]),
    "Word file that is not a zip": ("damaged.docx", lambda: DOCX,
                                    ["damaged.docx", "not a readable Word document"]),
    "Word file cut short": ("truncated.docx", lambda: GOOD_DOCX[: len(GOOD_DOCX) // 2],
                            ["truncated.docx", "not a readable Word document"]),
    "zip without word/document.xml": (
        "nodocument.docx", lambda: repacked(GOOD_DOCX, drop="word/document.xml"),
        ["nodocument.docx", "word/document.xml"]),
    "Word file with a VBA project": (
        "macros.docx", lambda: repacked(GOOD_DOCX, add={"word/vbaProject.bin": b"VBA"}),
        ["macros.docx", "macros", "plain"]),
    "macro-enabled .docm renamed .docx": (
        "renamed.docx", lambda: repacked(GOOD_DOCX, content_types=as_docm),
        ["renamed.docx", "macros", "plain"]),
    "zip bomb": ("bomb.docx", zip_bomb_bytes,
                 ["bomb.docx", "would unpack to", "250 MB", "zip bomb"]),
    "Word file without text": ("blank.docx", docx_bytes, ["blank.docx", "no extractable text"]),
    "web page without text": (
        "blank.html", lambda: b"<html><head><title>Policy</title><script>go()</script></head>"
                              b"<body>\n  <img src='logo.png'>\n</body></html>",
        ["blank.html", "no extractable text"]),
    "web page not in its declared charset": (
        "latin.htm", lambda: b'<meta charset="utf-8"><p>Schl\xfcssel rotate.</p>',
        ["latin.htm", "utf-8", "byte 29"]),
    "web page of binary noise": ("noise.html", lambda: bytes(range(256)) * 4,
                                 ["noise.html", "cannot be decoded"]),
}


@pytest.fixture(scope="module")
def office_files(tmp_path_factory) -> dict[str, tuple[Path, bytes]]:
    """Every bad file on disk (in a folder of its own) and its bytes, made once."""
    folder = tmp_path_factory.mktemp("office")
    files = {}
    for case, (name, make, _) in OFFICE_REFUSALS.items():
        data = make()
        files[case] = (write(folder / re.sub(r"\W+", "_", case) / name, data), data)
    write(folder / "good.md", POLICY)
    return files


def test_the_word_files_and_pages_made_here_are_read_when_nothing_is_wrong(workbench, tmp_path):
    """The refusals below are about their defect, not about how the files are made."""
    page = b'<meta charset="utf-8"><h1>Keys</h1><p>Schl\xc3\xbcssel rotate.</p>'
    docs = [write(tmp_path / "policy.docx", GOOD_DOCX),
            write(tmp_path / "repacked.docx", repacked(GOOD_DOCX)),
            write(tmp_path / "keys.html", page)]
    report = workbench.ingest_documents("acme", docs)
    assert [(d.source, d.status, d.chunks) for d in report.documents] == [
        ("policy.docx", "added", 1), ("repacked.docx", "added", 1), ("keys.html", "added", 1)]


@pytest.mark.parametrize("case", list(OFFICE_REFUSALS))
def test_the_command_refuses_a_bad_word_file_or_page(populated, office_files, case, capfd,
                                                     monkeypatch):
    monkeypatch.setenv("EVIDENCE_EMBEDDING_MODEL", "fake-bag-of-words")
    path, _ = office_files[case]
    good = path.parent.parent / "good.md"
    before = store_snapshot(populated)
    capfd.readouterr()
    code = main(["--store", str(populated.settings.store), "ingest", "docs", "--vendor", "acme",
                 str(good), str(path)])
    assert_cli_refused(code, *capfd.readouterr(), *OFFICE_REFUSALS[case][2])
    assert_unchanged(before, store_snapshot(populated))


@pytest.mark.parametrize("case", list(OFFICE_REFUSALS))
def test_a_bad_word_file_or_page_upload_is_refused(populated, office_files, case):
    name, _, needles = OFFICE_REFUSALS[case]
    with refused(populated, *needles):
        ingest_uploaded_documents(populated, "acme", [("good.md", POLICY.encode()),
                                                      (name, office_files[case][1])],
                                  "tc_files", None)

# End of Word files and web pages -------------------------------------------------------------


# Spreadsheets, criteria lists, drafts, reports and language-model endpoints ------------------
# Every case runs the command against the shared store holding vendor acme. A refusal exits 2
# (1 for an endpoint that fails) with one line on stderr and nothing on stdout, and leaves the
# store as it was; a refused draft or report leaves its output folder as it was. What is read
# with a note instead is ingested into a store of its own.

pytest_plugins = ["tests.llm_stub"]

SHEET_HEADER = ["Criterion", "Question", "Answer"]
SHEET_ROWS: list[list[Any]] = [
    SHEET_HEADER,
    [AES_CRITERION, "Which cipher protects stored customer data?", "AES-256 in GCM mode."],
    [None, "Who is your data protection officer?", "Jane Doe."],
]
SHEET_OPTIONS = ["--vendor", "acme", "--round", "2", "--timestamp", "2024-03-01T10:00:00Z"]


def sheet_xlsx(rows: list[list[Any]], setup: Callable[[Any], None] | None = None, *,
               title: str = "Answers") -> bytes:
    """A workbook of one sheet holding `rows` from A1; `setup(sheet)` changes it further."""
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = title
    for row in rows:
        sheet.append(row)
    if setup is not None:
        setup(sheet)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def sheet_csv(rows: list[list[Any]], *, encoding: str = "utf-8", delimiter: str = ",") -> bytes:
    import csv

    out = io.StringIO(newline="")
    csv.writer(out, delimiter=delimiter, lineterminator="\r\n").writerows(
        [["" if cell is None else cell for cell in row] for row in rows])
    return out.getvalue().encode(encoding)


def with_row(*row: Any) -> list[list[Any]]:
    """The good rows, then `row` as spreadsheet row 4."""
    return [*SHEET_ROWS, list(row)]


TEN_THOUSAND_ROWS = [SHEET_HEADER] + [[f"C{n}", f"Q{n}", f"A{n}"] for n in range(10_000)]
NO_ANSWER_COLUMN = [["Criterion", "Question", "Response"], *SHEET_ROWS[1:]]
REPEATED = with_row(AES_CRITERION.upper(), "  which cipher protects STORED customer data? ",
                    "AES-128.")
ENCRYPTED_WORKBOOK = (OLE_HEADER + bytes(504) + "EncryptionInfo".encode("utf-16-le") + bytes(512)
                      + "EncryptedPackage".encode("utf-16-le"))


def sheet_zip_bomb() -> bytes:
    """A real workbook with 105 MB of zeros in it, which deflate to about 100 kB."""
    import zipfile

    out = io.BytesIO(sheet_xlsx(SHEET_ROWS))
    with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED) as package, \
            package.open("xl/media/image1.png", "w", force_zip64=True) as part:
        for _ in range(100):
            part.write(bytes(1 << 20))
    return out.getvalue()


def _row_4(column: str, *needles: str) -> list[str]:
    return ["row 4", f"column {column}", *needles]


# case: (file name, its bytes, its options, what the sentence names)
SHEET_REFUSALS: dict[str, tuple[str, Callable[[], bytes], list[str], list[str]]] = {
    "xlsx: merged header cells": (
        "round_2.xlsx", lambda: sheet_xlsx(SHEET_ROWS, lambda s: s.merge_cells("A1:B1")),
        SHEET_OPTIONS, ["sheet Answers", "row 1", "merged", "A1:B1"]),
    "xlsx: formula in an answer": (
        "round_2.xlsx", lambda: sheet_xlsx(with_row("C", "Q?", '=A2&" yes"')), SHEET_OPTIONS,
        ["sheet Answers", *_row_4("Answer", "formula", '=A2&" yes"', "Paste Special")]),
    "xlsx: 10,000 rows": (
        "round_2.xlsx", lambda: sheet_xlsx(TEN_THOUSAND_ROWS), SHEET_OPTIONS,
        ["sheet Answers", "10,000 responses", "rows 2 to 10,001", "at most 5,000"]),
    "xlsx: no answer column": (
        "round_2.xlsx", lambda: sheet_xlsx(NO_ANSWER_COLUMN), SHEET_OPTIONS,
        ["row 1", "no answer column", "Response"]),
    "xlsx: criterion and question repeated": (
        "round_2.xlsx", lambda: sheet_xlsx(REPEATED), SHEET_OPTIONS,
        [*_row_4("Question"), "repeats", "of row 2"]),
    "xlsx: blank answer": ("round_2.xlsx", lambda: sheet_xlsx(with_row("C", "Q?", "   ")),
                           SHEET_OPTIONS, _row_4("Answer", "blank")),
    "xlsx: error value #N/A": ("round_2.xlsx", lambda: sheet_xlsx(with_row("C", "Q?", "#N/A")),
                               SHEET_OPTIONS, _row_4("Answer", "error value #N/A")),
    "xlsx: encrypted workbook": ("round_2.xlsx", lambda: ENCRYPTED_WORKBOOK, SHEET_OPTIONS,
                                 ["password-protected", "remove the password"]),
    "xlsx: workbook cut short": ("round_2.xlsx", lambda: sheet_xlsx(SHEET_ROWS)[:400],
                                 SHEET_OPTIONS, ["not a readable .xlsx workbook"]),
    "xlsx: worksheet that is not XML": (
        "round_2.xlsx", lambda: repacked(sheet_xlsx(SHEET_ROWS), drop="xl/worksheets/sheet1.xml",
                                         add={"xl/worksheets/sheet1.xml": b"<not xml"}),
        SHEET_OPTIONS, ["not a readable .xlsx workbook"]),
    "xlsx: macros": ("round_2.xlsx", lambda: repacked(sheet_xlsx(SHEET_ROWS),
                                                      add={"xl/vbaProject.bin": bytes(64)}),
                     SHEET_OPTIONS, ["macros", "xl/vbaProject.bin", "macro-free"]),
    "xlsx: zip bomb": ("round_2.xlsx", sheet_zip_bomb, SHEET_OPTIONS,
                       ["unpacks to", "at most 100,000,000"]),
    "csv: 10,000 rows": ("round_2.csv", lambda: sheet_csv(TEN_THOUSAND_ROWS), SHEET_OPTIONS,
                         ["10,000 responses", "rows 2 to 10,001", "at most 5,000"]),
    "csv: no answer column": ("round_2.csv", lambda: sheet_csv(NO_ANSWER_COLUMN), SHEET_OPTIONS,
                              ["row 1", "no answer column", "Response"]),
    "csv: criterion and question repeated": ("round_2.csv", lambda: sheet_csv(REPEATED),
                                             SHEET_OPTIONS,
                                             [*_row_4("Question"), "repeats", "of row 2"]),
    "csv: blank answer": ("round_2.csv", lambda: sheet_csv(with_row("C", "Q?", " ")),
                          SHEET_OPTIONS, _row_4("Answer", "blank")),
    "csv: Windows-1252 text": (
        "round_2.csv", lambda: sheet_csv(with_row("C", "Q?", "It\u2019s encrypted"),
                                         encoding="cp1252"),
        SHEET_OPTIONS, ["not UTF-8", "0x92", "CSV UTF-8"]),
    "csv: workbook named .csv": ("round_2.csv", lambda: sheet_xlsx(SHEET_ROWS), SHEET_OPTIONS,
                                 ["is an Excel workbook", "name it .xlsx"]),
    # Ambiguous: which column holds the answer, and is row 4 an answer or a second header?
    **{f"{kind}: {case}": (f"round_2.{kind}", (lambda rows=rows: sheet_xlsx(rows))
                           if kind == "xlsx" else (lambda rows=rows: sheet_csv(rows)),
                           SHEET_OPTIONS, needles)
       for kind in ("xlsx", "csv")
       for case, (rows, needles) in {
           "two answer columns": ([[*SHEET_HEADER, "answer_text"], *SHEET_ROWS[1:]],
                                  ["row 1", "two columns are headed answer", "column D"]),
           "the header row repeated": (with_row(*(h.upper() for h in SHEET_HEADER)),
                                       ["row 4", "repeats the header row", "row 1"]),
       }.items()},
    **{f"{kind}: {case}": (f"good_round.{kind}",
                           (lambda: sheet_xlsx(SHEET_ROWS)) if kind == "xlsx"
                           else (lambda: sheet_csv(SHEET_ROWS)), options, needles)
       for kind in ("xlsx", "csv")
       for case, (options, needles) in {
           "no --vendor": (["--round", "2"], [f"good_round.{kind}", "--vendor and --round"]),
           "no --round": (["--vendor", "acme"], [f"good_round.{kind}", "--vendor and --round"]),
           "--timestamp that is not ISO 8601": (
               ["--vendor", "acme", "--round", "2", "--timestamp", "yesterday"],
               ["--timestamp", "'yesterday'", "ISO 8601"]),
           "--vendor with a slash": (["--vendor", "acme/evil", "--round", "2"],
                                     ["--vendor", "acme/evil"]),
           "--vendor differing only in case": (["--vendor", "ACME", "--round", "2"],
                                               ["ACME", "'acme'", "case"]),
           "--round 0": (["--vendor", "acme", "--round", "0"], ["--round", "0"]),
           "--round above the maximum": (["--vendor", "acme", "--round", "1001"],
                                         ["--round", "1000"]),
           "--round that is not a number": (["--vendor", "acme", "--round", "two"],
                                            ["--round", "integer"]),
       }.items()},
}


@pytest.fixture(scope="module")
def sheet_files(tmp_path_factory) -> dict[str, Path]:
    """Every spreadsheet round above on disk, each in a folder of its own, made once."""
    folder = tmp_path_factory.mktemp("sheets")
    return {case: write(folder / re.sub(r"\W+", "_", case) / name, make())
            for case, (name, make, _, _) in SHEET_REFUSALS.items()}


@pytest.fixture
def fake_models(monkeypatch) -> None:
    """The command embeds with the fake embedder the stores here were made with."""
    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: FakeEmbedder())


@pytest.mark.parametrize("case", list(SHEET_REFUSALS))
def test_the_command_refuses_a_bad_spreadsheet_round(populated, sheet_files, fake_models, capfd,
                                                     case):
    name, _, options, needles = SHEET_REFUSALS[case]
    before = store_snapshot(populated)
    code, out, err = run_main(capfd, "--store", str(populated.settings.store), "ingest",
                                   "questionnaire", str(sheet_files[case]), *options, clear=True)
    named = [name] if options is SHEET_OPTIONS else []  # an option's refusal names the option
    assert_cli_refused(code, out, err, *named, *needles)
    assert_unchanged(before, store_snapshot(populated))


def dated(value: Any) -> bytes:
    """A round whose one answer is a date cell, stored as Excel stores it: a serial number."""
    return sheet_xlsx([SHEET_HEADER, [AES_CRITERION, "When was the last audit?", value]])


def _date() -> Any:
    from datetime import date

    return date(2024, 3, 1)


def _date_and_time() -> Any:
    from datetime import datetime

    return datetime(2024, 3, 1, 14, 30)


FRENCH = [SHEET_HEADER, [AES_CRITERION, "Cl\u00e9 g\u00e9r\u00e9e ?",
                         "Oui \u2014 AES\u2011256 \u201cKMS\u201d"]]

# case: (file name, its bytes, the answer stored, the note's words or None for no note)
SHEET_NOTES: dict[str, tuple[str, Callable[[], bytes], str, list[str] | None]] = {
    "xlsx: a date cell": (
        "round_2.xlsx", lambda: dated(_date()), "2024-03-01",
        ["round_2.xlsx", "sheet Answers", "row 2", "column Answer",
         "the date was read as the text 2024-03-01"]),
    "xlsx: a date and time cell": (
        "round_2.xlsx", lambda: dated(_date_and_time()), "2024-03-01T14:30:00",
        ["round_2.xlsx", "row 2", "column Answer",
         "the date and time was read as the text 2024-03-01T14:30:00"]),
    "csv: UTF-8 with a byte-order mark": (
        "round_2.csv", lambda: sheet_csv(FRENCH, encoding="utf-8-sig"),
        "Oui \u2014 AES\u2011256 \u201cKMS\u201d", None),
    "csv: UTF-16 with a byte-order mark, tab separated": (
        "round_2.csv", lambda: sheet_csv(FRENCH, encoding="utf-16", delimiter="\t"),
        "Oui \u2014 AES\u2011256 \u201cKMS\u201d", ["The columns are separated by tabs"]),
}


@pytest.mark.parametrize("case", list(SHEET_NOTES))
def test_what_a_spreadsheet_holds_in_another_form_is_read_with_a_note(workbench, fake_models,
                                                                       tmp_path, capfd, case):
    name, make, answer, note = SHEET_NOTES[case]
    workbench.ingest_questionnaire(payload(round_number=1))
    path = write(tmp_path / name, make())
    code, out, err = run_main(capfd, "--store", str(workbench.settings.store), "ingest",
                                   "questionnaire", str(path), *SHEET_OPTIONS, clear=True)
    assert "Traceback" not in err
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [
        {"indexed_count": 1, "round_number": 2, "vendor_id": "acme"}]
    lines = err.splitlines()
    if note is None:
        assert lines == []
    else:
        assert len(lines) == 1 and lines[0].startswith("evidence: note: "), lines
        assert_one_sentence(lines[0].removeprefix("evidence: note: "), *note, any_case=True)
    stored = [(hit.round_number, hit.answer_text)
              for hit in workbench.linked_followups("acme", AES_CRITERION)]
    assert (2, answer) in stored


CRITERIA_ROWS = [["ID", "Criterion"], ["ENC-1", AES_CRITERION],
                 ["MFA-1", "Is multi-factor authentication enforced?"]]

# case: (file name, its rows, what the sentence names)
CRITERIA_REFUSALS: dict[str, tuple[str, list[list[Any]], list[str]]] = {
    f"{kind}: {case}": (f"criteria.{kind}", rows, ["criteria." + kind, *needles])
    for kind in ("csv", "xlsx")
    for case, (rows, needles) in {
        "no criterion column": ([["ID", "Requirement"], *CRITERIA_ROWS[1:]],
                                ["row 1", "no criterion column", "Requirement"]),
        "an id used twice": ([*CRITERIA_ROWS, ["ENC-1", "Are logs kept for a year?"]],
                             ["row 4", "column ID", "ENC-1", "row 2", "unique"]),
        "no criteria under the header": ([CRITERIA_ROWS[0]],
                                         ["row 1", "no rows below it"]),
        "the header row repeated": ([*CRITERIA_ROWS, CRITERIA_ROWS[0]],
                                    ["row 4", "repeats the header row"]),
    }.items()
}


@pytest.mark.parametrize("case", list(CRITERIA_REFUSALS))
def test_retrieve_refuses_a_bad_criteria_spreadsheet_before_printing_any(
        populated, fake_models, tmp_path, capfd, case):
    name, rows, needles = CRITERIA_REFUSALS[case]
    data = (sheet_xlsx(rows, title="Criteria") if name.endswith(".xlsx") else sheet_csv(rows))
    path = write(tmp_path / name, data)
    before = store_snapshot(populated)
    code, out, err = run_main(capfd, "--store", str(populated.settings.store), "retrieve",
                                   "--vendor", "acme", "--criteria-file", str(path), clear=True)
    assert_cli_refused(code, out, err, *needles)
    assert_unchanged(before, store_snapshot(populated))


# case: (the command's arguments, what the sentence names); {out} is an empty folder
OUTPUT_REFUSALS: dict[str, tuple[list[str], list[str]]] = {
    **{f"draft: {case}": (["questionnaire", "draft", "--vendor", vendor, "--criterion",
                           AES_CRITERION, "--round", "2", *more, "--output", output], needles)
       for case, (vendor, more, output, needles) in {
           "unsupported output suffix": ("acme", [], "{out}/draft.docx",
                                         ["draft.docx", ".xlsx, .csv or .json"]),
           "unknown vendor": ("nobody", [], "{out}/draft.xlsx", ["nobody"]),
           "missing output folder": ("acme", [], "{out}/missing/draft.xlsx",
                                     ["missing", "does not exist"]),
           "output path that is a folder": ("acme", [], "{out}/written.xlsx",
                                            ["written.xlsx", "folder"]),
           "--only-unanswered when everything is answered": (
               "acme", ["--only-unanswered"], "{out}/draft.xlsx",
               ["'acme'", "already has a linked answer", "--only-unanswered"]),
       }.items()},
    **{f"report: {case}": (["report", "--vendor", "acme", "--criterion", AES_CRITERION,
                            "--output", output], needles)
       for case, (output, needles) in {
           "unsupported output suffix": ("{out}/pack.pdf", ["pack.pdf", ".md", ".html", ".jsonl"]),
           "missing output folder": ("{out}/missing/pack.md", ["missing", "does not exist"]),
           "output path that is a folder": ("{out}/written.md", ["written.md", "folder"]),
       }.items()},
}


@pytest.mark.parametrize("case", list(OUTPUT_REFUSALS))
def test_a_refused_draft_or_report_writes_no_file(populated, fake_models, tmp_path, capfd, case):
    args, needles = OUTPUT_REFUSALS[case]
    out = tmp_path / "out"
    out.mkdir()
    if "a folder" in case:
        (out / Path(args[-1]).name).mkdir()
    listing = sorted(p.relative_to(out) for p in out.rglob("*"))
    before = store_snapshot(populated)
    code, stdout, err = run_main(capfd, "--store", str(populated.settings.store),
                                      *(a.replace("{out}", str(out)) for a in args), clear=True)
    assert_cli_refused(code, stdout, err, *needles)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == listing
    assert_unchanged(before, store_snapshot(populated))


# case: (settings, what the sentence names)
ASSESS_REFUSALS: dict[str, tuple[dict[str, str], list[str]]] = {
    "no endpoint configured": ({}, ["EVIDENCE_LLM_BASE_URL", "EVIDENCE_LLM_MODEL"]),
    "no model configured": ({"EVIDENCE_LLM_BASE_URL": "http://127.0.0.1:11434/v1"},
                            ["set EVIDENCE_LLM_MODEL"]),
    "base URL that is not http": ({"EVIDENCE_LLM_BASE_URL": "127.0.0.1:11434/v1",
                                   "EVIDENCE_LLM_MODEL": "stub-model"},
                                  ["EVIDENCE_LLM_BASE_URL", "'127.0.0.1:11434/v1'", "http://"]),
    "timeout that is not a number": ({"EVIDENCE_LLM_BASE_URL": "http://127.0.0.1:11434/v1",
                                      "EVIDENCE_LLM_MODEL": "stub-model",
                                      "EVIDENCE_LLM_TIMEOUT_S": "soon"},
                                     ["EVIDENCE_LLM_TIMEOUT_S", "'soon'"]),
}
@pytest.mark.parametrize("case", list(ASSESS_REFUSALS))
def test_assess_without_a_usable_endpoint_names_the_setting(populated, fake_models, monkeypatch,
                                                            capfd, case):
    environment, needles = ASSESS_REFUSALS[case]
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    before = store_snapshot(populated)
    code, out, err = run_main(capfd, "--store", str(populated.settings.store), "assess",
                                   "--vendor", "acme", "--criterion", AES_CRITERION, clear=True)
    assert_cli_refused(code, out, err, *needles)
    assert populated.verdicts.latest("acme", AES_CRITERION).verdict is None
    assert_unchanged(before, store_snapshot(populated))


def closed_port_url() -> str:
    """The base URL of a port on 127.0.0.1 that nothing listens on."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


MET = {"verdict": "MET", "reasoning": "Round 1 confirms AES-256.", "contradictions": [],
       "cited_rounds": [1]}

# case: (the stub's reply, or None for a closed port; settings; what the sentence names)
ASSESS_FAILURES: dict[str, tuple[dict[str, Any] | None, dict[str, str], list[str]]] = {
    "an endpoint that hangs past the timeout": (
        {"content": MET, "hang_s": 5.0}, {"EVIDENCE_LLM_TIMEOUT_S": "0.5"},
        ["did not answer within 0.5 s", "EVIDENCE_LLM_TIMEOUT_S"]),
    "HTTP 500": ({"status": 500, "error": "model not loaded"}, {},
                 ["HTTP 500", "model not loaded"]),
    "content that is not JSON": ({"content": "The vendor meets the criterion"}, {},
                                 ["not JSON", "The vendor meets the criterion"]),
    "JSON outside the schema": ({"content": MET | {"verdict": "PROBABLY"}}, {},
                                ["does not match the schema", "verdict"]),
    "connection refused": (None, {}, ["could not be reached", "connection refused"]),
}


@pytest.mark.parametrize("case", list(ASSESS_FAILURES))
def test_a_failing_language_model_fails_in_one_line_and_records_no_verdict(
        populated, fake_models, llm_stub, monkeypatch, capfd, case):
    reply, environment, needles = ASSESS_FAILURES[case]
    monkeypatch.setenv("EVIDENCE_LLM_BASE_URL",
                       llm_stub.base_url if reply is not None else closed_port_url())
    monkeypatch.setenv("EVIDENCE_LLM_MODEL", llm_stub.model)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    if reply is not None:
        llm_stub.enqueue(**reply)
    before = store_snapshot(populated)
    code, out, err = run_main(capfd, "--store", str(populated.settings.store), "assess",
                                   "--vendor", "acme", "--criterion", AES_CRITERION, clear=True)
    assert_cli_refused(code, out, err, "127.0.0.1", "/chat/completions", *needles, exit_code=1)
    assert (len(llm_stub.requests), llm_stub.pending) == ((0, 0) if reply is None else (1, 0))
    assert populated.verdicts.latest("acme", AES_CRITERION).verdict is None
    assert_unchanged(before, store_snapshot(populated))

# End of spreadsheets, criteria lists, drafts, reports and language-model endpoints -----------


# Ambiguous input: refused, not guessed -------------------------------------------------------
# Input that could mean two things is refused in one sentence rather than read one way: a key
# repeated in a questionnaire payload (JSON keeps the last; a person reading the file sees the
# first), a store path that is not a folder (it read as an empty store), a folder of other
# files as a new store, an option given twice, two places for the store, an output written
# over its own input, a header row repeated inside a spreadsheet (above, with the sheets).

def _twice(old: str, new: str, count: int = 1) -> bytes:
    assert GOOD_JSON.count(old) >= count
    return GOOD_JSON.replace(old, new, count).encode()


# case: (file name, its bytes, what the sentence names)
REPEATED_KEYS: dict[str, tuple[str, bytes, list[str]]] = {
    "vendor_id twice at the top level": (
        "two_vendors.json", _twice('"vendor_id": "acme"',
                                   '"vendor_id": "acme", "vendor_id": "globex"'),
        ['"vendor_id"', "twice", "top level"]),
    "round_number twice with the same value": (
        "same_round.json", _twice('"round_number": 7', '"round_number": 7, "round_number": 7'),
        ['"round_number"', "twice", "top level"]),
    "responses twice": ("two_lists.json", (GOOD_JSON[:-1] + ', "responses": []}').encode(),
                        ['"responses"', "top level"]),
    "the same key written with an escape": (
        "escaped.json", _twice('"vendor_id": "acme"',
                               '"vendor_id": "acme", "vendor\\u005fid": "globex"'),
        ['"vendor_id"', "top level"]),
    "answer_text twice in a response": (
        "two_answers.json", _twice('"answer_text": "Jane Doe."',
                                   '"answer_text": "Jane Doe.", "answer_text": "John Roe."'),
        ['"answer_text"', "twice", "responses[1]"]),
    "question_text three times in a response": (
        "three_questions.json", _twice(
            '"question_text": "Which cipher protects stored customer data?"',
            '"question_text": "Q1?", "question_text": "Q2?", "question_text": "Q3?"'),
        ['"question_text"', "3 times", "responses[0]"]),
    "a key twice deeper down": (
        "deeper.json", _twice('"answer_text": "AES-256 in GCM mode."',
                              '"answer_text": {"text": "AES-256.", "text": "AES-128."}'),
        ['"text"', "twice", "responses[0].answer_text"]),
}


@pytest.fixture(scope="module")
def repeated_key_files(payload_files) -> dict[str, Path]:
    folder = payload_files["good"].parent / "repeated-keys"
    return {case: write(folder / name, data) for case, (name, data, _) in REPEATED_KEYS.items()}


def test_the_files_with_repeated_keys_read_as_valid_rounds_to_plain_json():
    """Each would be stored (all but the deeper one) if the repeat were not refused: the
    refusal is about the repeated key, not about another defect."""
    for case, (_, data, _) in REPEATED_KEYS.items():
        if case != "a key twice deeper down" and case != "responses twice":
            assert parse_payload(json.loads(data)).responses, case


@pytest.mark.parametrize("case", list(REPEATED_KEYS))
def test_a_repeated_key_in_a_payload_file_is_refused(populated, payload_files,
                                                    repeated_key_files, case):
    name, _, needles = REPEATED_KEYS[case]
    with refused(populated, name, *needles, "cannot tell which one is meant"):
        for loaded in populated.load_rounds([payload_files["good"], repeated_key_files[case]]):
            populated.ingest_questionnaire(loaded.payload)


@pytest.mark.parametrize("case", list(REPEATED_KEYS))
def test_the_command_refuses_a_repeated_key(populated, payload_files, repeated_key_files,
                                           case, capfd, monkeypatch):
    monkeypatch.setenv("EVIDENCE_EMBEDDING_MODEL", "fake-bag-of-words")
    name, _, needles = REPEATED_KEYS[case]
    before = store_snapshot(populated)
    code, out, err = run_main(capfd, "--store", str(populated.settings.store), "ingest",
                                   "questionnaire", str(payload_files["good"]),
                                   str(repeated_key_files[case]), clear=True)
    assert_cli_refused(code, out, err, name, *needles)
    assert_unchanged(before, store_snapshot(populated))


@pytest.mark.parametrize("case", list(REPEATED_KEYS))
def test_a_repeated_key_in_an_uploaded_round_is_refused(populated, payload_files, case):
    name, data, needles = REPEATED_KEYS[case]
    uploads = [("good.json", payload_files["good"].read_bytes()), (name, data)]
    with refused(populated, name, *needles):
        ingest_uploaded_questionnaires(populated, uploads)
    with refused(populated, name, *needles):  # the review step of the page's round upload
        read_uploaded_rounds(populated, uploads)


def test_the_reader_keeps_its_limits_with_the_repeat_check(payload_files):
    """Nesting, long numbers and size are refused as before, whatever keys repeat."""
    deep = b'{"a": 1, "a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    digits = b'{"a": 1, "a": ' + b"9" * 5000 + b"}"
    for name, data, max_bytes, needle in (
            ("deep.json", deep, MAX_QUESTIONNAIRE_BYTES, "nested too deeply"),
            ("digits.json", digits, MAX_QUESTIONNAIRE_BYTES, "number too long"),
            ("big.json", b'{"a": 1, "a": 2}' + b" " * 200, 200, "at most 200 bytes")):
        with pytest.raises(UserInputError) as caught:
            read_questionnaires([(name, data)], limits=PayloadLimits(max_bytes=max_bytes))
        assert_one_sentence(str(caught.value), name, needle, any_case=True)


# Store paths: what cannot be a store is refused by every command that uses the store --------

def _a_file(root: Path) -> Path:
    return write(root / "store.txt", "notes\n")


def _link_to_a_file(root: Path) -> Path:
    os.symlink(_a_file(root), root / "store-link")
    return root / "store-link"


def _pipe_store(root: Path) -> Path:
    os.mkfifo(root / "store-pipe")
    return root / "store-pipe"


def _broken_store_link(root: Path) -> Path:
    os.symlink(root / "moved-away", root / "store-link")
    return root / "store-link"


def _under_a_file(root: Path) -> Path:
    return _a_file(root) / "store"


# case: (makes the path under a folder, what the sentence names)
BAD_STORE_PATHS: dict[str, tuple[Callable[[Path], Path], list[str]]] = {
    "a regular file": (_a_file, ["store.txt", "is a file, not a folder"]),
    "a link to a file": (_link_to_a_file, ["store-link", "a file (through a symbolic link)"]),
    "a named pipe": (_pipe_store, ["store-pipe", "named pipe", "not a folder"]),
    "a broken link": (_broken_store_link, ["store-link", "moved-away", "does not exist"]),
    "a path under a file": (_under_a_file, ["store.txt/store", "part of it is a file"]),
}


def path_state(path: Path) -> dict[str, Any]:
    """The store snapshot of a path that is no store, and what the path itself is and holds."""
    kind = os.lstat(path).st_mode if os.path.lexists(path) else None
    data = path.read_bytes() if path.is_file() else None
    parent = path.parent
    return {"database": database_snapshot(path), "kind": kind, "bytes": data,
            "parent": sorted(p.name for p in parent.iterdir()) if parent.is_dir()
            else parent.read_bytes()}


def _ask(workbench: Workbench, tmp_path: Path) -> None:
    workbench.ask("acme", "Is data encrypted at rest?")


def _conversations(workbench: Workbench, tmp_path: Path) -> None:
    workbench.conversations("acme")


STORE_OPERATIONS: dict[str, Callable[[Workbench, Path], None]] = {
    **{name: (lambda workbench, tmp_path, operation=operation:
              operation(workbench, "acme", tmp_path))
       for name, operation in OPERATIONS.items()},
    "ask": _ask, "conversations": _conversations,
}


@pytest.mark.parametrize("operation", list(STORE_OPERATIONS))
@pytest.mark.parametrize("case", list(BAD_STORE_PATHS))
def test_a_store_path_that_is_no_folder_is_refused(tmp_path, case, operation):
    make, needles = BAD_STORE_PATHS[case]
    (tmp_path / "where").mkdir()
    store = make(tmp_path / "where")
    workbench = make_workbench(store)
    before = path_state(store)
    with pytest.raises(UserInputError) as caught:
        STORE_OPERATIONS[operation](workbench, tmp_path / "inputs")
    assert_one_sentence(str(caught.value), "store path", *needles, any_case=True)
    assert_unchanged(before, path_state(store))


STORE_COMMANDS: dict[str, list[str]] = {
    "status": ["status"],
    "retrieve": ["retrieve", "--vendor", "acme", "--criterion", AES_CRITERION],
    "ask": ["ask", "--vendor", "acme", "Is data encrypted at rest?"],
    "conversations": ["conversations", "--vendor", "acme"],
    "ingest docs": ["ingest", "docs", "--vendor", "acme", "{in}/good.md"],
    "ingest questionnaire": ["ingest", "questionnaire", "{in}/good.json"],
    "questionnaire draft": ["questionnaire", "draft", "--vendor", "acme", "--round", "2",
                            "--criterion", AES_CRITERION, "--output", "{in}/draft.xlsx"],
}


@pytest.mark.parametrize("command", list(STORE_COMMANDS))
@pytest.mark.parametrize("case", list(BAD_STORE_PATHS))
def test_the_command_refuses_a_store_path_that_is_no_folder(cli_inputs, fake_models, tmp_path,
                                                          capfd, case, command):
    make, needles = BAD_STORE_PATHS[case]
    store = make(tmp_path)
    before = path_state(store)
    args = [a.replace("{in}", str(cli_inputs)) for a in STORE_COMMANDS[command]]
    code, out, err = run_main(capfd, "--store", str(store), *args, clear=True)
    assert_cli_refused(code, out, err, "store path", *needles)
    assert_unchanged(before, path_state(store))
    assert not (cli_inputs / "draft.xlsx").exists()


def _folder_of_other_files(root: Path) -> Path:
    folder = root / "home"
    write(folder / "notes.txt", "shopping list\n")
    write(folder / "photos" / "cat.md", POLICY)
    return folder


@pytest.mark.parametrize("operation", ["ingest_documents", "ingest_questionnaire"])
def test_a_folder_of_other_files_is_not_made_a_store(tmp_path, operation):
    folder = _folder_of_other_files(tmp_path)
    workbench = make_workbench(folder)
    before = database_snapshot(folder)
    with pytest.raises(UserInputError) as caught:
        OPERATIONS[operation](workbench, "acme", tmp_path)
    assert_one_sentence(str(caught.value), str(folder), "2 entries", "notes.txt",
                        "no chroma.sqlite3", "not an evidence store", any_case=True)
    assert_unchanged(before, database_snapshot(folder))
    assert workbench.status() == []  # reading it is fine: it holds no evidence
    assert_unchanged(before, database_snapshot(folder))


@pytest.mark.parametrize("command", ["ingest docs", "ingest questionnaire"])
def test_the_command_makes_no_store_in_a_folder_of_other_files(cli_inputs, fake_models,
                                                              tmp_path, capfd, command):
    folder = _folder_of_other_files(tmp_path)
    before = database_snapshot(folder)
    args = [a.replace("{in}", str(cli_inputs)) for a in STORE_COMMANDS[command]]
    code, out, err = run_main(capfd, "--store", str(folder), *args, clear=True)
    assert_cli_refused(code, out, err, str(folder), "notes.txt", "not an evidence store")
    assert_unchanged(before, database_snapshot(folder))
    code, out, err = run_main(capfd, "--store", str(folder), "status", clear=True)
    assert (code, out, err) == (0, "", "")
    assert_unchanged(before, database_snapshot(folder))


def test_an_empty_folder_and_a_link_to_a_store_are_stores(tmp_path, populated):
    """What the refusals above leave alone: a new store in an empty folder, and a store
    reached through a symbolic link."""
    (tmp_path / "empty").mkdir()
    workbench = make_workbench(tmp_path / "empty")
    assert workbench.ingest_questionnaire(payload(round_number=1)).indexed_count == 2
    os.symlink(populated.settings.store, tmp_path / "link")
    assert [s.vendor_id for s in make_workbench(tmp_path / "link").status()] == ["acme"]


# The command line: an option twice, two stores, an output over its input ---------------------

# case: (arguments after --store, environment, what the sentence names)
AMBIGUOUS_COMMANDS: dict[str, tuple[list[str], dict[str, str], list[str]]] = {
    "--vendor twice": (["retrieve", "--vendor", "acme", "--vendor", "globex", "--criterion",
                        AES_CRITERION], {}, ["--vendor", "twice", "'acme'", "'globex'"]),
    "--criterion twice": (["retrieve", "--vendor", "acme", "--criterion", AES_CRITERION,
                           "--criterion=Is MFA enforced?"], {},
                          ["--criterion", "twice", "'Is MFA enforced?'"]),
    "--store twice": (["--store", "{in}/other-store", "status"], {},
                      ["--store", "twice", "other-store"]),
    "--round twice": (["ingest", "questionnaire", "{in}/round.csv", "--vendor", "acme",
                       "--round", "2", "--round", "3"], {}, ["--round", "twice", "'2'", "'3'"]),
    "--format twice": (["retrieve", "--vendor", "acme", "--criterion", AES_CRITERION,
                        "--format", "json", "--format", "xml"], {},
                       ["--format", "'json'", "'xml'"]),
    "--store and --chroma-host": (["--chroma-host", "127.0.0.1", "status"], {},
                                  ["--store", "--chroma-host", "give one of them"]),
    "--store and EVIDENCE_CHROMA_HOST": (["status"], {"EVIDENCE_CHROMA_HOST": "127.0.0.1"},
                                         ["--store", "EVIDENCE_CHROMA_HOST=127.0.0.1"]),
    "--chroma-port without a host": (["--chroma-port", "8001", "status"], {},
                                     ["--chroma-port 8001", "--chroma-host"]),
    "a draft over its criteria file": (
        ["questionnaire", "draft", "--vendor", "acme", "--round", "2", "--criteria-file",
         "{in}/criteria.csv", "--output", "{in}/criteria.csv"], {},
        ["--output", "criteria.csv", "--criteria-file"]),
    "a report over its criteria file": (
        ["report", "--vendor", "acme", "--criteria-file", "{in}/criteria.md", "--output",
         "{in}/./criteria.md"], {}, ["--output", "criteria.md", "--criteria-file"]),
}


@pytest.mark.parametrize("case", list(AMBIGUOUS_COMMANDS))
def test_the_command_refuses_what_could_mean_two_things(populated, fake_models, tmp_path,
                                                       capfd, monkeypatch, case):
    args, env, needles = AMBIGUOUS_COMMANDS[case]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    write(tmp_path / "round.csv", sheet_csv(SHEET_ROWS))
    write(tmp_path / "criteria.csv", sheet_csv(CRITERIA_ROWS))
    write(tmp_path / "criteria.md", f"{AES_CRITERION}\n")
    inputs = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    before = store_snapshot(populated)
    code, out, err = run_main(capfd, "--store", str(populated.settings.store),
                                   *(a.replace("{in}", str(tmp_path)) for a in args), clear=True)
    assert_cli_refused(code, out, err, *needles)
    assert_unchanged(before, store_snapshot(populated))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == inputs


def test_an_option_given_twice_with_one_value_is_not_ambiguous(populated, fake_models, capfd):
    code, out, err = run_main(capfd, "--store", str(populated.settings.store), "status",
                                   "--vendor", "acme", "--vendor=acme", clear=True)
    assert code == 0, err
    assert [json.loads(line)["vendor_id"] for line in out.splitlines()] == ["acme"]


def test_a_repeated_header_row_is_refused_on_upload(populated):
    rows = with_row(*SHEET_HEADER)
    for name, data in (("round_2.csv", sheet_csv(rows)), ("round_2.xlsx", sheet_xlsx(rows))):
        with refused(populated, name, "row 4", "repeats the header row"):
            read_uploaded_rounds(populated, [(name, data)], vendor_id="acme", round_number=2)

# End of ambiguous input ----------------------------------------------------------------------
