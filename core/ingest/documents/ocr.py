"""Reading the text of a page that has no text layer (a scan, a screenshot saved as PDF) with
an OCR engine: Debian's `tesseract` (5.x), run as a program.

Tesseract was chosen over an OCR library whose models ship in its wheel (rapidocr-onnxruntime
1.4.4) by measuring both on rendered English text (benchmarks/README.md): tesseract read every
character of a 200-dpi page and of a screenshot's 14-pixel text; rapidocr read 75% and 82% of
the characters and ran words together. The project's setup installs it (`make
ocr-packages`, part of `make dashboard` and `make test`); without it, a page that needs OCR
is reported as unreadable in one sentence that says so, and nothing is guessed.

A page is read whole: PDFium (pypdfium2) draws it as one grey picture, so a scan kept as one
large image, a page made of image strips and text drawn as outlines all reach the engine as
the reader sees them."""

from __future__ import annotations

import io
import math
import shutil
import subprocess

ENGINE = "tesseract"
TIMEOUT_S = 120
# Pages are drawn at 300 dpi, the resolution tesseract reads body text best at, and at most
# 18 million pixels (an A3 page at 300 dpi): a larger page is drawn smaller, so one page never
# takes more than about 18 MB of grey pixels.
RENDER_DPI = 300
MAX_RENDER_PIXELS = 18_000_000
POINTS_PER_INCH = 72


class OcrUnavailable(Exception):
    """No OCR engine is installed, or it failed on the image."""


def engine_path() -> str | None:
    return shutil.which(ENGINE)


def engine_version() -> str | None:
    """`tesseract 5.3.0`, or None when it is not installed."""
    path = engine_path()
    if path is None:
        return None
    done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    first = (done.stdout or done.stderr).splitlines()
    return first[0].strip() if first else ENGINE


def require_engine() -> str:
    """The engine's path, or OcrUnavailable saying how to install it."""
    path = engine_path()
    if path is None:
        raise OcrUnavailable(f"no OCR engine is installed ({ENGINE}; run make ocr-packages, "
                             "or apt-get install tesseract-ocr)")
    return path


def read_image(data: bytes) -> str:
    """The text of one image (PNG, JPEG, TIFF...), read by tesseract as one block of text."""
    path = require_engine()
    try:
        done = subprocess.run([path, "stdin", "stdout", "--psm", "3"], input=data,
                              capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise OcrUnavailable(f"{ENGINE} did not finish within {TIMEOUT_S} s") from None
    if done.returncode != 0:
        detail = " ".join(done.stderr.decode("utf-8", "replace").split())[:200]
        raise OcrUnavailable(f"{ENGINE} failed ({detail})")
    return done.stdout.decode("utf-8", "replace")


def render_scale(width: float, height: float) -> float:
    """Pixels per PDF point for a page of `width` x `height` points: RENDER_DPI, or less when
    that would pass MAX_RENDER_PIXELS."""
    scale = RENDER_DPI / POINTS_PER_INCH
    area = max(width * height, 1.0)
    return min(scale, math.sqrt(MAX_RENDER_PIXELS / area))


def page_picture(page) -> bytes | None:
    """A PDF page (a pypdfium2 page) drawn whole in grey as a PNG for OCR, its resolution
    recorded in the file so tesseract sizes the text right; None when the page is one flat
    colour (a blank page has nothing to read)."""
    scale = render_scale(*page.get_size())
    bitmap = page.render(scale=scale, grayscale=True)
    try:
        picture = bitmap.to_pil()
        darkest, lightest = picture.getextrema()
        if darkest == lightest:
            return None
        out = io.BytesIO()
        dpi = round(scale * POINTS_PER_INCH)
        picture.save(out, format="PNG", dpi=(dpi, dpi), compress_level=1)
        return out.getvalue()
    finally:
        bitmap.close()
