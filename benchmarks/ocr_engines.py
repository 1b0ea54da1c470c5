"""How well each OCR engine reads rendered English text: the measurement behind the choice
of Debian's tesseract for PDF pages without a text layer (core/ingest/documents/ocr.py).

Ten lines of our own compliance sentences (numbers, ids, dates among them) are drawn twice,
as a 200-dpi scan would show them (28-pixel text) and as a screenshot (14-pixel text), and
each engine's output is compared with them: the share of characters and of words read
right (difflib's ratio over the text with white space folded), and the seconds per page.

    python benchmarks/ocr_engines.py

tesseract must be installed (`make ocr-packages`); rapidocr-onnxruntime 1.4.4 (its models
ship in its wheel) is measured when importable (`pip install rapidocr-onnxruntime==1.4.4`),
and reported as not installed otherwise."""

from __future__ import annotations

import difflib
import io
import json
import sys
import time
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.ingest.documents.ocr import engine_version, read_image  # noqa: E402

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
LINES = [
    "Customer data is encrypted at rest with AES-256 in GCM mode.",
    "Encryption keys are stored in a hardware security module and rotated every 90 days.",
    "Access to production systems requires multi-factor authentication and is reviewed "
    "quarterly.",
    "Backups are taken daily, kept for 35 days and restored in a test every six months.",
    "The incident response plan names an on-call lead; customers are told within 72 hours.",
    "Penetration tests are run yearly by an independent firm; findings rated high are fixed "
    "in 30 days.",
    "TLS 1.2 or later protects data in transit; TLS 1.0 and 1.1 are disabled.",
    "Registry number: 0842-7731-19 (valid until 2026-03-31), issued by the state registry.",
    "Section 4.2 Vendor Risk Management - Policy ISP-07, version 3.1, approved by the CISO.",
    "Logs are retained for 13 months in write-once storage and reviewed by the security team.",
]


def render(size: int, width: int, margin: int) -> Image.Image:
    font = ImageFont.truetype(FONT, size)
    image = Image.new("L", (width, margin * 2 + int(len(LINES) * size * 1.6)), 255)
    draw = ImageDraw.Draw(image)
    for at, line in enumerate(LINES):
        draw.text((margin, margin + int(at * size * 1.6)), line, font=font, fill=0)
    return image


def png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def rapidocr_reader():
    try:
        import numpy as np
        from rapidocr_onnxruntime import RapidOCR
    except ImportError:
        return None
    engine = RapidOCR()

    def read(image: Image.Image) -> str:
        found, _ = engine(np.asarray(image.convert("RGB")))
        boxes = sorted(found or [], key=lambda r: (round(r[0][0][1] / 10), r[0][0][0]))
        return "\n".join(box[1] for box in boxes)

    return read


def accuracy(got: str) -> tuple[float, float]:
    expected = " ".join(" ".join(LINES).split())
    read = " ".join(got.split())
    chars = difflib.SequenceMatcher(None, expected, read, autojunk=False).ratio()
    words = difflib.SequenceMatcher(None, expected.split(), read.split(),
                                    autojunk=False).ratio()
    return chars, words


def main() -> None:
    pages = {"scan, 200 dpi (28 px text)": render(28, 2000, 80),
             "screenshot (14 px text)": render(14, 1000, 20)}
    engines = {engine_version() or "tesseract (not installed)":
               (lambda image: read_image(png(image))) if engine_version() else None,
               "rapidocr-onnxruntime 1.4.4": rapidocr_reader()}
    results = []
    for engine, read in engines.items():
        for page, image in pages.items():
            if read is None:
                results.append({"engine": engine, "page": page, "installed": False})
                continue
            read(image)  # the first call loads the engine's models
            started = time.perf_counter()
            text = read(image)
            seconds = time.perf_counter() - started
            chars, words = accuracy(text)
            results.append({"engine": engine, "page": page, "chars": round(chars, 4),
                            "words": round(words, 4), "seconds": round(seconds, 2)})
    for result in results:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
