"""The ingest and the retrieval halves of `evidence bench`, each in a process of its own:
reads the job as JSON on stdin, writes progress and the result as JSON lines on stdout."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any


def run_job(job: dict[str, Any], emit: Callable[[dict], None]) -> dict[str, Any]:
    """The job's measurement: "ingest" or "retrieve"."""
    from core.bench.run import ingest_all, retrieve_all

    def progress(stage: str, done: int, total: int) -> None:
        emit({"kind": "progress", "stage": stage, "done": done, "total": total})

    if job["kind"] == "ingest":
        return ingest_all(job["settings"], job["vendor_id"],
                          [tuple(f) for f in job["folders"]], job["payloads"], job["texts"],
                          job["sample"], tuple(job["expected"]), progress,
                          [(c, list(ids)) for c, ids in job.get("criteria_controls", [])])
    return retrieve_all(job["settings"], job["vendor_id"], [tuple(q) for q in job["queries"]],
                        job["strategies"], progress)


def main() -> int:
    # Messages keep the real stdout; anything a library prints goes to stderr instead.
    messages = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def emit(message: dict) -> None:
        messages.write(json.dumps(message) + "\n")
        messages.flush()

    try:
        result = run_job(json.load(sys.stdin), emit)
    except Exception as exc:  # one line to the parent, which reports it
        emit({"kind": "error", "error": f"{type(exc).__name__}: "
                                         f"{' '.join(str(exc).split())[:300]}"})
        return 1
    emit({"kind": "result", "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
