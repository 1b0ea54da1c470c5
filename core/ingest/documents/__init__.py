"""Vendor documents (.md .txt .pdf .docx .html .htm) read, validated and chunked before
anything is written.

Word files and web pages are turned into Markdown-like text (headings as `#` lines, list
items as `- ` lines, tables as pipe tables) and then split like Markdown. Every chunk of a
document with headings carries the heading path in force where it starts (its section).

The modules, each importing only those above it: `chunks` (the parts a reader returns, the
section paths, the splitter, the chunks), `text` (Markdown and plain text, and the
Markdown-like text the Word and web-page readers build), `pdf`, `docx` and `html` (one reader
each), `files` (the file checks, and `prepare_document` reading a file with the reader for
its format). This package itself only re-exports them."""

from core.ingest.documents.chunks import (
    MARKDOWN_SUFFIXES,
    SECTION_SEPARATOR,
    Chunk,
    DocumentText,
    Heading,
    make_splitter,
    section_paths,
    split_document_text,
)
from core.ingest.documents.docx import MAX_DOCX_PARTS, MAX_DOCX_UNPACKED_BYTES
from core.ingest.documents.files import (
    DOCUMENT_TYPES,
    SUPPORTED_LIST,
    SUPPORTED_SUFFIXES,
    DocumentFile,
    PreparedDocument,
    check_document_type,
    check_documents,
    collect_files,
    prepare_document,
    read_document,
    refuse_unreadable,
    walk_folder,
)
from core.ingest.documents.text import MAX_HEADING_CHARS, MarkdownText, markdown_headings

__all__ = [
    "DOCUMENT_TYPES", "MARKDOWN_SUFFIXES", "MAX_DOCX_PARTS", "MAX_DOCX_UNPACKED_BYTES",
    "MAX_HEADING_CHARS", "SECTION_SEPARATOR", "SUPPORTED_LIST", "SUPPORTED_SUFFIXES", "Chunk",
    "DocumentFile", "DocumentText", "Heading", "MarkdownText", "PreparedDocument",
    "check_document_type", "check_documents", "collect_files", "make_splitter",
    "markdown_headings", "prepare_document", "read_document", "refuse_unreadable", "section_paths",
    "split_document_text", "walk_folder",
]
