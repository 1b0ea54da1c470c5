"""The retrieval half of `evidence bench`, in a process of its own: reads the job as JSON on
stdin, writes progress and the result as JSON lines on stdout."""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    # Messages keep the real stdout; anything a library prints goes to stderr instead.
    messages = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def emit(message: dict) -> None:
        messages.write(json.dumps(message) + "\n")
        messages.flush()

    try:
        from core.bench.run import retrieve_all

        job = json.load(sys.stdin)
        result = retrieve_all(
            job["settings"], job["vendor_id"], [tuple(q) for q in job["queries"]],
            job["strategies"],
            lambda stage, done, total: emit({"kind": "progress", "done": done, "total": total}))
    except Exception as exc:  # one line to the parent, which reports it
        emit({"kind": "error", "error": f"{type(exc).__name__}: "
                                         f"{' '.join(str(exc).split())[:300]}"})
        return 1
    emit({"kind": "result", "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
