"""Real vendor packages ingested and timed per step: each package folder is read and written
as `evidence ingest package --skip-unreadable` does, into a throw-away store of its own (a
temporary folder: an embedded ChromaDB store and its lexical index, no server, no language
model), with the configured embedding model loaded and warmed once before any package is
timed. The ingest times its own steps (`core/ingest/steps.py`); after it, one hybrid search
syncs the vendor's lexical index, the write the first search pays for (`lexical_sync`).

    python benchmarks/real_packages.py FOLDER [FOLDER ...]
    python benchmarks/real_packages.py --package "mullvad/mullvadvpn-app audits/" FOLDER

`--package LABEL FOLDER` names a package in the results (by where it comes from); a bare
FOLDER is named by its path. Per package it records the files (documents, rounds, skipped),
PDF pages and those read by OCR, answers, chunks, the seconds of the ingest and of each step,
files, pages and answers per second, and the slowest step; nothing the packages hold, not
even a file name. It prints a table and writes every package's line with the date, commit
and machine to `benchmarks/results/real-packages.json` (or `--output`)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.config import BENCHMARK_RESULTS_DIR, Settings  # noqa: E402
from core.encoders.embedding import Embedder  # noqa: E402
from core.encoders.factory import configured_embedder  # noqa: E402
from core.ingest.documents.ocr import engine_version  # noqa: E402
from core.ingest.package import ingest_package, package_timings, read_package  # noqa: E402
from core.ingest.steps import STEPS  # noqa: E402
from core.workbench import Workbench  # noqa: E402

VENDOR = "package"
# The hybrid search that syncs the lexical index asks one criterion of no package in
# particular; only the time of its sync is kept.
CRITERION = "Does the vendor encrypt customer data at rest?"
SHOWN_STEPS = (*STEPS, "lexical_sync")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    return done.stdout.strip() or None


def _settings(root: Path) -> Settings:
    """Everything under `root`: the store, its lexical index, no server, no language model,
    no reranker model (the search that syncs the index needs none)."""
    return Settings(store=root / "store", lexical_dir=root / "lexical", chroma_host=None,
                    llm_base_url=None, llm_model=None,
                    reranker_cache_dir=root / "no-models")


def _per_s(number: int, seconds: float) -> float | None:
    return round(number / seconds, 2) if number and seconds > 0 else None


def _cpu_s() -> float:
    """CPU seconds of this process (every thread) and of the programs it ran (the OCR
    engine): on a machine that other work shares, the wall-clock seconds of a step grow
    with that work, these do not."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def measure(label: str, folder: Path, embedder: Embedder) -> dict[str, Any]:
    """One package ingested into a store of its own, removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="evidence-real-package-"))
    load_before, cpu_before = os.getloadavg()[0], _cpu_s()
    try:
        workbench = Workbench(_settings(root), embedder=embedder)
        package = read_package(workbench.writer, VENDOR, folder, skip_unreadable=True)
        ingest_package(workbench.writer, package)
        timings = package_timings(package)
        trace = workbench.retrieve(VENDOR, CRITERION, "hybrid")
        lexical_s = trace.timings_ms.get("lexical_sync", 0.0) / 1000.0
        store_mb = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 2**20
        cpu_s = _cpu_s() - cpu_before
    finally:
        shutil.rmtree(root, ignore_errors=True)
    step_s = {**timings["step_s"], "lexical_sync": round(lexical_s, 3)}
    seconds = timings["seconds"]
    return {
        "package": label, "folder": str(folder),
        **{k: timings[k] for k in ("files", "documents", "rounds", "skipped", "pages",
                                   "ocr_pages", "answers", "chunks")},
        "seconds": seconds, "step_s": step_s,
        "slowest_step": max(step_s, key=step_s.__getitem__),
        "files_per_s": _per_s(timings["files"], seconds),
        "pages_per_s": _per_s(timings["pages"], seconds),
        "answers_per_s": _per_s(timings["answers"], seconds),
        # What the model embeds a second: each answer and each chunk is one text.
        "embedded_per_s": _per_s(timings["answers"] + timings["chunks"],
                                 step_s.get("embed", 0.0)),
        "store_mb": round(store_mb, 1), "cpu_s": round(cpu_s, 1),
        # The machine's load (1-minute average) before and after: above its cores, other
        # work took part of them and every step's seconds grew with it.
        "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def machine(embedder: Embedder, load_s: float) -> dict[str, Any]:
    return {"cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": _version("torch"),
            "chromadb": _version("chromadb"), "onnxruntime": _version("onnxruntime"),
            "embedding_model": embedder.name, "embedding_runtime": embedder.runtime,
            "ocr": engine_version(), "model_load_s": round(load_s, 2)}


def table(results: list[dict[str, Any]]) -> str:
    """The results as a Markdown table, one row per package."""
    ran = [s for s in SHOWN_STEPS if any(s in r["step_s"] for r in results)]
    head = ["package", "files", "pages", "OCR pages", "answers", "chunks", "seconds",
            *[f"{s} s" for s in ran], "files/s", "pages/s", "answers/s", "slowest step"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [r["package"], r["files"], r["pages"], r["ocr_pages"], r["answers"],
                 r["chunks"], f"{r['seconds']:.1f}",
                 *[f"{r['step_s'][s]:.2f}" if s in r["step_s"] else "-" for s in ran],
                 r["files_per_s"] or "-", r["pages_per_s"] or "-", r["answers_per_s"] or "-",
                 r["slowest_step"]]
        rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", type=Path, help="package folders")
    parser.add_argument("--package", nargs=2, action="append", default=[],
                        metavar=("LABEL", "FOLDER"), help="a package folder and its name")
    parser.add_argument("--output", type=Path,
                        default=BENCHMARK_RESULTS_DIR / "real-packages.json")
    args = parser.parse_args(argv)
    packages = [(label, Path(folder)) for label, folder in args.package]
    packages += [(str(folder), folder) for folder in args.folders]
    if not packages:
        parser.error("give at least one package folder")
    for _, folder in packages:
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder")

    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="evidence-real-package-model-") as scratch:
        embedder = configured_embedder(_settings(Path(scratch)))
        embedder.embed(["warm up the model before anything is timed"])
    load_s = time.perf_counter() - began
    run = {"benchmark": "real_packages", "date": time.strftime("%Y-%m-%d"),
           "commit": _commit(),
           "command": shlex.join(["python", "benchmarks/real_packages.py",
                                  *(sys.argv[1:] if argv is None else argv)]),
           "machine": machine(embedder, load_s), "packages": []}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    for label, folder in packages:
        result = measure(label, folder, embedder)
        print(json.dumps(result), flush=True)
        run["packages"].append(result)
        # Written after every package, so a long run keeps what it measured.
        args.output.write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")
    print(table(run["packages"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
