"""The seconds each step of an ingest takes (`core.ingest.steps`): a package ingest times the
steps that ran, and only those, and counts its files, pages, answers and chunks; `ingest
package --timings` prints them as one closing line."""

from __future__ import annotations

import shutil
import threading

import pytest

from core.ingest.package import ingest_package, package_timings, read_package
from core.ingest.steps import STEPS, IngestSteps, step
from core.workbench import Workbench
from tests.fakes import point_the_command_at
from tests.support.cli import run_json
from tests.support.packages import (
    CAIQ_ITEMS,
    REGISTRY,
    image_only_pdf,
    pdf_bytes,
    write_package,
)
from tests.support.questionnaires import caiq_v4

needs_ocr = pytest.mark.skipif(shutil.which("tesseract") is None,
                               reason="the OCR engine (tesseract) is installed by "
                                      "make ocr-packages")


def two_page_pdf() -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in ("Access to production is reviewed every quarter.",
                 "Backups are encrypted and restored once a year as a test."):
        pdf.add_page()
        pdf.multi_cell(w=0, text=text)
    return bytes(pdf.output())


@pytest.fixture
def package(tmp_path):
    return write_package(tmp_path / "package", {
        "Example CAIQ.xlsx": caiq_v4(CAIQ_ITEMS),
        "policies/Operations Policy.pdf": two_page_pdf(),
        "policies/Key Policy.pdf": pdf_bytes("Keys are rotated every 90 days."),
    })


def test_a_package_ingest_times_the_steps_that_ran_and_counts_what_it_read(
        workbench: Workbench, package):
    read = read_package(workbench.writer, "acme", package)
    reading = read.steps.step_s()
    # Reading: the workbook and the search of each PDF for a table are `tables`, the PDFs'
    # text `pdf_text`, the chunking `split`; nothing is embedded or written yet, and every
    # page has a text layer, so none is read by OCR.
    assert {"tables", "pdf_text", "split"} <= set(reading)
    assert not {"ocr", "embed", "write", "statements"} & set(reading)
    assert all(seconds >= 0 for seconds in reading.values())

    ingest_package(workbench.writer, read)
    timings = package_timings(read)
    assert {"tables", "pdf_text", "split", "embed", "write"} <= set(timings["step_s"])
    assert "ocr" not in timings["step_s"] and timings["ocr_pages"] == 0
    assert {k: timings[k] for k in ("files", "documents", "rounds", "skipped", "pages",
                                    "answers")} == {
        "files": 3, "documents": 2, "rounds": 1, "skipped": 0, "pages": 3,
        "answers": len(CAIQ_ITEMS)}
    assert timings["chunks"] >= 2
    assert timings["slowest_step"] in timings["step_s"]
    assert list(timings["step_s"]) == [s for s in STEPS if s in timings["step_s"]]
    # The steps of one thread never count a second twice: those of the reading and of the
    # writing on the ingest's own thread add up to no more than the ingest ran (the
    # embedding of a documents ingest runs beside the writes, on a thread of its own).
    own_thread = sum(v for k, v in read.steps.seconds_by_step.items() if k != "embed")
    assert own_thread <= read.steps.seconds


@needs_ocr
def test_a_page_without_a_text_layer_is_timed_as_ocr_and_counted(workbench: Workbench,
                                                                 tmp_path):
    folder = write_package(tmp_path / "package", {
        "registry listing.pdf": image_only_pdf(REGISTRY),
        "Key Policy.pdf": pdf_bytes("Keys are rotated every 90 days."),
    })
    read = read_package(workbench.writer, "acme", folder)
    timings = package_timings(read)
    assert timings["ocr_pages"] == 1 and timings["pages"] == 2
    assert timings["step_s"]["ocr"] > 0
    assert timings["answers"] == 0 and "embed" not in timings["step_s"]


def test_a_step_inside_another_is_counted_once():
    steps = IngestSteps()
    with steps.active(), step("pdf_text"), step("ocr"):
        pass
    assert set(steps.seconds_by_step) == {"pdf_text", "ocr"}
    assert sum(steps.seconds_by_step.values()) <= steps.seconds
    with step("pdf_text"):  # outside an ingest nothing is timed
        pass
    assert set(steps.seconds_by_step) == {"pdf_text", "ocr"}


def test_another_thread_times_into_the_ingest_it_is_given():
    steps = IngestSteps()
    with steps.active(), step("write"):
        def embed() -> None:
            with step("embed", steps):
                pass

        worker = threading.Thread(target=embed)
        worker.start()
        worker.join()
    assert set(steps.seconds_by_step) == {"write", "embed"}


def test_the_command_prints_the_timings_after_the_files_lines(workbench: Workbench,
                                                                monkeypatch, capsys, package):
    point_the_command_at(workbench, monkeypatch)
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package,
                                "--timings")
    assert code == 0, err
    *files, last = lines
    assert [line["file"] for line in files] == ["Example CAIQ.xlsx",
                                                "policies/Key Policy.pdf",
                                                "policies/Operations Policy.pdf"]
    timings = last["timings"]
    assert (timings["files"], timings["pages"], timings["answers"]) == (3, 3, len(CAIQ_ITEMS))
    assert {"tables", "pdf_text", "embed", "write"} <= set(timings["step_s"])

    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert code == 0, err
    assert all("file" in line for line in lines)  # without --timings, the files' lines only
