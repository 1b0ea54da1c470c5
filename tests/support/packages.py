"""A vendor package laid out as vendors send one: a filled CAIQ v4 and HECVAT 3 workbook, an
ISO 27001 statement of applicability, a policy PDF locked with an owner password, a
screenshot saved as PDF (no text layer), a certificate, and the hidden file a Mac leaves."""

from __future__ import annotations

import io
from pathlib import Path

from fpdf import FPDF
from pypdf import PdfReader, PdfWriter

from tests.support.questionnaires import Item, caiq_v4, hecvat_3, statement_of_applicability

KEY_ROTATION = "Keys are rotated every 90 days by the key management service."
ACCESS_REVIEW = "Access to production systems is reviewed every quarter by the security team."
REGISTRY = ["State registry of data processors", "Registration number 0842-7731-19",
            "Processor: Example Hosting Ltd", "Valid until 31 March 2026"]

CAIQ_ITEMS = [
    Item("CEK-12.1", "Are cryptographic keys rotated based on a cryptoperiod calculated while "
                     "considering information disclosure risks and legal and regulatory "
                     "requirements?", "Yes", KEY_ROTATION),
    Item("IAM-14.1", "Are strong authentication capabilities defined, implemented and "
                     "evaluated for all privileged access?", "Yes",
         "Hardware security keys are required for every administrator."),
]
HECVAT_ITEMS = {"Data": [Item("DATA-01", "Is data encrypted at rest?", "Yes",
                              "AES-256 on every volume and backup.")]}
SOA_ITEMS = [Item("A.5.1", "Policies for information security", "Yes",
                  "Approved by the board and reviewed every year.")]


def pdf_bytes(text: str) -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(w=0, text=text)
    return bytes(pdf.output())


def locked(data: bytes, *, user: str, owner: str, algorithm: str = "AES-256") -> bytes:
    """`data` encrypted: with `user` empty any viewer opens it (an owner password only)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user, owner_password=owner, algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def image_only_pdf(lines: list[str]) -> bytes:
    """A PDF whose one page is a picture of `lines` (a screenshot saved as PDF): no text
    layer at all."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 28)
    image = Image.new("L", (1600, 120 + 60 * len(lines)), 255)
    draw = ImageDraw.Draw(image)
    for at, line in enumerate(lines):
        draw.text((60, 60 + 60 * at), line, font=font, fill=0)
    picture = io.BytesIO()
    image.save(picture, format="PNG")
    pdf = FPDF()
    pdf.add_page()
    pdf.image(io.BytesIO(picture.getvalue()), x=10, y=10, w=190)
    return bytes(pdf.output())


def package_files(*, scanned: bool = True) -> dict[str, bytes]:
    """The package's files by their path inside it (`scanned` adds the screenshot PDF, which
    only an installed OCR engine reads)."""
    files = {
        "Example CAIQ.xlsx": caiq_v4(CAIQ_ITEMS),
        "HECVAT Full.xlsx": hecvat_3(HECVAT_ITEMS),
        "ISO 27001 Certificate.md": b"# ISO/IEC 27001:2022 certificate\n\nCertificate number "
                                    b"IS 771234, issued to Example Corp, valid until 2027.\n",
        "Statement of Applicability.xlsx": statement_of_applicability(SOA_ITEMS),
        "policies/Access Control Policy.pdf": locked(pdf_bytes(ACCESS_REVIEW), user="",
                                                     owner="vendor-legal"),
        ".DS_Store": b"\x00\x00\x00\x01Bud1",
    }
    if scanned:
        files["policies/registry listing.pdf"] = image_only_pdf(REGISTRY)
    return files


def write_package(folder: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder
