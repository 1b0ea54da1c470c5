"""Errors: a user's mistake (exit 2, one plain sentence) versus a fault of the program."""

from __future__ import annotations

import os
import re
from pathlib import Path

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class EvidenceError(Exception):
    """Base of every error the workbench raises on purpose."""


class UserInputError(EvidenceError):
    """The input is wrong; the message is one plain sentence naming what and where."""


class UnknownVendorError(UserInputError):
    """The store holds nothing for this vendor."""


class ModelUnavailableError(EvidenceError):
    """A model cannot be loaded here (not installed, and downloads are not allowed)."""


class StoreError(EvidenceError):
    """The store cannot be opened or written (server gone, incompatible schema)."""


def shown_path(path: Path | str) -> str:
    """A path as one line of a message: bytes that are not UTF-8 and control characters are
    escaped, so the sentence can be printed and stays on one line."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)
