"""PDF (.pdf) with pypdf: one part per page, so each chunk keeps its page."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from core.errors import UserInputError
from core.ingest import shown_path
from core.ingest.documents.chunks import DocumentText, _detail


def _read_pdf(path: Path, data: bytes) -> list[DocumentText]:
    from pypdf import PdfReader

    shown = shown_path(path)
    if not data.startswith(b"%PDF-"):
        raise UserInputError(f"{shown} is not a PDF file (it does not start with %PDF-).")
    # pypdf logs its repairs of damaged files; the refusal sentence below says it once.
    pypdf_logger = logging.getLogger("pypdf")
    saved_level = pypdf_logger.level
    pypdf_logger.setLevel(logging.CRITICAL)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise UserInputError(f"{shown} is an encrypted PDF; decrypt it before ingesting.")
        # NUL characters come from fonts without a text mapping; they carry no words.
        return [DocumentText((page.extract_text() or "").replace("\x00", ""), number)
                for number, page in enumerate(reader.pages, start=1)]
    except UserInputError:
        raise
    except Exception as exc:  # a damaged file can break any part of the parser
        raise UserInputError(f"{shown} is not a readable PDF ({_detail(exc)}).") from None
    finally:
        pypdf_logger.setLevel(saved_level)
