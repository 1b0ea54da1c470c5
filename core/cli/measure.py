"""`evidence bench` and `evidence models`, with the models' look-ups and downloads."""

from __future__ import annotations

import os
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from core.cli.base import _emit, _progress_bar, _settings, app
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
