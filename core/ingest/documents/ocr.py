"""Reading the text of a page that has no text layer (a scan, a screenshot saved as PDF) with
an OCR engine: Debian's `tesseract` (5.x), run as a program.

Tesseract was chosen over an OCR library whose models ship in its wheel (rapidocr-onnxruntime
1.4.4) by measuring both on rendered English text (benchmarks/README.md): tesseract read every
character of a 200-dpi page and of a screenshot's 14-pixel text; rapidocr read 75% and 82% of
the characters and ran words together. The project's setup installs it (`make
ocr-packages`, part of `make dashboard` and `make test`); without it, a page that needs OCR
is reported as unreadable in one sentence that says so, and nothing is guessed."""

from __future__ import annotations

import io
import shutil
import subprocess

ENGINE = "tesseract"
# Page images smaller than this carry no readable text (icons, rules, logos).
MIN_IMAGE_PIXELS = 40_000
TIMEOUT_S = 120


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


def read_image(data: bytes) -> str:
    """The text of one image (PNG, JPEG, TIFF...), read by tesseract as one block of text."""
    path = engine_path()
    if path is None:
        raise OcrUnavailable(f"no OCR engine is installed ({ENGINE}; run make ocr-packages, "
                             "or apt-get install tesseract-ocr)")
    try:
        done = subprocess.run([path, "stdin", "stdout", "--psm", "3"], input=data,
                              capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise OcrUnavailable(f"{ENGINE} did not finish within {TIMEOUT_S} s") from None
    if done.returncode != 0:
        detail = " ".join(done.stderr.decode("utf-8", "replace").split())[:200]
        raise OcrUnavailable(f"{ENGINE} failed ({detail})")
    return done.stdout.decode("utf-8", "replace")


def page_images(page) -> list[bytes]:
    """A PDF page's images large enough to hold text, as PNG bytes (pypdf decodes them)."""
    found = []
    for image in page.images:
        picture = image.image
        if picture is None or picture.width * picture.height < MIN_IMAGE_PIXELS:
            continue
        out = io.BytesIO()
        picture.save(out, format="PNG")
        found.append(out.getvalue())
    return found
