"""Ingestion: vendor documents into chunks, questionnaire rounds into follow-up records."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import UserInputError, shown_path

if TYPE_CHECKING:
    from core.models import QuestionnairePayload

def describe_size(size: int) -> str:
    """Bytes as a person reads them: 950 bytes, 12.3 kB, 52.4 MB."""
    if size < 1000:
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.3g} kB"
    return f"{size / 1_000_000:.3g} MB"


def refuse_too_large(name: str, size: int, max_bytes: int, what: str) -> None:
    """One sentence for a file over its limit; the limit is shown as well as the size."""
    if size > max_bytes:
        shown_size, shown_limit = describe_size(size), describe_size(max_bytes)
        if shown_size == shown_limit:  # just over: rounding would make the two look equal
            shown_size, shown_limit = f"{size:,} bytes", f"{max_bytes:,} bytes"
        raise UserInputError(f"{name} is {shown_size}; {what} may be at most {shown_limit}.")


def read_user_file(path: Path, *, max_bytes: int | None = None, what: str = "a file") -> bytes:
    """A regular file the user named, at most max_bytes long, or one sentence saying why not.

    Pipes and devices are refused before a byte is read: reading one could wait forever or
    never end. The file is opened without blocking and checked on the open handle, so what is
    checked is what is read."""
    path = Path(path)
    shown = shown_path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except ValueError:  # a NUL character: no file can have this name
        raise UserInputError(
            f"{shown} is not a usable file name (it contains a NUL character).") from None
    except OSError as exc:
        raise UserInputError(unreadable_reason(path, exc)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise UserInputError(f"{shown} is a folder, not a file.")
        if not stat.S_ISREG(info.st_mode):
            raise UserInputError(
                f"{shown} is not a regular file (a pipe, device or socket cannot be ingested).")
        if max_bytes is not None:
            refuse_too_large(shown, info.st_size, max_bytes, what)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        try:
            data = handle.read(-1 if max_bytes is None else max_bytes + 1)
        except OSError as exc:
            raise UserInputError(unreadable_reason(path, exc)) from None
    if max_bytes is not None:  # the file grew after it was measured
        refuse_too_large(shown, len(data), max_bytes, what)
    return data


def unreadable_reason(path: Path, exc: OSError) -> str:
    """One sentence for a path that cannot be opened, naming a broken link or a link loop."""
    shown = shown_path(path)
    if exc.errno == errno.ENOENT:
        if Path(path).is_symlink():
            return (f"{shown} is a symbolic link to {shown_path(os.readlink(path))}, which does "
                    "not exist.")
        return f"{shown} does not exist."
    if exc.errno == errno.ELOOP:
        return f"{shown} is a symbolic link loop (following it never reaches a file)."
    if exc.errno == errno.EISDIR:
        return f"{shown} is a folder, not a file."
    return f"{shown} cannot be read ({exc.strerror})."


def decode_utf8(path: Path | str, data: bytes) -> str:
    """UTF-8 text (a BOM is allowed), or one sentence naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserInputError(
            f"{shown_path(path)} is not valid UTF-8 text (byte {exc.start} cannot be decoded)."
        ) from None


@dataclass(frozen=True)
class LoadedRound:
    """A questionnaire round read from a file and validated, ready to ingest, and what was
    read differently from the file as shown (a spreadsheet's date cell, an ignored column)."""

    payload: QuestionnairePayload
    source: str
    notes: list[str] = field(default_factory=list)
    layout: str | None = None  # "CAIQ v4.0.3", "guessed: id=A,...", "bulk payload"
    first_answers: list[dict[str, Any]] = field(default_factory=list)  # as the file has them
    sheets: dict[str, Any] | None = None  # a workbook's sheets read and left out

    def dry_run_line(self, shown: int = 3) -> dict[str, Any]:
        """What `ingest questionnaire --dry-run` prints for the file: what it would become,
        how it was read and its first answers; nothing is written."""
        count = len(self.payload.responses)
        layout = self.layout or "bulk payload"
        return {"file": self.source, "became": "round", "layout": layout,
                "round_number": self.payload.round_number, "answers": count,
                **({"sheets": self.sheets} if self.sheets is not None else {}),
                "preview": self.first_answers[:shown],
                "reason": f"a questionnaire ({layout}): {count:,} answer"
                          f"{'' if count == 1 else 's'}; round {self.payload.round_number} of "
                          f"{self.payload.vendor_id}."}
