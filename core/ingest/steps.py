"""Seconds an ingest spends in each of its steps, measured as it runs.

An ingest makes an `IngestSteps` and runs under `steps.active()`; the readers and the writer
time their work with `step(NAME)`, which finds the ingest's accumulator in the context (and
does nothing outside an ingest). A step inside another (the OCR of a page while its PDF is
read) is counted in its own name only: the outer step's seconds leave it out, so the steps
of one thread add up to the time they took, without counting any of it twice.

The steps, in the order an ingest meets them:

- `read_other`: documents other than PDFs (text, Markdown, Word, HTML), JSON answers;
- `tables`: questionnaires read as tables: workbooks, the search of a PDF for a table of
  question ids (pdfplumber, on every PDF of a package), questionnaire web pages;
- `statements`: control implementation statements (OpenControl, OSCAL);
- `pdf_text`: a PDF's text layer (pypdf, and PDFium for pages kept a word per run);
- `ocr`: pages without a text layer, drawn and read by the OCR engine;
- `split`: documents cut into chunks, and what a document states of itself (its kind, date);
- `embed`: chunks and answers embedded (the first embedding of a process loads the model);
- `write`: the store's writes: chunks and answers with their vectors, the manifest commits.

A documents ingest embeds the next chunks on a second thread while it writes the ones
before, so `embed` and `write` overlap: their sum may pass the time the ingest took
(`seconds`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

STEPS = ("read_other", "tables", "statements", "pdf_text", "ocr", "split", "embed", "write")


@dataclass
class _Frame:
    """A step running on one thread: when it began, and the seconds of the steps inside it."""

    began: float
    inner: float = 0.0


@dataclass(eq=False)
class IngestSteps:
    """Seconds per step and counts (`ocr_pages`: pages read by OCR) of one ingest, and the
    seconds the ingest ran (`seconds`, over every `active()`)."""

    seconds_by_step: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _threads: threading.local = field(default_factory=threading.local, repr=False)

    @contextmanager
    def active(self) -> Iterator[IngestSteps]:
        """Run an ingest (or a part of one) with these steps as the ones `step` adds to."""
        token = _CURRENT.set(self)
        began = time.perf_counter()
        try:
            yield self
        finally:
            self.seconds += time.perf_counter() - began
            _CURRENT.reset(token)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time a step; a step already running on this thread leaves this one's seconds out."""
        frames: list[_Frame] = self._threads.__dict__.setdefault("frames", [])
        frame = _Frame(time.perf_counter())
        frames.append(frame)
        try:
            yield
        finally:
            frames.pop()
            took = time.perf_counter() - frame.began
            if frames:
                frames[-1].inner += took
            with self._lock:
                self.seconds_by_step[name] = (self.seconds_by_step.get(name, 0.0)
                                              + took - frame.inner)

    def count(self, name: str, number: int = 1) -> None:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + number

    def step_s(self) -> dict[str, float]:
        """The seconds of each step that ran, in the order of STEPS (any other name after),
        to the millisecond."""
        names = [n for n in STEPS if n in self.seconds_by_step]
        names += sorted(set(self.seconds_by_step) - set(STEPS))
        return {n: round(self.seconds_by_step[n], 3) for n in names}

    def slowest(self) -> str | None:
        """The step that took the most seconds, or None when none ran."""
        return max(self.seconds_by_step, key=self.seconds_by_step.__getitem__, default=None)


_CURRENT: ContextVar[IngestSteps | None] = ContextVar("ingest_steps", default=None)


def current_steps() -> IngestSteps | None:
    """The steps of the ingest running in this context, if any."""
    return _CURRENT.get()


@contextmanager
def step(name: str, steps: IngestSteps | None = None) -> Iterator[None]:
    """Time a step of the running ingest (or of `steps`, from another thread); nothing is
    timed outside an ingest."""
    steps = steps or _CURRENT.get()
    if steps is None:
        yield
        return
    with steps.step(name):
        yield


def count(name: str, number: int = 1) -> None:
    """Add to a count of the running ingest, if one runs."""
    steps = _CURRENT.get()
    if steps is not None:
        steps.count(name, number)
