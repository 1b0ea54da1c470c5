"""Recorded `evidence bench` results: one JSON file per run, read back for the crowding
curve and the dashboard's Quality page."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from core.bench.run import BenchResult
from core.config import BENCHMARK_RESULTS_DIR

DEFAULT_RESULTS_DIR = BENCHMARK_RESULTS_DIR
MAX_RESULT_BYTES = 1_000_000


@dataclass(frozen=True)
class LoadedResults:
    results: list[BenchResult]  # sorted by chunks, then date
    problems: list[str]  # one sentence per file that could not be read


def parse_result(data: bytes | str, name: str) -> BenchResult:
    """One result file's content, or ValueError with one sentence naming the file."""
    if len(data) > MAX_RESULT_BYTES:
        raise ValueError(f"{name} is larger than {MAX_RESULT_BYTES:,} bytes; it is not an "
                         "`evidence bench` result.")
    try:
        return BenchResult.model_validate(json.loads(data))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(f"{name} is not JSON.") from None
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "the top level"
        raise ValueError(f"{name} is not an `evidence bench --format json` result: "
                         f"{where}: {error['msg']}.") from None


def load_results(folder: Path = DEFAULT_RESULTS_DIR) -> LoadedResults:
    """Every bench-*.json in the folder; a file that cannot be read is named, not fatal."""
    results, problems = [], []
    if folder.is_dir():
        for path in sorted(folder.glob("bench-*.json")):
            try:
                results.append(parse_result(path.read_bytes(), path.name))
            except (OSError, ValueError) as exc:
                problems.append(str(exc))
    results.sort(key=lambda r: (r.chunks, r.date))
    return LoadedResults(results=results, problems=problems)


def result_file_name(result: BenchResult) -> str:
    return f"bench-{result.chunks}.json"


def crowding_curve(results: list[BenchResult]) -> dict:
    """Per strategy (and the `ask` turn), the fraction of hash-linked follow-ups that reached
    the context at each corpus size, with the times (the latest run of each size)."""
    latest: dict[int, BenchResult] = {}
    for result in results:
        if result.chunks not in latest or result.date >= latest[result.chunks].date:
            latest[result.chunks] = result
    sizes = sorted(latest)
    strategies = list(dict.fromkeys(s for n in sizes for s in latest[n].linked_in_context))
    digests = [latest[n].criteria_digest for n in sizes]
    return {
        "sizes": sizes,
        "linked_expected": [latest[n].linked_expected for n in sizes],
        "queries": [latest[n].queries for n in sizes],
        # True when every size asked the same criteria (runs that record which they asked).
        "same_criteria": bool(digests) and None not in digests and len(set(digests)) == 1,
        "linked_in_context": {
            s: [latest[n].linked_in_context.get(s) for n in sizes] for s in strategies},
        "retrieve_ms_p50": {
            s: [latest[n].retrieve_ms_p50.get(s) for n in sizes] for s in strategies},
        "ratio_to_floor": {
            s: [latest[n].ratio_to_floor.get(s) for n in sizes] for s in strategies},
        "floor_ms_p50": [latest[n].floor_ms_p50 for n in sizes],
        "dates": [latest[n].date for n in sizes],
    }
