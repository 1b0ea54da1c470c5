"""One core per test worker.

With two workers on two cores, each process sized its thread pools for the whole machine:
ONNX Runtime and torch each ran two threads per worker, four threads spinning for two cores,
and a parallel operation waits for its slowest thread, which the other worker's threads keep
off the core. Each worker is given its own share of the cores instead (its CPU affinity,
which every process it starts inherits and which ONNX Runtime, torch's OpenMP pool and the
embedding code size their threads by), so no worker's threads wait on another's."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def own_share_of_cores() -> list[int] | None:
    """Pin this xdist worker and its threads to its share of the allowed cores; the share,
    or None when not a worker (or when there are fewer cores than workers)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if not worker.startswith("gw") or count < 2 or not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < count:
        return None
    share = cores[int(worker[2:]) % count::count]
    # The calling thread's mask is what new threads inherit; threads already started (a
    # BLAS pool started on import) are moved one by one.
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task.name), share)
    os.sched_setaffinity(0, share)
    return share
