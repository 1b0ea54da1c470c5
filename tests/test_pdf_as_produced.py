"""PDFs laid out as producers write them, each built here object by object: a scan kept as one
large image (600 dpi colour, past pypdf's decompression limit), a page made of image strips,
text drawn as glyph outlines (no text layer), and a letter whose text layer holds a run per word
and per space in the two layouts that make pypdf end a line after every word. What a reviewer
sees is checked: the chunk text, the "read by OCR" mark, the refusal sentence."""

from __future__ import annotations

import random
import shutil
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

from core.errors import UserInputError
from tests.support.packages import locked

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
CERTIFICATE = ["Certificate of Registration", "Certificate number IS 771234",
               "Issued to Example Hosting Ltd", "Valid until 31 March 2027"]
LETTER = ("FedRAMP has determined that the Example Cloud service meets the requirements of a "
          "moderate authorization. The authorization is effective from 12 May 2024 and is "
          "reviewed every year. Continuous monitoring deliverables are due on the first working "
          "day of every month. Significant changes are reported thirty days before they are "
          "made, and incidents are reported within one hour of being found.")

needs_ocr = pytest.mark.skipif(
    not shutil.which("tesseract"),
    reason="the OCR engine (tesseract) is installed by make ocr-packages")


# Building PDFs --------------------------------------------------------------------------------

def stream(dictionary: str, data: bytes) -> bytes:
    return f"<< {dictionary} /Length {len(data)} >>\nstream\n".encode() + data + b"\nendstream"


def one_page_pdf(content: bytes, resources: str, objects: Sequence[bytes] = (),
                 size: tuple[float, float] = (612, 792)) -> bytes:
    """A PDF of one page: `objects` are numbered from 1 (so `resources` can refer to them),
    then the page's content stream, the page, the page tree and the catalog, with the
    cross-reference table a writer puts at the end."""
    body = [*objects, stream("", content)]
    contents, page, pages, catalog = len(body), len(body) + 1, len(body) + 2, len(body) + 3
    body.append(f"<< /Type /Page /Parent {pages} 0 R /MediaBox [0 0 {size[0]} {size[1]}] "
                f"/Resources {resources} /Contents {contents} 0 R >>".encode())
    body.append(f"<< /Type /Pages /Kids [{page} 0 R] /Count 1 >>".encode())
    body.append(f"<< /Type /Catalog /Pages {pages} 0 R >>".encode())
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, obj in enumerate(body, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(body) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += (f"trailer\n<< /Size {len(body) + 1} /Root {catalog} 0 R >>\nstartxref\n{xref}\n"
            "%%EOF\n").encode()
    return bytes(out)


def text_picture(lines: list[str], width: int, font_px: int, background=None) -> Image.Image:
    """`lines` drawn in black on white (or on `background`), a line every 2 font heights."""
    height = font_px * (2 * len(lines) + 2)
    picture = background or Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(picture)
    font = ImageFont.truetype(FONT, font_px)
    for at, line in enumerate(lines):
        draw.text((font_px * 4, font_px * (1 + 2 * at)), line, font=font, fill=0)
    return picture


def large_scan_pdf() -> bytes:
    """A scanner's page: US letter at 600 dpi in colour, one Flate-compressed image of 100 MB of
    pixels, the text on a grain of paper that keeps it from compressing away."""
    width, height, font_px = 5100, 6600, 100
    rows = font_px * (2 * len(CERTIFICATE) + 2)
    grain = random.Random(1).randbytes(width * rows)
    paper = Image.frombytes("L", (width, rows), grain.translate(bytes(
        232 + (v & 3) * 7 for v in range(256))))
    band = text_picture(CERTIFICATE, width, font_px, paper).convert("RGB").tobytes()
    white_row = b"\xff" * (width * 3)
    packer = zlib.compressobj(6)
    top = 600
    pixels = [packer.compress(white_row * top), packer.compress(band),
              packer.compress(white_row * (height - top - rows)), packer.flush()]
    image = stream(f"/Type /XObject /Subtype /Image /Width {width} /Height {height} "
                   "/ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /FlateDecode",
                   b"".join(pixels))
    return one_page_pdf(b"q 612 0 0 792 0 0 cm /Im0 Do Q", "<< /XObject << /Im0 1 0 R >> >>",
                        [image])


def image_strips_pdf(strip_rows: int = 25) -> bytes:
    """A page at 300 dpi written as image strips `strip_rows` pixels high, each its own image
    placed under the one before, so every line of text is cut across several strips."""
    width = 2550
    picture = text_picture(CERTIFICATE, width, 60)
    picture = picture.crop((0, 0, width, picture.height // strip_rows * strip_rows))
    objects, names, content = [], [], []
    strip_height = strip_rows * 72 / 300
    for at, top in enumerate(range(0, picture.height, strip_rows)):
        strip = picture.crop((0, top, width, top + strip_rows)).tobytes()
        objects.append(stream(f"/Type /XObject /Subtype /Image /Width {width} "
                              f"/Height {strip_rows} /ColorSpace /DeviceGray "
                              "/BitsPerComponent 8 /Filter /FlateDecode", zlib.compress(strip)))
        names.append(f"/S{at} {at + 1} 0 R")
        y = 792 - 36 - (at + 1) * strip_height
        content.append(f"q 612 0 0 {strip_height:.4f} 0 {y:.4f} cm /S{at} Do Q")
    return one_page_pdf("\n".join(content).encode(),
                        "<< /XObject << " + " ".join(names) + " >> >>", objects)


def outlined_text_pdf(lines: list[str], size: float = 20) -> bytes:
    """A page whose text is drawn as the glyphs' outlines (filled paths, as when text is
    converted to outlines before export): no font, no text layer, no image."""
    from fontTools.pens.basePen import BasePen
    from fontTools.ttLib import TTFont

    font = TTFont(FONT)
    glyphs, cmap, advances = font.getGlyphSet(), font.getBestCmap(), font["hmtx"]
    scale = size / font["head"].unitsPerEm
    operators: list[str] = []

    class Outline(BasePen):
        def __init__(self, x: float, y: float) -> None:
            super().__init__(glyphs)
            self.x, self.y = x, y

        def at(self, point) -> str:
            return f"{self.x + point[0] * scale:.2f} {self.y + point[1] * scale:.2f}"

        def _moveTo(self, point) -> None:
            operators.append(f"{self.at(point)} m")

        def _lineTo(self, point) -> None:
            operators.append(f"{self.at(point)} l")

        def _curveToOne(self, one, two, three) -> None:
            operators.append(f"{self.at(one)} {self.at(two)} {self.at(three)} c")

        def _closePath(self) -> None:
            operators.append("h")

    for at, line in enumerate(lines):
        x, y = 72.0, 700 - at * size * 2
        for char in line:
            name = cmap[ord(char)]
            glyphs[name].draw(Outline(x, y))
            x += advances[name][0] * scale
        operators.append("f")
    return one_page_pdf(("0 g\n" + "\n".join(operators)).encode(), "<< >>")


def word_runs(text: str, size: float = 11, width: float = 468) -> list[tuple[float, float, str]]:
    """(x, y, run) for every word and every space between words of `text` set in Helvetica
    on a letter page, a run each, wrapped at `width` points."""
    metrics = FPDF(unit="pt")
    metrics.set_font("helvetica", size=size)
    runs, x, y = [], 72.0, 700.0
    for word in text.split(" "):
        if x > 72 and x + metrics.get_string_width(word) > 72 + width:
            runs.pop()  # a line does not end with its space run
            x, y = 72.0, y - size * 1.25
        runs.append((x, y, word))
        x += metrics.get_string_width(word)
        runs.append((x, y, " "))
        x += metrics.get_string_width(" ")
    return runs[:-1]


HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"


def word_per_run_letter(layout: str) -> bytes:
    """The letter's text layer as a run per word and per space, each in its own BT..ET at its
    own text position. `forms`: every run drawn from its own form XObject placed with `cm`.
    `raised spaces`: the words on the baseline, each space run on its own text position one
    font size above it. `flipped clips`: as a browser's document renderer writes it, the
    page flipped top to bottom, every run in a clip rectangle of its own, scaled by 0.75,
    its text matrix flipped back and the baseline set by a Td below it."""
    runs = word_runs(LETTER)
    if layout == "forms":
        objects = [HELVETICA] + [
            stream("/Type /XObject /Subtype /Form /BBox [0 0 300 20] "
                   "/Resources << /Font << /F1 1 0 R >> >>",
                   f"BT /F1 11 Tf 0 4 Td ({run}) Tj ET".encode()) for _, _, run in runs]
        content = "\n".join(f"q 1 0 0 1 {x:.2f} {y - 4:.2f} cm /R{at} Do Q"
                            for at, (x, y, _) in enumerate(runs))
        names = " ".join(f"/R{at} {at + 2} 0 R" for at in range(len(runs)))
        return one_page_pdf(content.encode(), f"<< /XObject << {names} >> >>", objects)
    if layout == "flipped clips":
        content = "1 0 0 -1 0 792 cm\n" + "\n".join(
            f"q {x:.2f} {792 - y - 12:.2f} 300 16 re W* n "
            f"q .75 0 0 .75 {x:.2f} {792 - y - 12:.2f} cm "
            f"BT /F1 14.666667 Tf 1 0 0 -1 0 -1.3 Tm 0 -13.7 Td ({run}) Tj ET Q Q"
            for x, y, run in runs)
        return one_page_pdf(content.encode(), "<< /Font << /F1 1 0 R >> >>", [HELVETICA])
    content = "\n".join(f"BT /F1 11 Tf 1 0 0 1 {x:.2f} {y + (11 if run == ' ' else 0):.2f} Tm "
                        f"({run}) Tj ET" for x, y, run in runs)
    return one_page_pdf(content.encode(), "<< /Font << /F1 1 0 R >> >>", [HELVETICA])


# Reading them -------------------------------------------------------------------------------

def ingest(workbench, tmp_path: Path, name: str, data: bytes) -> list:
    path = tmp_path / name
    path.write_bytes(data)
    workbench.ingest_documents("acme", [path])
    return [r for r in workbench.store.open_vendor("acme").records()
            if r.metadata.get("source") == name]


def flat(text: str) -> str:
    return " ".join(text.split())


@needs_ocr
def test_a_scan_kept_as_one_large_image_is_read_by_ocr(workbench, tmp_path):
    data = large_scan_pdf()
    assert len(data) > 1_000_000
    [chunk] = ingest(workbench, tmp_path, "ISO certificate.pdf", data)
    assert "Certificate number IS 771234" in chunk.text
    assert "Issued to Example Hosting Ltd" in chunk.text
    assert chunk.metadata["ocr"] is True and chunk.metadata["page"] == 1


@needs_ocr
def test_a_page_made_of_image_strips_is_read_as_one_page(workbench, tmp_path):
    [chunk] = ingest(workbench, tmp_path, "registration.pdf", image_strips_pdf())
    assert "Certificate number IS 771234" in chunk.text
    assert "Valid until 31 March 2027" in chunk.text
    assert chunk.metadata["ocr"] is True


@needs_ocr
def test_text_drawn_as_outlines_is_read_by_ocr(workbench, tmp_path):
    [chunk] = ingest(workbench, tmp_path, "attestation.pdf", outlined_text_pdf(CERTIFICATE))
    assert "Certificate number IS 771234" in chunk.text
    assert "Issued to Example Hosting Ltd" in chunk.text
    assert chunk.metadata["ocr"] is True


@needs_ocr
def test_an_outlined_page_locked_with_an_owner_password_is_read_by_ocr(workbench, tmp_path):
    data = locked(outlined_text_pdf(CERTIFICATE), user="", owner="vendor-legal",
                  algorithm="AES-256")
    [chunk] = ingest(workbench, tmp_path, "locked attestation.pdf", data)
    assert "Certificate number IS 771234" in chunk.text
    assert chunk.metadata["ocr"] is True


def test_a_page_that_needs_ocr_without_an_engine_is_refused_in_one_sentence(
        workbench, tmp_path, monkeypatch):
    path = tmp_path / "attestation.pdf"
    path.write_bytes(outlined_text_pdf(CERTIFICATE))
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs"))
    with pytest.raises(UserInputError) as caught:
        workbench.ingest_documents("acme", [path])
    assert str(caught.value) == (
        f"{path} has no text layer, and its pages cannot be read by OCR: no OCR engine is "
        "installed (tesseract; run make ocr-packages, or apt-get install tesseract-ocr).")
    assert workbench.vendor_ids() == []


@pytest.mark.parametrize("layout", ["forms", "raised spaces", "flipped clips"])
def test_a_letter_with_a_word_per_run_is_chunked_in_lines(workbench, tmp_path, layout):
    chunks = ingest(workbench, tmp_path, "authorization letter.pdf", word_per_run_letter(layout))
    lines = [line.strip() for c in chunks for line in c.text.splitlines() if line.strip()]
    assert lines[0].startswith("FedRAMP has determined that the Example Cloud service")
    assert all(len(line.split()) > 3 for line in lines[:-1])
    assert flat(" ".join(c.text for c in chunks)) == LETTER
    assert not any(c.metadata.get("ocr") for c in chunks)
