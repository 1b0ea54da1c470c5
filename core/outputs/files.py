"""Files the workbench writes for a reviewer (reports, drafted rounds): whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from core.errors import UserInputError, shown_path


def write_output(path: Path | str, data: str | bytes, *, what: str = "output") -> Path:
    """Write `data` to `path` through a temporary file beside it, renamed over the target, so
    a reader never sees half a file; an existing file keeps its permissions."""
    path = Path(path)
    folder = path.parent
    shown = shown_path(path)
    if not folder.is_dir():
        raise UserInputError(
            f"The folder {shown_path(folder)} of the {what} file {shown_path(path.name)} does "
            "not exist; create it or choose another path.")
    if path.is_dir():
        raise UserInputError(f"The {what} path {shown} is a folder; give a file name.")
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    try:
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except PermissionError:
        raise UserInputError(
            f"The folder {shown_path(folder)} of the {what} file {shown_path(path.name)} is not "
            "writable.") from None
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
