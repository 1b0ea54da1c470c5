"""Folders built once per test run and read by every test process of it.

Under pytest-xdist each worker is a process with its own session fixtures, so a store built
with the real model in a session fixture was built once per worker. A folder made here is
built by the first worker that asks (the others wait on a lock, then read it) and by the
session itself when the run has no workers."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], None]) -> Path:
    """The folder `name`, which `build(folder)` filled once in this test run; read it, never
    change it (copy it first)."""
    base = factory.getbasetemp()
    # Workers' base folders share one parent that belongs to this run alone.
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / f"built-once-{name}"
    with (root / f"built-once-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not folder.is_dir():
            partial = root / f"built-once-{name}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
            build(partial)
            partial.rename(folder)  # a build that failed leaves no folder behind
    return folder
