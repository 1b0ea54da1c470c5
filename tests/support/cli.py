"""Running the `evidence` command as the tests do: in this process through `core.cli.main`
(with pytest's capsys or capfd catching its output), or as a new process; and reading what it
wrote: its JSON lines, or the one line of its refusal."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.support.sentences import one_sentence
from tests.support.warm import run_cli

Arg = str | bytes | os.PathLike | int  # bytes are passed as they are, the others as str()

# Which stdout lines `json_lines` parses: the ones not blank (the default), the ones that
# open a JSON object (`is_object`, for commands that print text around their records), or
# every line (None).
LineFilter = Callable[[str], object] | None


def _argv(args: tuple[Arg, ...]) -> list[str | bytes]:
    return [arg if isinstance(arg, bytes) else str(arg) for arg in args]


# How the command begins the one line it writes to stderr when it refuses or fails.
ERROR = "evidence: error: "


def error_message(err: str) -> str:
    """The message of the command's stderr `err`, which must be one error line and nothing
    else: `evidence: error: MESSAGE`, the message one line ending in a full stop, with no
    traceback."""
    assert err.count("\n") == 1 and err.endswith("\n") and err.startswith(ERROR), err
    message = err.strip().removeprefix(ERROR)
    assert one_sentence(message, quotes_input=True), err
    return message


def is_object(line: str) -> bool:
    return line.startswith("{")


def json_lines(text: str, keep: LineFilter = str.strip) -> list[Any]:
    """The lines of `text` that `keep` accepts, each parsed as JSON."""
    return [json.loads(line) for line in text.splitlines() if keep is None or keep(line)]


def run_main(capture, *argv: Arg, clear: bool = False) -> tuple[int, str, str]:
    """`evidence ARGV` run in this process: its exit code, and its stdout and stderr as
    `capture` (capsys or capfd) caught them; `clear` drops first what was caught before."""
    from core.cli import main  # imported at the first run, not with this module

    if clear:
        capture.readouterr()
    code = main(_argv(argv))
    out, err = capture.readouterr()
    return code, out, err


def run_json(capture, *argv: Arg, keep: LineFilter = str.strip,
             clear: bool = False) -> tuple[int, list[Any], str]:
    """`run_main`, with stdout's lines (those `keep` accepts) parsed as JSON."""
    code, out, err = run_main(capture, *argv, clear=clear)
    return code, json_lines(out, keep), err


def environment(**changes: str) -> dict[str, str]:
    """This process's environment without any EVIDENCE_* setting (but the model threads a
    test run gives each worker), and then `changes`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("EVIDENCE_") or k == "EVIDENCE_MODEL_THREADS"}
    env.update(changes)
    return env


def run_process(*args: Arg, env: Mapping[str, str], cwd: Path,
                text: bool = True) -> subprocess.CompletedProcess:
    """`python -m core.cli ARGS` in a new process with exactly `env`, in `cwd`; its output
    caught, as text unless `text` is False. The process is forked from one that has already
    imported the command (tests/support/warm.py), so it starts in a fraction of a second."""
    return run_cli(_argv(args), env=env, cwd=cwd, text=text)
