"""`evidence`: ingest vendor evidence and retrieve it per criterion (see CONTRACT.md)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from core.config import SECRET_SETTINGS, Settings
from core.errors import EvidenceError, UserInputError

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


class OutputFormat(StrEnum):
    json = "json"
    xml = "xml"
    prompt = "prompt"


class AskFormat(StrEnum):
    json = "json"
    text = "text"


class BenchFormat(StrEnum):
    json = "json"
    table = "table"


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
    from core.ingest.spreadsheets import load_criteria_file

    if (criterion is None) == (criteria_file is None):
        raise UserInputError("Give exactly one of --criterion TEXT or --criteria-file FILE.")
    if output is not None and criteria_file is not None and _same_file(output, criteria_file):
        raise UserInputError(
            f"--output {shown_path(output)} is the --criteria-file as well; writing it would "
            "replace the criteria it is made from, so name another output file.")
    if criterion is not None:
        return [CriterionEntry(_utf8_argument("--criterion", criterion))]
    return load_criteria_file(criteria_file, max_chars=MAX_CRITERION_CHARS)


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except (OSError, ValueError):  # one of them does not exist, or holds a NUL
        return False


def _with_id(data: dict, entry) -> dict:
    """A JSON line with the criteria file's id of its criterion, where the file gave one."""
    return {"criterion_id": entry.id, **data} if entry.id is not None else data


def _write_file(path: Path, data: bytes) -> Path:
    """Write a file the user asked for, whole or not at all (a temporary file renamed)."""
    from core.outputs.files import write_output

    return write_output(path, data, what="output")


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
) -> None:
    """Ingest .md, .txt, .pdf, .docx, .html and .htm documents; unchanged files are skipped,
    changed ones replaced."""
    with _progress_bar() as progress:
        report = _workbench(ctx).ingest_documents(vendor, paths, doc_type=doc_type,
                                                  round_number=round_number, progress=progress)
    _emit(report.model_dump(mode="json"))


@ingest_app.command("questionnaire")
def ingest_questionnaire(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(
        help="Bulk payload JSON files (seed 003), or .csv/.xlsx spreadsheets with the columns "
             "criterion, question and answer.")],
    vendor: Annotated[str | None, typer.Option(
        help="Vendor id of the spreadsheet rounds (a JSON round names its own).")] = None,
    round_number: Annotated[int | None, typer.Option(
        "--round", help="Round number of the spreadsheet rounds.")] = None,
    timestamp: Annotated[str | None, typer.Option(
        help="ISO 8601 time the spreadsheet answers were given (default: now, in UTC).")
    ] = None,
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
                                   timestamp=timestamp)
    for loaded in rounds:
        for note in loaded.notes:
            print(f"evidence: note: {_sentence(note)}", file=sys.stderr)
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
        "--format", help="json (the trace), xml (the LLM context) or prompt.")
    ] = OutputFormat.json,
) -> None:
    """Retrieve the evidence for each criterion and print the trace, context or prompt."""
    from core.retrieval.strategies import get_strategy

    get_strategy(strategy)
    criteria = _criteria(criterion, criteria_file)
    workbench = _workbench(ctx)
    warned = False
    for i, entry in enumerate(criteria):
        trace = workbench.retrieve(vendor, entry.text, strategy)
        if not trace.reranker.ran and not warned:
            print(f"evidence: note: no reranker ran: {trace.reranker.reason}.", file=sys.stderr)
            warned = True
        if output_format is OutputFormat.json:
            _emit(_with_id(trace.to_json_dict(), entry))
        else:
            if i:
                typer.echo("")
            typer.echo(trace.context if output_format is OutputFormat.xml else trace.prompt)


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
    from core.answers.conversation.answer import turn_text

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
    rows = plan_draft(workbench, vendor, criteria, only_unanswered=only_unanswered)
    data = write_draft(rows, vendor_id=vendor, round_number=round_number, fmt=fmt)
    rounds = next(iter(workbench.status(vendor))).rounds
    if round_number in rounds:
        print(f"evidence: note: round {round_number} already holds answers; the filled "
              "file's answers will join them.", file=sys.stderr)
    written = _write_file(output, data)
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
    from core.answers.llm.client import describe_missing
    from core.retrieval.strategies import get_strategy

    get_strategy(strategy)
    criteria = _criteria(criterion, criteria_file)
    settings = _settings(ctx)
    missing = describe_missing(settings)
    if missing:
        raise UserInputError(missing)
    workbench = _workbench(ctx)
    for entry in criteria:
        verdict = workbench.assess(vendor, entry.text, strategy, refresh=refresh,
                                   criterion_id=entry.id)
        _emit(verdict.to_json_dict())


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
    pack = build_pack(_workbench(ctx), vendor, criteria, strategy)
    written = _write_file(output, render(pack, fmt))
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
def bench(
    ctx: typer.Context,
    chunks: Annotated[int, typer.Option(help="Chunks in the throw-away store.")] = 10_000,
    queries: Annotated[int, typer.Option(help="Criteria asked, each with planted follow-ups.")
                       ] = 50,
    output_format: Annotated[BenchFormat, typer.Option(
        "--format", help="json (one line, for machines) or table (for people).")
    ] = BenchFormat.json,
    seed: Annotated[int | None, typer.Option(
        help="Corpus seed; the default gives the same corpus on every machine.")] = None,
) -> None:
    """Measure ingest against raw encoding, and every strategy against the floor, on a
    generated corpus in a throw-away store."""
    from core.bench.corpus import DEFAULT_SEED
    from core.bench.run import format_table, run_bench

    with _progress_bar() as progress:  # arguments are checked before the first bar
        result = run_bench(chunks, queries, seed=DEFAULT_SEED if seed is None else seed,
                           settings=_settings(ctx), progress=progress)
    if output_format is BenchFormat.table:
        typer.echo(format_table(result))
    else:
        _emit(result.model_dump(mode="json"))


@app.command()
def models(
    ctx: typer.Context,
    download: Annotated[bool, typer.Option(
        "--download", help="Fetch the models that are missing (needs "
        "EVIDENCE_ALLOW_MODEL_DOWNLOADS=1 and a network); every network wait is capped by "
        "EVIDENCE_MODEL_DOWNLOAD_TIMEOUT_S.")] = False,
    prepare: Annotated[bool, typer.Option(
        "--prepare", help="Load the embedding model once, so that its ONNX export and the "
        "check against torch (about a minute, once per model and library version) are done "
        "before the first ingest or dashboard start.")] = False,
) -> None:
    """One JSON line per model the workbench uses (embedding, reranker): its name, where it
    is read from, whether it is present, and the runtime that runs it."""
    from core.errors import ModelUnavailableError

    settings = _settings(ctx)
    if prepare:
        from core.encoders.factory import configured_embedder

        configured_embedder(settings).embed(["Is data encrypted at rest?"])
    wanted = [model for model in _workbench_models(settings) if not model.present]
    if download and wanted and not settings.allow_model_downloads:
        raise UserInputError(
            "Model downloads are off; run with EVIDENCE_ALLOW_MODEL_DOWNLOADS=1 to let "
            f"--download fetch {', '.join(repr(m.name) for m in wanted)}.")
    failures: list[str] = []
    fetched: set[str] = set()
    if download and wanted:
        from huggingface_hub.utils import logging as hub_logging

        hub_logging.set_verbosity_error()  # the hub logs every retry; one sentence says it
    for model in wanted if download else []:
        # Offline, the hub would retry each file for half a minute before giving up.
        unreachable = _unreachable(model.download_host, settings.model_download_timeout_s)
        try:
            if unreachable:
                raise ModelUnavailableError(
                    f"this machine cannot reach {model.download_host} ({unreachable})")
            model.fetch()
            fetched.add(model.role)
        except ModelUnavailableError as exc:
            failures.append(_download_failure(model, exc))
    for model in _workbench_models(settings):
        line = model.report()
        if download:
            line["downloaded"] = model.role in fetched
        _emit(line)
    if failures:
        raise ModelUnavailableError(failures[0])


def _unreachable(host: str, timeout_s: float) -> str | None:
    """Why `host` cannot be reached over HTTPS, or None when it can, or when a proxy will
    decide that."""
    import socket

    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                                              "all_proxy")):
        return None
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return None
    except OSError as exc:
        return " ".join(str(exc).split()) or type(exc).__name__


class _WorkbenchModel:
    """One model the workbench uses, as `evidence models` reports and fetches it."""

    def __init__(self, role: str, name: str, location: str, present: bool, runtime: str,
                 download_host: str, fetch: Callable[[], None], without_it: str,
                 copy_hint: str, runtime_note: str | None = None) -> None:
        self.role, self.name, self.location, self.present = role, name, location, present
        self.runtime, self.download_host, self.fetch = runtime, download_host, fetch
        self.without_it, self.copy_hint = without_it, copy_hint
        # Why the runtime is not the one the settings prefer (ONNX Runtime refused).
        self.runtime_note = runtime_note

    @property
    def way_out(self) -> str:
        return ("on a connected machine run EVIDENCE_ALLOW_MODEL_DOWNLOADS=1 evidence models "
                f"--download, or {self.copy_hint}")

    def report(self) -> dict:
        line = {"model": self.role, "name": self.name, "location": self.location,
                "present": self.present, "runtime": self.runtime}
        if self.runtime_note:
            line["runtime_note"] = self.runtime_note
        if not self.present:
            line["note"] = f"{self.without_it}; {self.way_out}."
        return line


def _workbench_models(settings: Settings) -> list[_WorkbenchModel]:
    """The embedding model and the configured reranker, read from disk, none loaded."""
    from core.encoders.embedding import SentenceTransformerEmbedder, resolve_model_location
    from core.encoders.onnx.report import describe_runtime
    from core.encoders.rerank import (
        cached_hub_model,
        configured_reranker,
        hub_cache_location,
        hub_download_host,
    )

    def fetch_embedding() -> None:
        SentenceTransformerEmbedder(
            settings.embedding_model, allow_downloads=True,
            download_timeout_s=settings.model_download_timeout_s).warm_up()

    def fetch_reranker() -> None:
        configured_reranker(settings, allow_downloads=True).warm_up()

    name = settings.embedding_model
    folder = Path(resolve_model_location(name)).expanduser()
    if folder.exists():
        location, present = str(folder), True
    else:
        # The embedder reads a model name through the hub only while downloads are allowed.
        cached = cached_hub_model(name)
        location = str(cached) if cached else hub_cache_location(name)
        present = cached is not None and settings.allow_model_downloads
    runtime = describe_runtime(name, settings.embedding_runtime, settings.onnx_cache_dir)
    embedding = _WorkbenchModel(
        "embedding", name, location, present, runtime.runtime, hub_download_host(),
        fetch_embedding, "nothing can be ingested or retrieved without it",
        "set EVIDENCE_EMBEDDING_MODEL to a copied model folder", runtime.note)
    reranker = configured_reranker(settings)
    copy_hint = (f"copy the model folder to {reranker.location}"
                 if settings.reranker == "flashrank" else
                 "set EVIDENCE_CROSS_ENCODER_MODEL to a copied model folder")
    reranking = _WorkbenchModel(
        "reranker", reranker.name, reranker.location, reranker.is_present(), reranker.runtime,
        reranker.download_host, fetch_reranker,
        "retrieval keeps first-stage order without it", copy_hint)
    return [embedding, reranking]


def _download_failure(model: _WorkbenchModel, exc: BaseException) -> str:
    """One sentence: the model, why it could not be had, and the way out."""
    why = " ".join(str(exc).split())[:300].rstrip(".")
    return (f"The {model.role} model '{model.name}' could not be downloaded: {why}; "
            f"{model.way_out}.")


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


if __name__ == "__main__":
    entry_point()
