"""Which files a document ingest takes and what it makes of each: the checks that need neither
the store nor the file contents (type, round, the files found, their sizes), then one file
read by the reader for its format and chunked, nothing written yet."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.config import MAX_DOCUMENT_BYTES, MAX_ROUND_NUMBER
from core.errors import UserInputError
from core.hashing import file_digest
from core.ingest import read_user_file, refuse_too_large, shown_path, unreadable_reason
from core.ingest.documents.chunks import Chunk, DocumentText, make_splitter, split_document_text
from core.ingest.documents.docx import _read_docx
from core.ingest.documents.html import _read_html
from core.ingest.documents.pdf import _read_pdf
from core.ingest.documents.text import _read_text
from core.ingest.steps import step
from core.models import DocumentFacts
from core.reports import SkippedFile
from core.timeline.reading import read_facts

SUPPORTED_SUFFIXES = (".md", ".txt", ".pdf", ".docx", ".html", ".htm")
SUPPORTED_LIST = ".md, .txt, .pdf, .docx, .html or .htm"
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
    chunks: list[Chunk] = field(default_factory=list)
    pages: int | None = None
    facts: DocumentFacts = field(default_factory=DocumentFacts)


def check_document_type(doc_type: str, round_number: int | None) -> None:
    """Refuse a `type` outside seed 002's values, and a round where it makes no sense."""
    if not isinstance(doc_type, str):
        raise UserInputError(f"Document type {doc_type!r} is not text.")
    if round_number is not None and (isinstance(round_number, bool)
                                     or not isinstance(round_number, int)):
        raise UserInputError(f"--round must be a whole number, not {round_number!r}.")
    if doc_type == "followup_document":
        if round_number is None:
            raise UserInputError("--type followup_document needs --round N (the follow-up round).")
    elif doc_type == "tc_files" or _SOC2_TRACK.fullmatch(doc_type):
        if round_number is not None:
            raise UserInputError("--round applies only to --type followup_document.")
    else:
        raise UserInputError(
            f"Document type '{shown_path(doc_type)}' is not one of tc_files, followup_document "
            "or soc2_summary:TRACK."
        )
    if round_number is not None and round_number < 1:
        raise UserInputError(f"--round must be 1 or more, not {round_number}.")
    if round_number is not None and round_number > MAX_ROUND_NUMBER:
        raise UserInputError(f"--round must be {MAX_ROUND_NUMBER} or less, not {round_number}.")


def collect_files(paths: Iterable[Path]) -> list[DocumentFile]:
    """Files to ingest: explicit files by name, folders walked. Links to folders are not
    followed, but one that leads back into the walk (a loop) is refused, as is any folder
    the walk cannot read."""
    found: list[DocumentFile] = []
    for path in paths:
        path = Path(path)
        _check_given_path(path)
        if path.is_dir():
            found.extend(_walk(path))
        elif path.suffix.lower() in SUPPORTED_SUFFIXES:
            found.append(DocumentFile(path, _source_name(path, path.name)))
        else:
            raise UserInputError(
                f"{shown_path(path)} is not a supported document; use {SUPPORTED_LIST} files."
            )
    by_source: dict[str, Path] = {}
    for doc in found:
        if doc.source in by_source and not _same_file(by_source[doc.source], doc.path):
            raise UserInputError(
                f"{shown_path(by_source[doc.source])} and {shown_path(doc.path)} would both be "
                f"stored as '{doc.source}'; ingest them in separate commands or rename one."
            )
        by_source[doc.source] = doc.path
    unique = {doc.source: doc for doc in found}
    if not unique:
        raise UserInputError(f"No {SUPPORTED_LIST} files were found in the given paths.")
    return list(unique.values())


def _check_given_path(path: Path) -> None:
    if "\x00" in str(path):
        raise UserInputError(
            f"{shown_path(path)} is not a usable path (it contains a NUL character).")
    try:
        path.stat()
    except OSError as exc:
        raise UserInputError(unreadable_reason(path, exc)) from None


def walk_folder(folder: Path, *, hidden_folders: bool = True) -> list[Path]:
    """Every file under `folder`, folder by folder in name order. Links to folders are not
    followed (one that leads back into the walk is refused), nor are hidden folders unless
    `hidden_folders`; a folder the walk cannot read is refused."""
    def refuse(exc: OSError) -> None:
        raise UserInputError(
            f"{shown_path(exc.filename or folder)} cannot be read ({exc.strerror}).")

    found = []
    for root, dirs, files in os.walk(folder, followlinks=False, onerror=refuse):
        dirs[:] = sorted(d for d in dirs if hidden_folders or not d.startswith("."))
        for name in dirs:
            linked = Path(root) / name
            if linked.is_symlink():
                _refuse_folder_loop(linked, Path(root))
        found.extend(Path(root) / name for name in sorted(files))
    return found


def _walk(folder: Path) -> list[DocumentFile]:
    return [DocumentFile(file, _source_name(file, file.relative_to(folder).as_posix()))
            for file in walk_folder(folder)
            if file.suffix.lower() in SUPPORTED_SUFFIXES and not file.name.startswith(".")]


def _refuse_folder_loop(link: Path, parent: Path) -> None:
    """A link to a folder is skipped, unless it leads back to where the walk already is."""
    try:
        target = link.resolve(strict=True)
        inside = parent.resolve(strict=True)
    except (OSError, RuntimeError):  # it is not followed, so what it leads to does not matter
        return
    if inside.is_relative_to(target):
        raise UserInputError(
            f"{shown_path(link)} is a symbolic link loop (it leads back to a folder that "
            "contains it); remove the link or ingest the files another way.")


def _source_name(path: Path, source: str) -> str:
    """The name a document is stored under; it must be text the store and a reader can hold."""
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        raise UserInputError(
            f"{shown_path(path)} has a name that is not valid UTF-8; rename the file.") from None
    return source


def _same_file(first: Path, second: Path) -> bool:
    try:
        return first.resolve(strict=True) == second.resolve(strict=True)
    except (OSError, RuntimeError):
        return False


def check_documents(paths: Iterable[Path], *, doc_type: str, round_number: int | None,
                    max_bytes: int = MAX_DOCUMENT_BYTES,
                    skip_unreadable: bool = False) -> list[DocumentFile]:
    """Every check of a document ingest that needs neither the store nor the file contents:
    type, round, the files found and their sizes (a file too large is left to the reading
    when unreadable files are to be skipped)."""
    check_document_type(doc_type, round_number)
    files = collect_files(paths)
    for doc in [] if skip_unreadable else files:
        try:
            size = doc.path.stat().st_size
        except OSError:
            continue  # reading it reports why, in its own sentence
        refuse_too_large(shown_path(doc.path), size, max_bytes, "a document")
    return files


def refuse_unreadable(skipped: Sequence[SkippedFile], skip_unreadable: bool,
                      total: int) -> None:
    """Refuse an ingest with files that cannot be read: one names itself as it always has,
    several are named in one sentence; with `skip_unreadable`, only when none is left."""
    if not skipped:
        return
    reasons = "; ".join(s.reason.removesuffix(".") for s in skipped)
    if not skip_unreadable:
        if len(skipped) == 1:
            raise UserInputError(skipped[0].reason)
        raise UserInputError(f"{len(skipped)} files cannot be read, so nothing was written: "
                             f"{reasons}; fix them, or ingest the rest with --skip-unreadable.")
    if len(skipped) == total:
        raise UserInputError(f"No file could be read, so nothing was written: {reasons}.")


def read_document(path: Path, data: bytes) -> list[DocumentText]:
    """The text of a document: one part per PDF page, one part for any other file."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        with step("pdf_text"):
            return _read_pdf(path, data)
    if data.startswith(b"%PDF-"):
        raise UserInputError(
            f"{shown_path(path)} is a PDF file with a {path.suffix} name; rename it to .pdf.")
    with step("read_other"):
        if suffix == ".docx":
            return [_read_docx(path, data)]
        if suffix in (".html", ".htm"):
            return [_read_html(path, data)]
        return [_read_text(path, data)]


def prepare_document(doc: DocumentFile, chunk_size: int, chunk_overlap: int, *,
                     max_bytes: int = MAX_DOCUMENT_BYTES) -> PreparedDocument:
    """Read and chunk one file; a PDF is split page by page so each chunk keeps its page, a
    document with headings so each chunk knows its section."""
    data = read_user_file(doc.path, max_bytes=max_bytes, what="a document")
    parts = read_document(doc.path, data)
    suffix = doc.path.suffix.lower()
    with step("split"):
        splitter = make_splitter(chunk_size, chunk_overlap, suffix)
        chunks = [chunk for part in parts
                  for chunk in split_document_text(part, splitter, chunk_overlap)]
        if not chunks:
            raise UserInputError(
                f"{shown_path(doc.path)} has no extractable text"
                + (" (no page has a text layer or an image with text)." if suffix == ".pdf"
                   else ".")
            )
        facts = read_facts([part.text for part in parts], source=doc.source,
                           headings=[h.title for part in parts for h in part.headings])
    return PreparedDocument(
        source=doc.source, path=doc.path, digest=file_digest(data), chunks=chunks,
        pages=len(parts) if suffix == ".pdf" else None, facts=facts,
    )
