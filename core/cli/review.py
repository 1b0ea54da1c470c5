"""The commands that answer from the evidence: `ask` and `conversations`, `assess` (verdicts),
`report` (the evidence pack) and `questionnaire draft` (the next round)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from core.cli.base import (
    CRITERIA_FILE_HELP,
    AskFormat,
    _criteria,
    _emit,
    _remember_criteria,
    _sentence,
    _settings,
    _utf8_argument,
    _workbench,
    app,
    questionnaire_app,
)
from core.errors import UserInputError


def _write_file(path: Path, data: bytes) -> Path:
    """Write a file the user asked for, whole or not at all (a temporary file renamed)."""
    from core.outputs.files import write_output

    return write_output(path, data, what="output")


@app.command()
def ask(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="The question, in your own words.")],
    vendor: Annotated[str, typer.Option(help="Vendor id.")],
    conversation: Annotated[str | None, typer.Option(
        help="Continue this conversation (see `evidence conversations`); a new one starts "
             "without it.")] = None,
    output_format: Annotated[AskFormat, typer.Option(
        "--format", help="json (the whole turn) or text (the answer and its sources).")
    ] = AskFormat.json,
) -> None:
    """Ask the vendor's evidence a question; each answer is kept in a conversation."""
    workbench = _workbench(ctx)
    turn = workbench.ask(vendor, _utf8_argument("QUESTION", question),
                         None if conversation is None
                         else _utf8_argument("--conversation", conversation))
    for note in turn.notes:
        print(f"evidence: note: {_sentence(note)}", file=sys.stderr)
    if output_format is AskFormat.json:
        _emit(turn.model_dump(mode="json"))
        return
    from core.review.conversation.answer import turn_text

    typer.echo(turn_text(turn))


@questionnaire_app.command("draft")
def questionnaire_draft(
    ctx: typer.Context,
    vendor: Annotated[str, typer.Option(help="Vendor id.")],
    round_number: Annotated[int, typer.Option("--round", help="The round being drafted.")],
    output: Annotated[Path, typer.Option(help="The file to write: .xlsx, .csv or .json.")],
    criterion: Annotated[str | None, typer.Option(help="One criterion to ask about.")] = None,
    criteria_file: Annotated[Path | None, typer.Option(help=CRITERIA_FILE_HELP)] = None,
    only_unanswered: Annotated[bool, typer.Option(
        "--only-unanswered", help="Keep the criteria with no linked answer in the store.")
    ] = False,
    only_open: Annotated[bool, typer.Option(
        "--only-open", help="Keep the criteria whose reviewer decision is not met.")
    ] = False,
) -> None:
    """Write the next round for the vendor to fill in: one row per criterion, its question
    (the criterion text unless a question column gives another), an empty answer."""
    from core.config import MAX_ROUND_NUMBER
    from core.outputs.draft import draft_format, plan_draft, write_draft

    fmt = draft_format(output)
    if round_number < 1 or round_number > MAX_ROUND_NUMBER:
        raise UserInputError(
            f"--round must be between 1 and {MAX_ROUND_NUMBER}, not {round_number}.")
    criteria = _criteria(criterion, criteria_file, output=output)
    workbench = _workbench(ctx)
    rows = plan_draft(workbench, vendor, criteria, only_unanswered=only_unanswered,
                      only_open=only_open)
    data = write_draft(rows, vendor_id=vendor, round_number=round_number, fmt=fmt)
    rounds = next(iter(workbench.status(vendor))).rounds
    if round_number in rounds:
        print(f"evidence: note: round {round_number} already holds answers; the filled "
              "file's answers will join them.", file=sys.stderr)
    written = _write_file(output, data)
    _remember_criteria(workbench, vendor, criteria_file, criteria)
    _emit({"vendor_id": vendor, "round_number": round_number, "output": str(written),
           "format": fmt, "questions": len(rows),
           "already_answered": sum(1 for r in rows if r.answered_rounds)})


@app.command()
def assess(
    ctx: typer.Context,
    vendor: Annotated[str, typer.Option(help="Vendor id.")],
    criterion: Annotated[str | None, typer.Option(help="The criterion question.")] = None,
    criteria_file: Annotated[Path | None, typer.Option(help=CRITERIA_FILE_HELP)] = None,
    strategy: Annotated[str, typer.Option(
        help="semantic, hash_extraction, doc_boost, tiered, precedence or hybrid.")
    ] = "precedence",
    refresh: Annotated[bool, typer.Option(
        "--refresh", help="Ask again even when this exact prompt already has a verdict.")
    ] = False,
) -> None:
    """Send each criterion's prompt (as `retrieve --format prompt` prints it) to the
    configured language model and print its verdict; verdicts are kept in the store, and a
    prompt already answered is not sent again."""
    from core.retrieval.strategies import get_strategy
    from core.review.llm.client import describe_missing

    get_strategy(strategy)
    criteria = _criteria(criterion, criteria_file)
    settings = _settings(ctx)
    missing = describe_missing(settings)
    if missing:
        raise UserInputError(missing)
    workbench = _workbench(ctx)
    for entry in criteria:
        verdict = workbench.verdicts.assess(vendor, entry.text, strategy, refresh=refresh,
                                            criterion_id=entry.id)
        _emit(verdict.to_json_dict())
    _remember_criteria(workbench, vendor, criteria_file, criteria)


@app.command()
def report(
    ctx: typer.Context,
    vendor: Annotated[str, typer.Option(help="Vendor id.")],
    output: Annotated[Path, typer.Option(
        help="The file to write: .md (Markdown), .html (one page) or .jsonl (JSON lines).")],
    criteria_file: Annotated[Path | None, typer.Option(help=CRITERIA_FILE_HELP)] = None,
    criterion: Annotated[str | None, typer.Option(help="One criterion.")] = None,
    strategy: Annotated[str, typer.Option(
        help="semantic, hash_extraction, doc_boost, tiered, precedence or hybrid.")
    ] = "precedence",
) -> None:
    """Write the vendor's evidence pack: per criterion, the linked follow-ups by round, the
    excerpts with their sources, the stored verdict if any, and the strategy used."""
    from core.outputs.report import build_pack, render, report_format
    from core.retrieval.strategies import get_strategy

    fmt = report_format(output)
    get_strategy(strategy)
    criteria = _criteria(criterion, criteria_file, output=output)
    workbench = _workbench(ctx)
    pack = build_pack(workbench, vendor, criteria, strategy)
    written = _write_file(output, render(pack, fmt))
    _remember_criteria(workbench, vendor, criteria_file, criteria)
    _emit({"vendor_id": vendor, "output": str(written), "format": fmt,
           "criteria": len(pack.criteria), "strategy": strategy,
           "verdicts": sum(1 for c in pack.criteria if c.verdict.state != "none")})


@app.command()
def conversations(
    ctx: typer.Context,
    vendor: Annotated[str, typer.Option(help="Vendor id.")],
    show: Annotated[str | None, typer.Option(
        help="Print every turn of this conversation, as `evidence ask` printed it.")] = None,
) -> None:
    """List the vendor's conversations, or show one turn by turn."""
    workbench = _workbench(ctx)
    if show is None:
        for summary in workbench.conversations(vendor):
            _emit(summary.model_dump(mode="json"))
        return
    for turn in workbench.conversation(vendor, _utf8_argument("--show", show)):
        _emit(turn.model_dump(mode="json"))


@app.command()
def decide(
    ctx: typer.Context,
    vendor: Annotated[str, typer.Option(help="Vendor id.")],
    criterion: Annotated[str, typer.Option(help="The criterion question.")],
    status: Annotated[str, typer.Option(
        help="met, partially_met, not_met, no_evidence or waived.")],
    until: Annotated[str | None, typer.Option(
        help="A waiver's last day, YYYY-MM-DD (required with waived, in the future).")] = None,
    note: Annotated[str | None, typer.Option(help="Why, in the reviewer's words.")] = None,
    strategy: Annotated[str, typer.Option(
        help="The retrieval the decision is made on: semantic, hash_extraction, doc_boost, "
             "tiered, precedence or hybrid.")] = "precedence",
    reviewer: Annotated[str | None, typer.Option(
        help="Who decides (env EVIDENCE_REVIEWER, default the operating system's user).")
    ] = None,
) -> None:
    """Record the reviewer's decision on a criterion, with exactly what was seen: the
    strategy, the SHA-256 of the context and prompt, the rounds and document versions in it.
    Decisions are kept, never replaced; the latest is current."""
    from core.retrieval.strategies import get_strategy

    get_strategy(strategy)
    workbench = _workbench(ctx)
    view = workbench.decide(  # every input is checked before anything is read
        vendor, _utf8_argument("--criterion", criterion), status, strategy=strategy,
        note=note, until=until, reviewer=reviewer)
    how = ("given with --reviewer" if reviewer else "EVIDENCE_REVIEWER"
           if workbench.settings.reviewer else
           "the operating system's user; name another with --reviewer or EVIDENCE_REVIEWER")
    print(f"evidence: note: recorded as {view.reviewer} ({how}).", file=sys.stderr)
    _emit(view.to_json_dict(history=False))


@app.command()
def decisions(
    ctx: typer.Context,
    vendor: Annotated[str, typer.Option(help="Vendor id.")],
    needs_review: Annotated[bool, typer.Option(
        "--needs-review", help="Only the decisions whose evidence moved, or waivers expired.")
    ] = False,
    output_format: Annotated[AskFormat, typer.Option(
        "--format", help="json (one line per decided criterion) or text.")] = AskFormat.json,
) -> None:
    """Every decided criterion of the vendor: its current decision, and whether it still
    holds (current), needs re-review (its context changed: what changed, in words) or has
    expired (a waiver past its date)."""
    views = _workbench(ctx).decisions(vendor)
    if needs_review:
        views = [v for v in views if v.state != "current"]
    for view in views:
        if output_format is AskFormat.json:
            _emit(view.to_json_dict())
            continue
        typer.echo(f"{view.criterion}\n  {view.summary}")
        if view.note:
            typer.echo(f"  Note: {' '.join(view.note.split())}")
        for found in view.contradiction_details:
            typer.echo(f"  Contradiction: {found.sentence}")
            for side, quote in zip(found.between, found.quotes, strict=True):
                if quote:
                    typer.echo(f"    {side}: \"{' '.join(quote.split())}\"")
