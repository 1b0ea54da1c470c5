"""PDFs as vendors send them: locked with an owner password (any viewer opens them, the
password only restricts printing or copying) they are read; locked with a password needed to
open them they are refused by name."""

from __future__ import annotations

import io

import pytest
from fpdf import FPDF
from pypdf import PdfReader

from core.errors import UserInputError
from tests.support.packages import REGISTRY, image_only_pdf, locked, pdf_bytes

TEXT = "Customer data keys are rotated every 90 days by the key management service."


@pytest.mark.parametrize("algorithm", ["RC4-128", "AES-128", "AES-256"])
def test_a_pdf_locked_with_an_owner_password_only_is_read(workbench, tmp_path, algorithm):
    path = tmp_path / "SOC 3 report.pdf"
    path.write_bytes(locked(pdf_bytes(TEXT), user="", owner="vendor-legal-2024",
                            algorithm=algorithm))
    report = workbench.ingest_documents("acme", [path])
    assert [d.source for d in report.documents] == ["SOC 3 report.pdf"]
    trace = workbench.retrieve("acme", "How often are customer data keys rotated?", "semantic")
    assert any("rotated every 90 days" in e.text for e in trace.evidence)


def test_a_pdf_that_needs_a_password_to_open_is_refused_by_name(workbench, tmp_path):
    path = tmp_path / "pentest.pdf"
    path.write_bytes(locked(pdf_bytes(TEXT), user="open-sesame", owner="owner",
                            algorithm="AES-256"))
    with pytest.raises(UserInputError) as caught:
        workbench.ingest_documents("acme", [path])
    assert str(caught.value) == (
        f"{path} is encrypted with a password needed to open it; ask for a copy without "
        "one, or open it and save it again without the password.")
    assert workbench.vendor_ids() == []


# Pages without a text layer, read by OCR -------------------------------------------------------

@pytest.mark.skipif(not __import__("shutil").which("tesseract"),
                    reason="the OCR engine (tesseract) is installed by make ocr-packages")
def test_an_image_only_pdf_is_read_by_ocr_and_marked_so(workbench, tmp_path):
    path = tmp_path / "registry listing.pdf"
    path.write_bytes(image_only_pdf(REGISTRY))
    assert PdfReader(io.BytesIO(path.read_bytes())).pages[0].extract_text().strip() == ""
    workbench.ingest_documents("acme", [path])
    trace = workbench.retrieve("acme", "What is the vendor's registration number?", "semantic")
    [excerpt] = [e for e in trace.evidence if e.source == "registry listing.pdf"]
    assert "0842-7731-19" in excerpt.text and "Example Hosting Ltd" in excerpt.text
    assert excerpt.ocr is True
    assert "<source>registry listing.pdf (page 1, read by OCR)</source>" in trace.context
    turn = workbench.ask("acme", "What is the vendor's registration number?")
    assert any(e.ocr for e in turn.answer_evidence if e.source == "registry listing.pdf")
    assert "registry listing.pdf (page 1, read by OCR)" in turn.answer


def test_running_headers_and_footers_are_dropped(workbench, tmp_path):
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    bodies = ["Access to production is reviewed quarterly by the security team.",
              "Backups are restored in a test every six months.",
              "Encryption keys are rotated every 90 days.",
              "Vendors are assessed before contract and yearly after it."]
    for number, body in enumerate(bodies, start=1):
        pdf.add_page()
        pdf.multi_cell(w=0, text="Example Corp Information Security Policy")
        pdf.ln(10)
        pdf.multi_cell(w=0, text=body)
        pdf.set_y(-25)
        pdf.multi_cell(w=0, text=f"November 2024  {number}")
    path = tmp_path / "policy.pdf"
    path.write_bytes(bytes(pdf.output()))
    workbench.ingest_documents("acme", [path])
    texts = [r.text for r in workbench.store.open_vendor("acme").records()
             if r.metadata.get("source") == "policy.pdf"]
    assert sorted(t.strip() for t in texts) == sorted(bodies)
