"""What an embedded store's path may be: a folder (or a link to one), new, empty or already a
store. Anything else is refused in one sentence rather than read as an empty store."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from core.errors import UserInputError, shown_path

# The file ChromaDB creates first in a store folder, and that every store holds.
STORE_DATABASE = "chroma.sqlite3"


def check_store_path(store: Path, *, opening: bool = False) -> None:
    """Refuse a store path that cannot be a store: a file, a link to one, a named pipe or a
    device, a broken link, or a path under a file. With `opening` (ChromaDB is about to create
    its files there), also a folder that holds other things but no chroma.sqlite3, so that a
    store is never scattered among someone's files; reading such a folder is fine (it holds
    no evidence)."""
    shown = shown_path(store)
    try:
        mode = store.stat().st_mode  # through links: a link to a folder is a folder
    except FileNotFoundError:
        if store.is_symlink():
            raise UserInputError(
                f"The store path {shown} is a symbolic link to {shown_path(os.readlink(store))}, "
                "which does not exist.") from None
        return  # a new store: made at the first write
    except NotADirectoryError:
        raise UserInputError(
            f"The store path {shown} cannot be a folder, because part of it is a file.") from None
    except OSError as exc:  # a link loop, a folder that may not be searched
        raise UserInputError(f"The store path {shown} cannot be used ({exc.strerror}).") from None
    if not stat.S_ISDIR(mode):
        kind = ("a file" if stat.S_ISREG(mode) else "a named pipe" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a device")
        through = " (through a symbolic link)" if store.is_symlink() else ""
        raise UserInputError(f"The store path {shown} is {kind}{through}, not a folder.")
    if opening and not (store / STORE_DATABASE).exists():
        try:
            with os.scandir(store) as entries:
                names = sorted(entry.name for entry in entries)
        except OSError as exc:
            raise UserInputError(
                f"The store folder {shown} cannot be read ({exc.strerror}).") from None
        # Listed after the check above: another process may have made the store meanwhile.
        if names and STORE_DATABASE not in names:
            more = ", ..." if len(names) > 1 else ""
            raise UserInputError(
                f"The store folder {shown} holds {len(names):,} "
                f"{'entry' if len(names) == 1 else 'entries'} ({shown_path(names[0])}{more}) "
                f"but no {STORE_DATABASE}, so it is not an evidence store; give an empty or new "
                "folder, or an existing store.")
