"""The SIGKILL fault case that once failed, run many times over under load.

`rounds`, killed just after its last write (round 3's responses): the store must be complete
when opened again. `EVIDENCE_STRESS_RUNS` sets how many kills one test makes (10 in the
suite); the stress run is 200, two processes at once:

    EVIDENCE_STRESS_RUNS=100 .venv/bin/python -m pytest -m stress & \\
    EVIDENCE_STRESS_RUNS=100 .venv/bin/python -m pytest -m stress; wait
"""

from __future__ import annotations

import os
import shutil
import signal

import pytest

from core.store import VendorEvidence
from tests.test_faults import (  # noqa: F401  (fixtures of the fault suite, shared)
    SCENARIOS,
    assert_complete,
    assert_interrupted_state,
    before,
    driver,
    inputs,
    observe,
    references,
    run_driver,
    run_ingest,
    template,
    workbench_at,
)

RUNS = int(os.environ.get("EVIDENCE_STRESS_RUNS", "10"))


@pytest.mark.stress
def test_sigkill_after_a_rounds_last_write_leaves_it_complete_every_time(
        tmp_path, monkeypatch, template, inputs, references, before, driver):  # noqa: F811
    """The cause of the case's one failure: a store reopened after a SIGKILL can have an HNSW
    index that answers a query short of records it holds (a stress run of 200 saw it once:
    86 of 88 records). `VendorEvidence._with_unreached` scores such records exactly; the
    runs that needed it are counted and printed."""
    filled: list[int] = []
    real = VendorEvidence._with_unreached

    def counted(self, rows, embedding, where):
        out = real(self, rows, embedding, where)
        if len(out) > len(rows):
            filled.append(run)
        return out

    monkeypatch.setattr(VendorEvidence, "_with_unreached", counted)
    name = "rounds"
    scenario = SCENARIOS[name]
    number = len(scenario.writes)
    after = references(name).view
    failures = []
    run = 0
    for run in range(RUNS):  # noqa: B007 (read by `counted`)
        store = tmp_path / f"store-{run}"
        shutil.copytree(template, store)
        killed = run_driver(driver, {"mode": "ingest", "scenario": name, "store": str(store),
                                     "inputs": str(inputs), "at": number, "when": "after"})
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        try:
            assert_interrupted_state(store, before, after)
            run_ingest(workbench_at(store), scenario, inputs)
            assert_complete(observe(store), after)
        except AssertionError as exc:
            failures.append(f"run {run}: {str(exc)[:300]}")
            shutil.copytree(store, tmp_path / f"failed-{run}")
        shutil.rmtree(store, ignore_errors=True)
    print(f"{RUNS} kills; the index answered short in {len(set(filled))} of the reopened "
          "stores, and the records it missed were found")
    assert not failures, f"{len(failures)} of {RUNS} runs failed:\n" + "\n".join(failures)
