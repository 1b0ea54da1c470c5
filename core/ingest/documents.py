"""Vendor documents (.md .txt .pdf) read, validated and chunked before anything is written."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import UserInputError
from core.hashing import file_digest
from core.ingest import decode_utf8, read_user_file

SUPPORTED_SUFFIXES = (".md", ".txt", ".pdf")
DOCUMENT_TYPES = ("tc_files", "followup_document", "soc2_summary:TRACK")
_SOC2_TRACK = re.compile(r"soc2_summary:[A-Za-z0-9][A-Za-z0-9_-]{0,62}")


@dataclass(frozen=True)
class DocumentFile:
    """A file found on disk and the name it is stored under."""

    path: Path
    source: str


@dataclass
class PreparedDocument:
    """A document read and chunked, ready to embed: nothing is written yet."""

    source: str
    path: Path
    digest: str
    chunks: list[tuple[str, int | None]] = field(default_factory=list)  # (text, page)
    pages: int | None = None


def check_document_type(doc_type: str, round_number: int | None) -> None:
    """Refuse a `type` outside seed 002's values, and a round where it makes no sense."""
    if doc_type == "followup_document":
        if round_number is None:
            raise UserInputError("--type followup_document needs --round N (the follow-up round).")
    elif doc_type == "tc_files" or _SOC2_TRACK.fullmatch(doc_type):
        if round_number is not None:
            raise UserInputError("--round applies only to --type followup_document.")
    else:
        raise UserInputError(
            f"Document type '{doc_type}' is not one of tc_files, followup_document or "
            "soc2_summary:TRACK."
        )
    if round_number is not None and round_number < 1:
        raise UserInputError(f"--round must be 1 or more, not {round_number}.")


def collect_files(paths: Iterable[Path]) -> list[DocumentFile]:
    """Files to ingest: explicit files by name, folders walked (links not followed)."""
    found: list[DocumentFile] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise UserInputError(f"{path} does not exist.")
        if path.is_dir():
            for root, dirs, files in os.walk(path, followlinks=False):
                dirs.sort()
                for name in sorted(files):
                    file = Path(root) / name
                    if file.suffix.lower() in SUPPORTED_SUFFIXES and not name.startswith("."):
                        found.append(DocumentFile(file, file.relative_to(path).as_posix()))
        elif path.suffix.lower() in SUPPORTED_SUFFIXES:
            found.append(DocumentFile(path, path.name))
        else:
            raise UserInputError(
                f"{path} is not a supported document; use .md, .txt or .pdf files."
            )
    by_source: dict[str, Path] = {}
    for doc in found:
        if doc.source in by_source and by_source[doc.source].resolve() != doc.path.resolve():
            raise UserInputError(
                f"{by_source[doc.source]} and {doc.path} would both be stored as "
                f"'{doc.source}'; ingest them in separate commands or rename one."
            )
        by_source[doc.source] = doc.path
    unique = {doc.source: doc for doc in found}
    if not unique:
        raise UserInputError("No .md, .txt or .pdf files were found in the given paths.")
    return list(unique.values())


def read_pages(path: Path, data: bytes) -> list[tuple[str, int | None]]:
    """The text of a document as (text, page number); pages are None for text files."""
    if path.suffix.lower() == ".pdf":
        return _read_pdf(path, data)
    if b"\x00" in data:
        raise UserInputError(f"{path} is not a text file (it contains NUL bytes).")
    return [(decode_utf8(path, data), None)]


def _read_pdf(path: Path, data: bytes) -> list[tuple[str, int | None]]:
    import io

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    if not data.startswith(b"%PDF-"):
        raise UserInputError(f"{path} is not a PDF file (it does not start with %PDF-).")
    # pypdf logs its repairs of damaged files; the refusal sentence below says it once.
    pypdf_logger = logging.getLogger("pypdf")
    saved_level = pypdf_logger.level
    pypdf_logger.setLevel(logging.CRITICAL)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise UserInputError(f"{path} is an encrypted PDF; decrypt it before ingesting.")
        return [(page.extract_text() or "", number)
                for number, page in enumerate(reader.pages, start=1)]
    except UserInputError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, IndexError, OSError) as exc:
        raise UserInputError(
            f"{path} is not a readable PDF ({' '.join(str(exc).split())[:120]})."
        ) from None
    finally:
        pypdf_logger.setLevel(saved_level)


def make_splitter(chunk_size: int, chunk_overlap: int, suffix: str):
    """langchain's recursive splitter; markdown-aware separators for .md files."""
    from langchain_text_splitters import MarkdownTextSplitter, RecursiveCharacterTextSplitter

    if suffix == ".md":
        return MarkdownTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)


def prepare_document(doc: DocumentFile, chunk_size: int, chunk_overlap: int) -> PreparedDocument:
    """Read and chunk one file; a PDF is split page by page so each chunk keeps its page."""
    data = read_user_file(doc.path)
    pages = read_pages(doc.path, data)
    splitter = make_splitter(chunk_size, chunk_overlap, doc.path.suffix.lower())
    chunks = [
        (piece, page)
        for text, page in pages
        for piece in splitter.split_text(text)
        if piece.strip()
    ]
    if not chunks:
        raise UserInputError(
            f"{doc.path} has no extractable text"
            + (" (a scanned PDF needs OCR first)." if doc.path.suffix.lower() == ".pdf" else ".")
        )
    return PreparedDocument(
        source=doc.source, path=doc.path, digest=file_digest(data), chunks=chunks,
        pages=len(pages) if doc.path.suffix.lower() == ".pdf" else None,
    )
