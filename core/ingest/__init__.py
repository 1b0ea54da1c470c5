"""Ingestion: vendor documents into chunks, questionnaire rounds into follow-up records."""

from __future__ import annotations

from pathlib import Path

from core.errors import UserInputError


def read_user_file(path: Path) -> bytes:
    """A file the user named, or one sentence saying why it cannot be read."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise UserInputError(f"{path} does not exist.") from None
    except IsADirectoryError:
        raise UserInputError(f"{path} is a folder, not a file.") from None
    except OSError as exc:
        raise UserInputError(f"{path} cannot be read ({exc.strerror}).") from None


def decode_utf8(path: Path, data: bytes) -> str:
    """UTF-8 text (a BOM is allowed), or one sentence naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserInputError(
            f"{path} is not valid UTF-8 text (byte {exc.start} cannot be decoded)."
        ) from None
