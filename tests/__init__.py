"""The project's tests.

Workers of one run (pytest-xdist) share the machine's cores, so each runs its models, and
the commands and servers it starts, on its share of them: every worker spinning a thread
per core on the same cores made the model tests a fifth slower. Set here, before any test
module loads numpy or torch (`Settings.model_threads`, and OpenMP's threads)."""

import os

_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _SHARE = str(max(1, len(os.sched_getaffinity(0)) // _WORKERS))
    os.environ.setdefault("EVIDENCE_MODEL_THREADS", _SHARE)
    os.environ.setdefault("OMP_NUM_THREADS", _SHARE)
