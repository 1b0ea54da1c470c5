"""`evidence audit`: the store's audit log, listed or checked. Reading it writes nothing, so
the head hash `--verify` prints stays the one to keep."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from core.cli.base import AskFormat, _emit, _utf8_argument, _workbench, app
from core.errors import UserInputError

if TYPE_CHECKING:
    from core.store.audit_log import AuditEntry

# How much of a criterion a text line shows.
CRITERION_SHOWN = 40


def entry_text(entry: AuditEntry) -> str:
    """One line for people: seq, time to the second, who, what, vendor, criterion, and the
    page, strategy, context and detail where the entry has them."""
    when = entry.at[:19].replace("T", " ") + "Z"
    parts = [str(entry.seq), when, entry.user, entry.action, entry.vendor or "-"]
    if entry.criterion:
        criterion = " ".join(entry.criterion.split())
        if len(criterion) > CRITERION_SHOWN:
            criterion = criterion[:CRITERION_SHOWN - 3].rstrip() + "..."
        parts.append(repr(criterion))
    more = [value for value in (entry.page, entry.strategy) if value]
    if entry.context_sha256:
        more.append(f"context {entry.context_sha256[:4]}…")
    if more:
        parts.append(", ".join(more))
    if entry.detail:
        parts.append(" ".join(entry.detail.split()))
    return "  ".join(parts)


@app.command()
def audit(
    ctx: typer.Context,
    vendor: Annotated[str | None, typer.Option(help="Only the entries of this vendor.")] = None,
    user: Annotated[str | None, typer.Option(
        help="Only the entries of this user (an email, an OIDC subject or a reviewer).")
    ] = None,
    since: Annotated[str | None, typer.Option(
        help="Only the entries at or after this ISO 8601 date or time (UTC unless it names "
             "an offset).")] = None,
    verify: Annotated[bool, typer.Option(
        "--verify", help="Check the whole hash chain instead of listing it: exit 0 when it "
                         "holds, 1 naming the first broken entry.")] = False,
    output_format: Annotated[AskFormat, typer.Option(
        "--format", help="json (one line per entry) or text (for people).")
    ] = AskFormat.json,
) -> None:
    """The store's audit log, oldest first: who did what, when, to which vendor; each entry
    holds the hash of the one before it."""
    from core.store import check_vendor_id
    from core.store.audit_log import parse_time

    if verify and (vendor is not None or user is not None or since is not None):
        given = [name for name, value in (("--vendor", vendor), ("--user", user),
                                          ("--since", since)) if value is not None]
        raise UserInputError(f"--verify checks the whole log; give it without "
                             f"{' or '.join(given)}.")
    if vendor is not None:
        check_vendor_id(vendor)
    if user is not None and not _utf8_argument("--user", user).strip():
        raise UserInputError("--user is empty; give the user whose entries to list.")
    moment = parse_time(_utf8_argument("--since", since)) if since is not None else None
    log = _workbench(ctx).store.audit_log()
    if verify:
        _verified(log.verify(), output_format)
        return
    entries = log.entries(vendor=vendor, user=user, since=moment)
    if output_format is AskFormat.json:
        for entry in entries:
            _emit(entry.to_json())
    elif entries:
        for entry in entries:
            typer.echo(entry_text(entry))
    else:
        filtered = vendor is not None or user is not None or since is not None
        typer.echo("No entry of the audit log matches." if filtered
                   else "The audit log is empty.")


def _verified(check, output_format: AskFormat) -> None:
    """Print what --verify found; exit 1 when the chain is broken."""
    if output_format is AskFormat.json:
        _emit(check.to_json())
    elif check.ok:
        count = f"{check.count:,} entr{'y' if check.count == 1 else 'ies'}"
        typer.echo(f"The audit log holds together: {count}, head {check.head or '(none)'}.")
    else:
        typer.echo(f"The audit log is broken: {check.problem}.")
    if not check.ok:
        print(f"evidence: error: The audit log is broken: {check.problem}.", file=sys.stderr)
        raise typer.Exit(1)
