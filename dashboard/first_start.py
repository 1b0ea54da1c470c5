"""First start: on an empty store the sample data is indexed in a background thread, one per
workbench (so one per server process), while every session shows the progress page; a second
session watches the same indexing instead of starting another or taking a half-indexed store
for a ready one."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import dataclass

from core.errors import EvidenceError
from core.ingest.documents import collect_files
from core.ingest.sample import DEFAULT_SAMPLE_DIR, SampleStep, ingest_sample, sample_plan
from core.workbench import Workbench
from dashboard import resources, widgets

FIRST_START_FAILED = "Indexing the sample data failed"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexingStatus:
    """What the first start's indexing is doing, as a page shows it."""

    state: str  # "running" | "done" | "failed"
    step: str  # what runs now: loading the model, or a sample step (vendor, files)
    done: int  # sample steps finished
    total: int  # sample steps in all (0 until the plan is read)
    elapsed_s: float
    finished_steps: tuple[tuple[str, float], ...]  # (step, seconds), in order
    detail: str = ""  # how far the step is: the file read, the texts embedded
    fraction: float = 0.0  # of the whole indexing, 0..1
    error: str | None = None  # one sentence, when failed


class SampleIndexing:
    """ingest_sample on a thread of its own, its progress readable from any session."""

    def __init__(self, workbench: Workbench) -> None:
        self._workbench = workbench
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._ended: float | None = None
        self._step = f"Loading the embedding model {workbench.embedder.name}"
        self._step_began = self._started
        self._done = self._total = 0
        self._detail, self._step_fraction = "", 0.0
        self._steps: dict[str, SampleStep] = {}
        self._finished: list[tuple[str, float]] = []
        self._error: str | None = None
        self._refreshed = False
        self._thread = threading.Thread(target=self._run, name="sample-indexing", daemon=True)

    def start(self) -> SampleIndexing:
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the indexing to end; True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def status(self) -> IndexingStatus:
        with self._lock:
            state = ("running" if self._ended is None
                     else "failed" if self._error is not None else "done")
            fraction = ((self._done + self._step_fraction) / self._total if self._total
                        else 0.0)
            return IndexingStatus(
                state=state, step=self._step, done=self._done, total=self._total,
                elapsed_s=(self._ended or time.monotonic()) - self._started,
                finished_steps=tuple(self._finished), detail=self._detail,
                fraction=min(fraction, 1.0), error=self._error)

    def claim_refresh(self) -> bool:
        """True once, to the first session that finds the indexing done: it drops the
        cached views of the store."""
        with self._lock:
            claimed, self._refreshed = not self._refreshed, True
            return claimed

    def _run(self) -> None:
        try:
            self._workbench.embedder.warm_up()
            self._show("Reading the sample data", 0, 0)
            self._steps = {step.label: step for step in sample_plan(DEFAULT_SAMPLE_DIR)}
            ingest_sample(self._workbench, DEFAULT_SAMPLE_DIR, self._show, self._detail_of)
        except Exception as exc:  # shown as one sentence; the server log keeps the rest
            _log.exception("Indexing the sample data failed")
            self._end(first_start_error(exc))
        else:
            self._end(None)

    def _show(self, label: str, done: int, total: int) -> None:
        """A step begins (ingest_sample's progress)."""
        step = self._steps.get(label)
        text = step_text(step) if step is not None else label
        now = time.monotonic()
        with self._lock:
            if text != self._step:
                self._finished.append((self._step, now - self._step_began))
            self._step, self._step_began = text, now
            self._done, self._total = done, total
            self._detail, self._step_fraction = "", 0.0

    def _detail_of(self, stage: str, done: int, total: int) -> None:
        """How far the running step is (the writer's progress: files read, texts embedded)."""
        with self._lock:
            if stage == "reading":
                self._detail = f"read {done} of {total} file{'s' if total != 1 else ''}"
            elif stage == "embedding":
                self._detail = f"embedded {done:,} of {total:,} texts"
                self._step_fraction = done / total if total else 1.0

    def _end(self, error: str | None) -> None:
        with self._lock:
            self._ended, self._error = time.monotonic(), error


def step_text(step: SampleStep) -> str:
    """A sample step for people: the vendor, what it indexes, and its files by name."""
    if step.kind == "questionnaire":
        return f"{step.vendor_id}: questionnaire round {step.round_number} ({step.paths[0].name})"
    what = {"tc_files": "documents", "followup_document": "follow-up documents of round "
            f"{step.round_number}"}.get(step.doc_type, step.doc_type.replace(":", " "))
    try:
        names = [found.source for found in collect_files(step.paths)]
    except EvidenceError:  # the ingest itself says what is wrong with the files
        return f"{step.vendor_id}: {what}"
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"{step.vendor_id}: {what} ({shown})"


def first_start_error(exc: Exception) -> str:
    """The sentence the progress page shows for a failed indexing: a refusal as it is, any
    other error after what failed, on one line."""
    if isinstance(exc, EvidenceError):
        sentence = widgets.error_sentence(exc, FIRST_START_FAILED)
    else:
        sentence = f"{FIRST_START_FAILED}: {type(exc).__name__}: {exc}"
    return " ".join(sentence.split())


_FIRST_START = threading.Lock()
_indexings: weakref.WeakKeyDictionary[Workbench, SampleIndexing] = weakref.WeakKeyDictionary()
_ready: weakref.WeakSet[Workbench] = weakref.WeakSet()


def sample_indexing(workbench: Workbench) -> IndexingStatus | None:
    """None when the store is ready for the pages. On an empty store, the sample data's
    indexing (started here when no session has started it) and how far it is."""
    with _FIRST_START:
        if workbench in _ready:
            return None
        indexing = _indexings.get(workbench)
        if indexing is None:
            if workbench.vendor_ids():
                _ready.add(workbench)
                return None
            indexing = _indexings[workbench] = SampleIndexing(workbench).start()
    status = indexing.status()
    if status.state != "done":
        return status
    with _FIRST_START:
        _ready.add(workbench)
    if indexing.claim_refresh():
        resources.store_changed()
    return None


def retry_sample_indexing(workbench: Workbench) -> None:
    """Index the sample data again after a failure (what is already stored is skipped)."""
    with _FIRST_START:
        indexing = _indexings.get(workbench)
        if indexing is not None and indexing.status().state == "failed":
            _indexings[workbench] = SampleIndexing(workbench).start()


def wait_for_sample_indexing(workbench: Workbench, timeout: float | None = None) -> bool:
    """Wait for a started indexing to end; True when none runs any more."""
    with _FIRST_START:
        indexing = _indexings.get(workbench)
    return indexing is None or indexing.join(timeout)
