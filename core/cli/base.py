"""The `evidence` app, its sub-apps and global options, and the helpers every command shares:
settings and workbench from the options, one JSON line out, the criteria of a command,
command-line text, progress bars. The command modules import this one, never the reverse."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from core.config import SECRET_SETTINGS, Settings
from core.errors import UserInputError

if TYPE_CHECKING:
    from core.criteria import CriterionEntry
    from core.workbench import Workbench

app = typer.Typer(
    help="Evidence precedence workbench: follow-up answers that win for the criterion they "
         "answer.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
ingest_app = typer.Typer(help="Ingest vendor documents and follow-up questionnaire rounds.",
                         no_args_is_help=True)
app.add_typer(ingest_app, name="ingest")
questionnaire_app = typer.Typer(help="Draft the next follow-up questionnaire round.",
                                no_args_is_help=True)
app.add_typer(questionnaire_app, name="questionnaire")


class AskFormat(StrEnum):
    json = "json"
    text = "text"


@app.callback()
def main_options(
    ctx: typer.Context,
    store: Annotated[Path | None, typer.Option(
        help="Embedded ChromaDB store folder (env EVIDENCE_STORE, default ./.evidence).")] = None,
    chroma_host: Annotated[str | None, typer.Option(
        help="Use the ChromaDB server on this host (env EVIDENCE_CHROMA_HOST).")] = None,
    chroma_port: Annotated[int | None, typer.Option(
        help="Port of the ChromaDB server (env EVIDENCE_CHROMA_PORT, default 8000).")] = None,
) -> None:
    """Store options apply to every command."""
    overrides = {"store": store, "chroma_host": chroma_host, "chroma_port": chroma_port}
    ctx.obj = {k: v for k, v in overrides.items() if v is not None}


def _settings(ctx: typer.Context) -> Settings:
    import pydantic

    given = ctx.find_root().obj or {}
    try:
        settings = Settings(**given)
    except pydantic.ValidationError as exc:  # a bad EVIDENCE_* variable
        raise UserInputError(_setting_problem(exc)) from None
    _refuse_two_stores(given, settings)
    return settings


def _refuse_two_stores(given: dict, settings: Settings) -> None:
    """--store names an embedded store, a ChromaDB host a server: given both on the command
    line, or --store beside EVIDENCE_CHROMA_HOST, one would be ignored without a word. (An
    EVIDENCE_STORE beside a host is the documented precedence: the server is used.)"""
    if "store" in given and settings.chroma_host:
        server = (f"--chroma-host {settings.chroma_host}" if "chroma_host" in given
                  else f"EVIDENCE_CHROMA_HOST={settings.chroma_host}")
        raise UserInputError(
            f"--store {given['store']} names an embedded store but {server} names a ChromaDB "
            "server; give one of them.")
    if "chroma_port" in given and not settings.chroma_host:
        raise UserInputError(
            f"--chroma-port {given['chroma_port']} applies only to a ChromaDB server; give "
            "--chroma-host (or EVIDENCE_CHROMA_HOST) with it, or leave it out.")


def _setting_problem(exc) -> str:
    """One sentence naming the first bad setting as the user set it, and what it must be."""
    error = exc.errors()[0]
    field = str(error["loc"][0]) if error["loc"] else ""
    name = f"EVIDENCE_{field.upper()}" if field else "A setting"
    value = error.get("input")
    shown = (f"={value!r}" if isinstance(value, str | int | float)
             and field not in SECRET_SETTINGS else "")
    why = error["msg"].removeprefix("Value error, ")
    why = why[:1].lower() + why[1:]
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"The setting {name}{shown} is invalid{more}: {why}"


def _workbench(ctx: typer.Context):
    from core.workbench import Workbench

    return Workbench(_settings(ctx))


# Line breaks JSON leaves unescaped outside ASCII; a reader splitting on every line break
# (Python's str.splitlines, many editors) would cut a JSON line at them.
_RAW_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028",
                                  "\u2029": "\\u2029"})


def _emit(data: dict) -> None:
    """One JSON line: readable non-ASCII, but no character of any text can break the line."""
    typer.echo(json.dumps(data, ensure_ascii=False).translate(_RAW_LINE_BREAKS))


CRITERIA_FILE_HELP = ("One criterion per line (blank lines skipped), or a .csv/.xlsx with a "
                      "criterion column and optional id and question columns; an id is echoed "
                      "as criterion_id in every JSON line.")


def _criteria(criterion: str | None, criteria_file: Path | None, *,
              output: Path | None = None):
    """The criteria of a command: --criterion TEXT or --criteria-file FILE, exactly one; a
    command that writes `output` may not write it over the criteria file."""
    from core.config import MAX_CRITERION_CHARS
    from core.criteria import CriterionEntry
    from core.errors import shown_path
    from core.ingest.criteria_lists import load_criteria_file

    if (criterion is None) == (criteria_file is None):
        raise UserInputError("Give exactly one of --criterion TEXT or --criteria-file FILE.")
    if output is not None and criteria_file is not None and _same_file(output, criteria_file):
        raise UserInputError(
            f"--output {shown_path(output)} is the --criteria-file as well; writing it would "
            "replace the criteria it is made from, so name another output file.")
    if criterion is not None:
        return [CriterionEntry(_utf8_argument("--criterion", criterion))]
    return load_criteria_file(criteria_file, max_chars=MAX_CRITERION_CHARS)


def _remember_criteria(workbench: Workbench, vendor: str, criteria_file: Path | None,
                       criteria: Sequence[CriterionEntry]) -> None:
    """Keep a criteria file a command used with the vendor, once the command's work is done,
    so the dashboard offers its criteria for that vendor (`--criterion` is not kept)."""
    from core.ingest.criteria_lists import remember_criteria

    if criteria_file is not None:
        remember_criteria(workbench.store, vendor, Path(criteria_file).name, criteria)


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except (OSError, ValueError):  # one of them does not exist, or holds a NUL
        return False


@contextmanager
def _progress_bar(width: int = 30) -> Iterator[Callable[[str, int, int], None]]:
    """One bar per stage on stderr, with the time the stage has taken, ended when the stage
    is done; drawn only where stderr is a terminal, so logs and pipes get nothing but the
    result."""
    if not sys.stderr.isatty():
        yield lambda stage, done, total: None
        return
    started: dict[str, float] = {}
    current: list[str] = []
    last: list[tuple[str, int, int]] = []

    def show(stage: str, done: int, total: int) -> None:
        if last == [(stage, done, total)]:  # a stage reported done twice is drawn once
            return
        last[:] = [(stage, done, total)]
        if current and current[0] != stage:
            print(file=sys.stderr)
            current.clear()
        current[:] = [stage]
        began = started.setdefault(stage, time.monotonic())
        filled = int(width * done / total) if total else width
        bar = "#" * filled + "-" * (width - filled)
        print(f"\r{stage:<15} [{bar}] {done:,}/{total:,}  {time.monotonic() - began:5.0f} s",
              end="", file=sys.stderr, flush=True)
        if done >= total:  # what is printed next starts on a line of its own
            print(file=sys.stderr)
            current.clear()

    try:
        yield show
    finally:
        if current:
            print(file=sys.stderr)


def _utf8_argument(option: str, value: str) -> str:
    """Command-line text; bytes that are not UTF-8 arrive as lone surrogates, which nothing
    downstream can hash or store."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserInputError(
            f"{option} is not valid UTF-8 text (character {exc.start + 1} is a stray byte)."
        ) from None
    return value


def _sentence(message: str) -> str:
    message = " ".join(message.split())
    return message if message.endswith((".", "?", "!")) else message + "."
