"""`evidence ingest docs`, `ingest questionnaire` and `ingest sample`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from core.cli.base import _emit, _progress_bar, _sentence, _workbench, ingest_app
from core.errors import UserInputError


@ingest_app.command("docs")
def ingest_docs(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (walked recursively).")],
    vendor: Annotated[str, typer.Option(help="Vendor id, [A-Za-z0-9][A-Za-z0-9_-]{0,62}.")],
    doc_type: Annotated[str, typer.Option(
        "--type", help="tc_files, followup_document (needs --round) or soc2_summary:TRACK.")
    ] = "tc_files",
    round_number: Annotated[int | None, typer.Option(
        "--round", help="Follow-up round the document was uploaded with.")] = None,
    skip_unreadable: Annotated[bool, typer.Option(
        "--skip-unreadable",
        help="Ingest the files that can be read and list the others under \"skipped\" "
             "(without it, a file that cannot be read refuses the whole command).")] = False,
) -> None:
    """Ingest .md, .txt, .pdf, .docx, .html and .htm documents; unchanged files are skipped,
    changed ones replaced."""
    with _progress_bar() as progress:
        report = _workbench(ctx).writer.documents(
            vendor, paths, doc_type=doc_type, round_number=round_number, progress=progress,
            skip_unreadable=skip_unreadable)
    for skipped in report.skipped:
        print(f"evidence: note: skipped {_sentence(skipped.reason)}", file=sys.stderr)
    _emit(report.model_dump(mode="json"))


@ingest_app.command("package")
def ingest_package(
    ctx: typer.Context,
    folder: Annotated[Path, typer.Argument(
        help="The vendor's package: a folder of documents, questionnaire workbooks and "
             "answer files (walked recursively).")],
    vendor: Annotated[str, typer.Option(help="Vendor id, [A-Za-z0-9][A-Za-z0-9_-]{0,62}.")],
    round_number: Annotated[int | None, typer.Option(
        "--round", help="Round of the first questionnaire; the others follow in file order "
                        "(default: the next round the vendor has not used; a file whose "
                        "answers make up a stored round keeps it).")] = None,
    skip_unreadable: Annotated[bool, typer.Option(
        "--skip-unreadable",
        help="Ingest the files that can be read and report the others as skipped (without "
             "it, a file that cannot be read refuses the whole package).")] = False,
    timestamp: Annotated[str | None, typer.Option(
        help="ISO 8601 time the questionnaires were answered (default: now, in UTC).")
    ] = None,
    columns: Annotated[list[str] | None, typer.Option(
        help="How to read one table of the package: \"FILE=id=B,question=C,answer=G+J\" "
             "(FILE as its line names it; columns by letter or header text, + joining "
             "columns). Repeat for several files. Overrides a guessed layout.")] = None,
    sheet: Annotated[list[str] | None, typer.Option(
        help="Read one workbook of the package from this sheet only: \"FILE=SHEET\". Repeat "
             "for several sheets or files.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run",
        help="Print what each file would become, with its layout (or guessed mapping), the "
             "sheets read and left out, and its first three answers or chunks; write "
             "nothing.")] = False,
    timings: Annotated[bool, typer.Option(
        "--timings",
        help="After the files' lines, print one line more: the package's files, pages (and "
             "pages read by OCR), answers and chunks, the seconds the ingest took and the "
             "seconds of each step (step_s: pdf_text, ocr, tables, embed, write, ...).")
    ] = False,
) -> None:
    """Ingest a whole vendor package: each document as `ingest docs` would, each
    questionnaire as a round of its own; one JSON line per file says what it became and why.
    Every file is read before anything is written."""
    from core.ingest.package import dry_run_lines, package_timings, read_package
    from core.ingest.package import ingest_package as write_package

    writer = _workbench(ctx).writer
    with _progress_bar() as progress:
        package = read_package(writer, vendor, folder, first_round=round_number,
                               skip_unreadable=skip_unreadable, timestamp=timestamp,
                               columns=_per_file("--columns", columns or []),
                               sheets=_per_file_lists("--sheet", sheet or []),
                               progress=progress)
        for item in package.rounds:
            for note in item.round.notes if item.round else []:
                print(f"evidence: note: {_sentence(note)}", file=sys.stderr)
        lines = dry_run_lines(package) if dry_run else write_package(writer, package, progress)
    if dry_run:
        print("evidence: note: a dry run; nothing was written.", file=sys.stderr)
    for line in lines:
        _emit(line)
    if timings:
        _emit({"timings": package_timings(package)})


def _split_file(option: str, text: str) -> tuple[str, str]:
    """'FILE=VALUE' as (FILE, VALUE), or one sentence on the form the option takes."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip() or not value.strip():
        form = "FILE=id=B,question=C,answer=G+J" if option == "--columns" else "FILE=SHEET"
        raise UserInputError(f"{option} '{text}' does not name a file; write {option} "
                             f"\"{form}\" (FILE as the package's line names it).")
    return name.strip(), value.strip()


def _per_file(option: str, given: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for text in given:
        name, value = _split_file(option, text)
        if name in found:
            raise UserInputError(f"{option} gives {name} twice; give one mapping per file.")
        found[name] = value
    return found


def _per_file_lists(option: str, given: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for text in given:
        name, value = _split_file(option, text)
        found.setdefault(name, []).append(value)
    return found


@ingest_app.command("questionnaire")
def ingest_questionnaire(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(
        help="Bulk payload JSON files (seed 003), or .csv/.xlsx spreadsheets: a standard "
             "questionnaire as the vendor sent it, a table with the columns criterion, "
             "question and answer, or any table with --columns.")],
    vendor: Annotated[str | None, typer.Option(
        help="Vendor id of the spreadsheet rounds (a JSON round names its own).")] = None,
    round_number: Annotated[int | None, typer.Option(
        "--round", help="Round number of the spreadsheet rounds.")] = None,
    timestamp: Annotated[str | None, typer.Option(
        help="ISO 8601 time the spreadsheet answers were given (default: now, in UTC).")
    ] = None,
    columns: Annotated[str | None, typer.Option(
        help="How to read a spreadsheet of any other layout: FIELD=COLUMN pairs, each column a "
             "letter or a header text, + joining columns (id=A,question=B,answer=C+E; the "
             "fields are id, criterion, question, answer). Standard questionnaires (CAIQ, "
             "HECVAT, SIG export, ISO 27001 statement of applicability) need none.")
    ] = None,
    sheet: Annotated[list[str] | None, typer.Option(
        help="Read the spreadsheets from this sheet only (repeat for several); without it, "
             "every visible sheet with the layout is read.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run",
        help="Print what each file would become (layout or guessed mapping, sheets read and "
             "left out, first three answers) and write nothing.")] = False,
    replace: Annotated[bool, typer.Option(
        "--replace",
        help="Make the round exactly the FILES given (all of one vendor and round; several "
             "files of up to 100 responses each make one round together): stored answers "
             "absent from them are removed in the same atomic step, and the JSON line adds "
             "removed_count. Without it, files of a round add to the answers stored.")
    ] = False,
) -> None:
    """Ingest follow-up questionnaire rounds; every file is validated before any is written.
    Files of one round accumulate, unless --replace."""
    workbench = _workbench(ctx)
    rounds = workbench.load_rounds(files, vendor_id=vendor, round_number=round_number,
                                   timestamp=timestamp, columns=columns, sheets=sheet or [])
    for loaded in rounds:
        for note in loaded.notes:
            print(f"evidence: note: {_sentence(note)}", file=sys.stderr)
    if dry_run:
        print("evidence: note: a dry run; nothing was written.", file=sys.stderr)
        for loaded in rounds:
            _emit(loaded.dry_run_line())
        return
    for report in workbench.ingest_questionnaires([r.payload for r in rounds],
                                                  replace=replace):
        _emit(report.model_dump(mode="json"))


@ingest_app.command("sample")
def ingest_sample_data(
    ctx: typer.Context,
    root: Annotated[Path | None, typer.Argument(help="Sample data folder.")] = None,
) -> None:
    """Ingest the bundled sample vendors (documents, follow-up documents, rounds)."""
    from core.ingest.sample import DEFAULT_SAMPLE_DIR, ingest_sample

    with _progress_bar() as progress:
        for report in ingest_sample(_workbench(ctx), root or DEFAULT_SAMPLE_DIR, progress):
            _emit(report)
