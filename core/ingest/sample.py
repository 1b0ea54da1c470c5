"""The bundled sample data's layout, ingested in one call (CLI and dashboard first start)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from core.criteria import CriterionEntry
from core.errors import UserInputError
from core.ingest import LoadedRound
from core.ingest.criteria_lists import load_criteria, remember_criteria
from core.models import QuestionnairePayload
from core.reports import DocumentIngestReport, Progress, QuestionnaireIngestReport
from core.store import EvidenceStore

_ROUND_DIR = re.compile(r"round_(\d+)")
_ROUND_SUFFIXES = (".json", ".csv", ".xlsx", ".md")

DEFAULT_SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_data"


class SampleIngest(Protocol):
    """What the sample loader reads its rounds with and writes through."""

    store: EvidenceStore

    def load_questionnaires(self, files: Iterable[Path | str]
                            ) -> list[QuestionnairePayload]: ...

    def load_rounds(self, files: Iterable[Path | str], *, vendor_id: str | None = ...,
                    round_number: int | None = ..., timestamp: str | None = ...
                    ) -> list[LoadedRound]: ...

    def ingest_questionnaire(self, payload: QuestionnairePayload, *,
                             progress: Progress | None = ...) -> QuestionnaireIngestReport: ...

    def ingest_documents(self, vendor_id: str, paths: Iterable[Path | str], *,
                         doc_type: str = ..., round_number: int | None = ...,
                         progress: Progress | None = ...) -> DocumentIngestReport: ...


@dataclass(frozen=True)
class SampleStep:
    """One ingest call: documents of one type, or one questionnaire file."""

    vendor_id: str
    kind: str  # "documents" | "questionnaire"
    paths: tuple[Path, ...]
    doc_type: str = "tc_files"
    round_number: int | None = None

    @property
    def label(self) -> str:
        if self.kind == "questionnaire":
            return f"{self.vendor_id}: questionnaire {self.paths[0].name}"
        suffix = f" round {self.round_number}" if self.round_number else ""
        return f"{self.vendor_id}: {self.doc_type}{suffix} ({len(self.paths)} file(s))"


def sample_plan(root: Path) -> list[SampleStep]:
    """vendors/<id>/{documents, soc2_summary, followup_documents/round_N, questionnaires}."""
    vendors_dir = Path(root) / "vendors"
    if not vendors_dir.is_dir():
        raise UserInputError(f"{root} has no vendors/ folder of sample data.")
    steps: list[SampleStep] = []
    for vendor_dir in sorted(p for p in vendors_dir.iterdir() if p.is_dir()):
        vendor = vendor_dir.name
        documents = vendor_dir / "documents"
        if documents.is_dir():
            steps.append(SampleStep(vendor, "documents", (documents,)))
        for summary in sorted((vendor_dir / "soc2_summary").glob("*.md")):
            steps.append(SampleStep(vendor, "documents", (summary,),
                                    doc_type=f"soc2_summary:{summary.stem}"))
        for round_dir in sorted((vendor_dir / "followup_documents").glob("round_*")):
            match = _ROUND_DIR.fullmatch(round_dir.name)
            if match and round_dir.is_dir():
                steps.append(SampleStep(vendor, "documents", (round_dir,),
                                        doc_type="followup_document",
                                        round_number=int(match.group(1))))
        rounds = [p for p in (vendor_dir / "questionnaires").glob("round_*")
                  if p.suffix in _ROUND_SUFFIXES and _ROUND_DIR.fullmatch(p.stem)]
        for payload in sorted(rounds, key=lambda p: int(_ROUND_DIR.fullmatch(p.stem).group(1))):
            steps.append(SampleStep(vendor, "questionnaire", (payload,),
                                    round_number=int(_ROUND_DIR.fullmatch(payload.stem).group(1))))
    return steps


def _sample_round(workbench: SampleIngest, step: SampleStep) -> QuestionnairePayload:
    """A sample round: a JSON payload as it is; a spreadsheet or a questionnaire page under its
    folder's vendor, its name's round, and the time its workbook records it was created or
    the date the page states (a CSV has none: now)."""
    path = step.paths[0]
    if path.suffix == ".json":
        return workbench.load_questionnaires([path])[0]
    [loaded] = workbench.load_rounds([path], vendor_id=step.vendor_id,
                                     round_number=step.round_number,
                                     timestamp=_workbook_created(path) or _page_dated(path))
    return loaded.payload


def _page_dated(path: Path) -> str | None:
    """A questionnaire page's own date ("Last updated: March 4, 2024"), as its round's time."""
    if path.suffix != ".md":
        return None
    from core.timeline.reading import read_facts

    facts = read_facts([path.read_text(encoding="utf-8")], source=path.name)
    day = facts.reviewed_on or facts.as_of
    return f"{day}T00:00:00Z" if day else None


def _workbook_created(path: Path) -> str | None:
    if path.suffix != ".xlsx":
        return None
    from openpyxl import load_workbook

    created = load_workbook(path, read_only=True).properties.created
    return created.strftime("%Y-%m-%dT%H:%M:%SZ") if created else None


def ingest_sample(workbench: SampleIngest, root: Path = DEFAULT_SAMPLE_DIR,
                  progress: Callable[[str, int, int], None] | None = None,
                  detail: Callable[[str, int, int], None] | None = None) -> list[dict]:
    """Ingest every step of the sample plan; re-running changes nothing that is unchanged.
    `progress` hears of each step, `detail` of the files read and texts embedded in it."""
    steps = sample_plan(root)
    payloads = {step: _sample_round(workbench, step)
                for step in steps if step.kind == "questionnaire"}
    reports = []
    for i, step in enumerate(steps, start=1):
        if progress:
            progress(step.label, i - 1, len(steps))
        if step.kind == "questionnaire":
            report = workbench.ingest_questionnaire(payloads[step], progress=detail)
        else:
            report = workbench.ingest_documents(step.vendor_id, step.paths,
                                                doc_type=step.doc_type,
                                                round_number=step.round_number, progress=detail)
        reports.append(report.model_dump(mode="json"))
    criteria_file = Path(root) / "criteria.txt"
    if criteria_file.is_file():  # the sample's criteria are the ones used with its vendors
        entries = [CriterionEntry(text) for text in load_criteria(criteria_file)]
        for vendor_id in dict.fromkeys(step.vendor_id for step in steps):
            remember_criteria(workbench.store, vendor_id, criteria_file.name, entries)
    if progress:
        progress("done", len(steps), len(steps))
    return reports
