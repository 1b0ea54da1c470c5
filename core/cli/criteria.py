"""`evidence criteria map`: the controls that answer each criterion of a list, proposed by the
ranking over the shipped catalog and accepted by a reviewer, kept in the store for every
vendor."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from core.cli.base import AskFormat, _emit, _settings, _workbench, app
from core.cli.read import _with_id

criteria_app = typer.Typer(help="Map criteria to the controls that answer them.",
                           no_args_is_help=True)
app.add_typer(criteria_app, name="criteria")


@criteria_app.command("map")
def map_controls(
    ctx: typer.Context,
    criteria_file: Annotated[Path, typer.Option(
        help="The criteria list (.csv/.xlsx with a criterion column, and optionally a "
             "controls column of ids separated by ';' that a reviewer accepts directly; or "
             "one criterion per line).")],
    framework: Annotated[str, typer.Option(
        help="The framework whose controls are proposed: 800-53 (NIST SP 800-53 Rev. 5) or "
             "iso27001-2013 (ISO/IEC 27001:2013 Annex A ids, through NIST's mapping).")
    ] = "800-53",
    accept: Annotated[bool, typer.Option(
        "--accept", help="Keep the confident proposals as accepted, for every criterion the "
                         "file gives no controls cell.")] = False,
    output_format: Annotated[AskFormat, typer.Option(
        "--format", help="json (one line per criterion) or text (for people).")
    ] = AskFormat.json,
) -> None:
    """Propose (and with --accept keep) the controls that answer each criterion."""
    from core.config import MAX_CRITERION_CHARS
    from core.controls.mappings import FRAMEWORKS
    from core.errors import UserInputError, shown_path
    from core.ingest.criteria_lists import load_criteria_file

    if framework not in FRAMEWORKS:
        raise UserInputError(
            f"--framework {framework!r} is not one the workbench proposes controls of; use "
            f"one of {', '.join(FRAMEWORKS)}.")
    entries = load_criteria_file(criteria_file, max_chars=MAX_CRITERION_CHARS)
    _settings(ctx)
    workbench = _workbench(ctx)
    name = Path(criteria_file).name
    mappings = workbench.controls.map_list(name, entries, framework=framework, accept=accept)
    decided = sum(m.decided for m in mappings)
    if decided:  # a reviewer's decision, as every decision is, in the audit log
        workbench.store.audit_log().append(
            workbench.settings.reviewer or "cli", "map_controls",
            detail=f"{name}: {decided} of {len(mappings)} criteria mapped to accepted controls")
    width = min(shutil.get_terminal_size().columns, 100)
    for index, (entry, mapping) in enumerate(zip(entries, mappings, strict=True)):
        if output_format is AskFormat.json:
            _emit(_with_id(mapping.as_line(), entry))
            continue
        if index:
            typer.echo("")
        typer.echo(mapping.as_text(width))
    if output_format is AskFormat.text:
        typer.echo(f"\nKept in the store for {shown_path(criteria_file)}: used for every "
                   "vendor's answers keyed by these controls.")
