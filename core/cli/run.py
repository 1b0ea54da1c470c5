"""Running `evidence`: every error becomes one sentence on stderr and an exit code."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import typer

from core.cli.base import _sentence, app
from core.errors import EvidenceError, UserInputError


class _NotesOnStderr(logging.Handler):
    """The library's notes (warnings of the `core.encoders` logger: which runtime embeds,
    and why not ONNX Runtime), one line each on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"evidence: note: {_sentence(record.getMessage())}", file=sys.stderr)


@contextmanager
def _library_notes() -> Iterator[None]:
    log = logging.getLogger("core.encoders")
    handler = _NotesOnStderr(logging.WARNING)
    propagate = log.propagate
    log.addHandler(handler)
    log.propagate = False  # printed here, not again by a handler someone put on the root
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


def _refuse_repeated_options(argv: Sequence[str | bytes]) -> None:
    """An option that takes one value, given twice with different values (`--vendor acme
    --vendor globex`): the parser would keep the last without a word, so it is refused."""
    command: Any = typer.main.get_command(app)
    tokens = [os.fsdecode(t) for t in argv]
    at = 0
    while command is not None:
        given = [param for param in command.params if param.param_type_name == "option"]
        options = {name: param for param in given
                   if not (param.is_flag or param.count or param.multiple) for name in param.opts}
        seen: dict[str, tuple[str, str]] = {}  # parameter -> (option as written, value)
        subcommands = getattr(command, "commands", {})
        command = None
        while at < len(tokens):
            token = tokens[at]
            at += 1
            if token == "--":
                return
            name, equals, value = token.partition("=")
            if name in options:
                if not equals:
                    if at >= len(tokens):
                        return  # the parser says what is missing
                    value = tokens[at]
                    at += 1
                dest = options[name].name or name
                if dest in seen and seen[dest][1] != value:
                    first = seen[dest]
                    raise UserInputError(
                        f"{first[0]} is given twice, as {_shown_value(first[1])} and "
                        f"{_shown_value(value)}; give it once.")
                seen[dest] = (name, value)
            elif token.startswith("-"):  # a flag, or an option the parser will refuse
                continue
            elif token in subcommands:
                command = subcommands[token]
                break


def _shown_value(value: str) -> str:
    """An option's value on one line; a long one keeps its start and its end (a path's end
    tells most)."""
    value = " ".join(value.split())
    return repr(value if len(value) <= 80 else f"{value[:30]}...{value[-45:]}")


def main(argv: list[str] | None = None) -> int:
    """Run the command; user mistakes exit 2 and program faults exit 1, each in one line."""
    from core.installation import installation_problem

    problem = installation_problem()
    if problem:
        print(f"evidence: error: {problem}", file=sys.stderr)
        return 1
    try:
        _refuse_repeated_options(sys.argv[1:] if argv is None else argv)
        with _library_notes():
            result = app(args=argv, prog_name="evidence", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except UserInputError as exc:
        print(f"evidence: error: {_sentence(str(exc))}", file=sys.stderr)
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except typer.TyperException as exc:  # typer's usage errors: bad option, missing argument
        message = exc.format_message().strip()
        if message:  # an empty message follows the help printed for a bare `evidence`
            print(f"evidence: error: {_sentence(message)}", file=sys.stderr)
        return 2
    except (typer.Abort, KeyboardInterrupt):
        print("evidence: interrupted.", file=sys.stderr)
        return 130
    except EvidenceError as exc:
        print(f"evidence: error: {_sentence(str(exc))}", file=sys.stderr)
        return 1
    except Exception as exc:
        if os.environ.get("EVIDENCE_DEBUG"):
            raise
        detail = " ".join(str(exc).split())[:300]
        print(f"evidence: internal error: {type(exc).__name__}: {detail} "
              "(set EVIDENCE_DEBUG=1 for the traceback).", file=sys.stderr)
        return 1


def entry_point() -> None:
    sys.exit(main())
