"""The commands that read the store: `status`, `check`, `documents` (with a reviewer's
corrections of a document's series), `strategies`, `retrieve`."""

from __future__ import annotations

import shutil
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from core.cli.base import (
    CRITERIA_FILE_HELP,
    AskFormat,
    _criteria,
    _emit,
    _remember_criteria,
    _workbench,
    app,
)


class OutputFormat(StrEnum):
    json = "json"
    xml = "xml"
    prompt = "prompt"
    text = "text"


def _with_id(data: dict, entry) -> dict:
    """A JSON line with the criteria file's id of its criterion, where the file gave one."""
    return {"criterion_id": entry.id, **data} if entry.id is not None else data


@app.command()
def status(
    ctx: typer.Context,
    vendor: Annotated[str | None, typer.Option(help="Only this vendor.")] = None,
) -> None:
    """One JSON line per vendor: documents, chunks, follow-up responses, rounds, types."""
    for vendor_status in _workbench(ctx).status(vendor):
        _emit(vendor_status.model_dump(mode="json"))


@app.command()
def check(
    ctx: typer.Context,
    vendor: Annotated[str, typer.Option(help="Vendor id.")],
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Only report; change nothing.")] = False,
    output_format: Annotated[AskFormat, typer.Option(
        "--format", help="json (one line, for machines) or text (for people).")
    ] = AskFormat.json,
) -> None:
    """Check the vendor's lexical index against its store (every committed chunk and stored
    answer indexed as stored, nothing else) and look for what interrupted writes left in the
    store. Unless --dry-run, under the store's write lock: the index is synced or rebuilt
    (it is derived from the store), and chunks of versions the manifest does not name and a
    replaced round's leftover markers and tombstones are deleted. Exit 0 when consistent,
    1 when something remains (each with the command that completes it)."""
    report = _workbench(ctx).check(vendor, repair=not dry_run)
    if output_format is AskFormat.json:
        _emit(report.model_dump(mode="json"))
    else:
        typer.echo(report.text())
    if not report.ok:
        left = ", ".join(f"{name} {n}" for name, n in report.remaining.items())
        print(f"evidence: error: Vendor {vendor!r} is not consistent ({left}); the report "
              "says what completes it.", file=sys.stderr)
        raise typer.Exit(1)


@app.command()
def documents(
    ctx: typer.Context,
    vendor: Annotated[str, typer.Option(help="Vendor id.")],
    output_format: Annotated[AskFormat, typer.Option(
        "--format", help="json (one line per document version) or text (series by series).")
    ] = AskFormat.json,
    series: Annotated[str | None, typer.Option(
        help="Correct a document's series: DOCUMENT=SERIES, where SERIES is another "
             "document (its file name) whose series it joins, a series key as listed, or a "
             "new name.")] = None,
    dated: Annotated[str | None, typer.Option(
        help="Correct the date that places a document in its series: DOCUMENT=YYYY-MM-DD.")
    ] = None,
    reset: Annotated[str | None, typer.Option(
        help="Undo the corrections of this DOCUMENT.")] = None,
    reviewer: Annotated[str | None, typer.Option(
        help="Who corrects (env EVIDENCE_REVIEWER, default the operating system's user).")
    ] = None,
) -> None:
    """Every document version the vendor's store holds, current and superseded: its kind,
    title, issuer and dates as its text states them, its series, what superseded it and
    whether it went stale. With --series, --dated or --reset, a reviewer's correction is kept
    first (DOCUMENT is a file name as listed, or a doc_key)."""
    workbench = _workbench(ctx)
    corrections = [(option, value) for option, value in (("--series", series),
                                                         ("--dated", dated)) if value is not None]
    if reset is not None or corrections:
        target, given = _correction(reset, corrections)
        fixed = workbench.series_corrections.correct(
            vendor, target, reset=reset is not None, reviewer=reviewer, **given)
        print(f"evidence: note: {fixed.source} is now in series {fixed.series}, dated "
              f"{fixed.date} ({'current' if fixed.current else 'superseded'}).", file=sys.stderr)
    versions = workbench.catalog.document_versions(vendor)
    if output_format is AskFormat.text:
        from core.review.documents import documents_text

        typer.echo(documents_text(versions))
        return
    for version in versions:
        _emit(version.json_line())


def _correction(reset: str | None, corrections: list[tuple[str, str]]
                ) -> tuple[str, dict[str, str]]:
    """(the document named, {series|dated: value}) of the correction options given."""
    from core.errors import UserInputError

    if reset is not None:
        if corrections:
            raise UserInputError("--reset undoes a document's corrections; give it alone, "
                                 "without --series or --dated.")
        return reset, {}
    targets, given = [], {}
    for option, value in corrections:
        name, sep, wanted = value.rpartition("=")
        if not sep or not name.strip() or not wanted.strip():
            raise UserInputError(f"{option} takes DOCUMENT=VALUE (a file name as `evidence "
                                 f"documents` lists it, then =), not {value[:60]!r}.")
        targets.append(name.strip())
        given[option.removeprefix("--")] = wanted.strip()
    if len(set(targets)) > 1:
        raise UserInputError("--series and --dated name two documents; correct one document "
                             "at a time.")
    return targets[0], given


@app.command()
def strategies() -> None:
    """List the retrieval strategies and the seed design each one implements."""
    from core.retrieval.strategies import DEFAULT_STRATEGY, STRATEGIES

    for strategy in STRATEGIES.values():
        default = " (default)" if strategy.name == DEFAULT_STRATEGY else ""
        typer.echo(f"{strategy.name}{default} [seed {strategy.seed}]: {strategy.summary}")


@app.command()
def retrieve(
    ctx: typer.Context,
    vendor: Annotated[str, typer.Option(help="Vendor id.")],
    criterion: Annotated[str | None, typer.Option(help="The criterion question.")] = None,
    criteria_file: Annotated[Path | None, typer.Option(
        help=CRITERIA_FILE_HELP)] = None,
    strategy: Annotated[str, typer.Option(
        help="semantic, hash_extraction, doc_boost, tiered, precedence or hybrid.")
    ] = "precedence",
    output_format: Annotated[OutputFormat, typer.Option(
        "--format", help="json (the trace), xml (the LLM context), prompt, or text (for "
                         "people: the current answer, earlier answers and excerpts).")
    ] = OutputFormat.json,
) -> None:
    """Retrieve the evidence for each criterion and print the trace, context or prompt."""
    from core.retrieval.strategies import get_strategy
    from core.trace.analysis import trace_text

    get_strategy(strategy)
    criteria = _criteria(criterion, criteria_file)
    workbench = _workbench(ctx)
    warned = False
    for i, entry in enumerate(criteria):
        trace = workbench.retrieve(vendor, entry.text, strategy, entry.questionnaire_ids,
                                   entry.controls)
        if not trace.reranker.ran and not warned:
            print(f"evidence: note: no reranker ran: {trace.reranker.reason}.", file=sys.stderr)
            warned = True
        if output_format is OutputFormat.json:
            _emit(_with_id(trace.to_json_dict(), entry))
            continue
        if i:
            typer.echo("")
        if output_format is OutputFormat.text:
            typer.echo(trace_text(trace, width=min(shutil.get_terminal_size().columns, 100)))
        else:
            typer.echo(trace.context if output_format is OutputFormat.xml else trace.prompt)
    _remember_criteria(workbench, vendor, criteria_file, criteria)
