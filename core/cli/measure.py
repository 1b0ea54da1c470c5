"""`evidence bench` and `evidence models`, with the models' look-ups and downloads."""

from __future__ import annotations

import os
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from core.cli.base import _emit, _progress_bar, _remember_criteria, _settings, app
from core.config import Settings
from core.errors import UserInputError


class BenchFormat(StrEnum):
    json = "json"
    table = "table"


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


@app.command("eval")
def eval_command(
    ctx: typer.Context,
    vendor: Annotated[str, typer.Option(help="Vendor id.")],
    criteria_file: Annotated[Path, typer.Option(
        help="The criteria to measure, one per line, or a .csv/.xlsx with a criterion column.")],
    judgments: Annotated[Path | None, typer.Option(
        help="Graded judgments: a CSV with vendor_id, criterion, id, grade (0-3), or a TREC "
             "qrels file; without it, the judgments kept in the store.")] = None,
    strategy: Annotated[list[str] | None, typer.Option(
        help="A strategy to measure (repeat for several); every strategy by default.")] = None,
    compare: Annotated[str | None, typer.Option(
        help="Two choices whose per-criterion deltas to print, such as "
             "strategy:hybrid,settings:EVIDENCE_RRF_K=20 (the second changes the first).")
    ] = None,
    baseline: Annotated[Path | None, typer.Option(
        help="A saved run (the lines `eval --format json` printed) to compare with.")] = None,
    fail_below: Annotated[bool, typer.Option(
        "--fail-below", help="Exit 1 when a metric falls below the baseline by more than the "
                             "tolerance.")] = False,
    tolerance: Annotated[float, typer.Option(
        help="How far a metric may fall below the baseline.", min=0.0, max=1.0)] = 0.01,
    output_format: Annotated[BenchFormat, typer.Option(
        "--format", help="json (one line per strategy, then per-criterion deltas) or table.")
    ] = BenchFormat.json,
    keep: Annotated[bool, typer.Option(
        "--keep", help="Keep the --judgments file's grades in the store as a person's, so the "
                       "dashboard shows and measures them.")] = False,
    suggest: Annotated[bool, typer.Option(
        "--suggest", help="Ask the configured language model to grade the excerpts no person "
                          "has judged; its grades are kept apart and never counted.")
    ] = False,
) -> None:
    """Rank quality per strategy over a vendor's judged criteria: nDCG@6 and @10, MRR,
    precision@6 and recall@6 of the judged relevant (trec_eval's definitions, on the
    context's order), and the share of hash-linked answers in the context."""
    import sys

    from core.cli.base import _criteria, _workbench
    from core.outputs.relevance import (
        Choice,
        Judgments,
        deltas,
        evaluate,
        parse_choices,
        read_baseline,
        read_judgments,
        regressions,
        strategies_or_all,
        table,
    )

    if keep and judgments is None:
        raise UserInputError("--keep needs --judgments FILE, the grades to keep.")
    if fail_below and baseline is None:
        raise UserInputError("--fail-below needs --baseline FILE, the run to compare with.")
    names = strategies_or_all(strategy or [])
    criteria = _criteria(None, criteria_file)
    compared = parse_choices(compare, names[0]) if compare else []
    saved = read_baseline(baseline) if baseline is not None else None
    workbench = _workbench(ctx)
    if suggest:
        from core.outputs.relevance import suggest_grades
        from core.review.llm.client import LLMClient, describe_missing

        client = LLMClient.from_settings(workbench.settings)
        if client is None:
            raise UserInputError(str(describe_missing(workbench.settings)))
        made = sum(len(suggest_grades(workbench, client, vendor, entry.text, names))
                   for entry in criteria)
        print(f"evidence: note: {made} grades suggested by {client.model}, kept apart from a "
              "person's and not counted below.", file=sys.stderr)
    graded = (read_judgments(judgments, workbench.store, vendor, criteria)
              if judgments is not None else Judgments(workbench.store, vendor).all())
    if keep:
        Judgments(workbench.store, vendor).save(graded)
        print(f"evidence: note: {len(graded)} judgments kept in the store for vendor "
              f"'{vendor}'.", file=sys.stderr)
    if not any(j.grade >= 1 for j in graded):
        if suggest:
            print("evidence: note: no excerpt is judged relevant by a person yet, so there is "
                  "nothing to measure; suggested grades are not counted.", file=sys.stderr)
            return
        raise UserInputError(f"Vendor '{vendor}' has no excerpt judged relevant (grade 1 to 3) "
                             "for these criteria: judge some on the dashboard or give "
                             "--judgments FILE.")
    results = evaluate(workbench, vendor, criteria, [Choice(strategy=n) for n in names],
                       graded)
    _remember_criteria(workbench, vendor, criteria_file, criteria)
    lines = [r.line() for r in results]
    extra = evaluate(workbench, vendor, criteria, compared, graded) if compared else []
    if output_format is BenchFormat.json:
        for line in lines:
            _emit(line)
        if extra:
            for line in [r.line() for r in extra]:
                _emit({**line, "compared": True})
            for line in deltas(extra[0], extra[1]):
                _emit(line)
    else:
        typer.echo(table(lines))
        if extra:
            typer.echo("")
            typer.echo(table([r.line() for r in extra]))
            typer.echo(f"\nPer criterion, {extra[1].choice.label} minus "
                       f"{extra[0].choice.label}:")
            for line in deltas(extra[0], extra[1]):
                typer.echo(f"  {line['criterion'][:70]}: nDCG@6 {line['ndcg@6']:+.3f}, "
                           f"MRR {line['mrr']:+.3f}, recall@6 {line['recall@6']:+.3f}")
    if saved is not None:
        fallen = regressions(lines, saved, tolerance)
        if fallen and fail_below:
            print(f"evidence: error: below the baseline {baseline} beyond {tolerance:g}: "
                  + "; ".join(fallen) + ".", file=sys.stderr)
            raise typer.Exit(1)
        for item in fallen:
            print(f"evidence: note: below the baseline: {item}.", file=sys.stderr)
