"""A vendor's package as it arrives (a folder of policies, reports, certificates, filled
questionnaires, answer files and control implementation statements), sorted file by file:
each document is read and chunked, each questionnaire read as a round of its own (the
statement files of one system together, as one round), every file checked before anything is
written. A file that cannot be read refuses the package, naming every such file, unless
the reviewer asks to skip them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.config import MAX_ROUND_NUMBER
from core.errors import UserInputError, shown_path
from core.ingest import LoadedRound, read_user_file
from core.ingest.documents import (
    SUPPORTED_LIST,
    SUPPORTED_SUFFIXES,
    DocumentFile,
    PreparedDocument,
    prepare_document,
    walk_folder,
)
from core.ingest.rounds.answers import LayoutRead
from core.ingest.rounds.control_statements import (
    PackageStatements,
    group_names,
    is_statement_file,
    package_statements,
    statement_round,
)
from core.ingest.rounds.mapping import ColumnMapping
from core.ingest.rounds.payload import load_payload_file, payload_records
from core.ingest.rounds.pdf_tables import read_pdf_questionnaire
from core.ingest.rounds.table_round import (
    current_timestamp,
    layout_round,
    pages_text,
    spreadsheet_round,
)
from core.ingest.rounds.tables import is_spreadsheet
from core.ingest.rounds.vsaq import definition_for, read_answers, read_vsaq
from core.ingest.rounds.web_pages import is_web_page, page_text, read_page_questionnaire
from core.ingest.steps import IngestSteps, step
from core.ingest.writer import EvidenceWriter
from core.models import FOLLOWUP_SOURCE_TYPE, PayloadLimits, StoredRecord
from core.reports import Progress
from core.store import StoredChunk, Where, check_vendor_id

QUESTIONNAIRE_LIST = ".xlsx, .csv or .json, or a PDF or web page holding question ids"
_OFFICE_LOCK = "~$"  # the lock file Office leaves beside a workbook that is open

@dataclass(frozen=True)
class PackageFile:
    """One file of the package and what it becomes: a document, a round, or skipped (with
    `unreadable` set when it could not be read, rather than being nothing to read)."""

    file: str  # its path inside the package, as it is named in every line and sentence
    became: str  # document | round | skipped
    reason: str
    layout: str | None = None  # policy | report | certificate | letter | questionnaire_page |
    # document (the document's kind), or the questionnaire's layout
    unreadable: bool = False
    document: PreparedDocument | None = None
    round: LoadedRound | None = None
    replaces_round: bool = False  # the round already holds this file's answers, and only them
    unchanged: bool = False  # ... and holds them exactly as the file has them now
    preview: list[dict[str, Any]] = field(default_factory=list)
    sheets: dict[str, Any] | None = None  # a workbook's sheets read and left out (with why)
    # A file read into another file's round (a component of an OpenControl system, whose
    # round is on its opencontrol.yaml's line): that file, and the round's number.
    part_of: str | None = None
    part_round: int | None = None
    pages: int | None = None  # a PDF's pages, read as a document or as a questionnaire

    @property
    def round_number(self) -> int | None:
        return self.round.payload.round_number if self.round else self.part_round


@dataclass(frozen=True)
class Package:
    """A package read and sorted, nothing written yet."""

    vendor_id: str
    folder: Path
    files: list[PackageFile]
    # The seconds each step of reading it took, and of writing it once it is written.
    steps: IngestSteps = field(default_factory=IngestSteps, compare=False)

    @property
    def unreadable(self) -> list[PackageFile]:
        return [f for f in self.files if f.unreadable]

    @property
    def documents(self) -> list[PackageFile]:
        return [f for f in self.files if f.became == "document"]

    @property
    def rounds(self) -> list[PackageFile]:
        """The files whose lines hold a round (a file read into another's round is not)."""
        return [f for f in self.files if f.became == "round" and f.part_of is None]


def read_package(writer: EvidenceWriter, vendor_id: str, folder: Path, *,
                 first_round: int | None = None, skip_unreadable: bool = False,
                 timestamp: str | None = None, columns: dict[str, str] | None = None,
                 sheets: dict[str, list[str]] | None = None,
                 progress: Progress | None = None) -> Package:
    """Read and sort every file of `folder`, writing nothing. Rounds are numbered from
    `first_round`, by default from the next round the vendor has not used (a file whose
    answers alone make up a stored round keeps that round). `columns` maps a file of the
    package to the column mapping its table is read with (`--columns`'s form), `sheets` to
    the sheets it is read from (`--sheet`). The package's `steps` time the reading."""
    steps = IngestSteps()
    with steps.active():
        return _read_package(writer, vendor_id, folder, first_round, skip_unreadable,
                             timestamp, columns, sheets, progress, steps)


def _read_package(writer: EvidenceWriter, vendor_id: str, folder: Path,
                  first_round: int | None, skip_unreadable: bool, timestamp: str | None,
                  columns: dict[str, str] | None, sheets: dict[str, list[str]] | None,
                  progress: Progress | None, steps: IngestSteps) -> Package:
    check_vendor_id(vendor_id)
    if first_round is not None and (isinstance(first_round, bool)
                                    or not 1 <= first_round <= MAX_ROUND_NUMBER):
        raise UserInputError(f"--round must be a whole number from 1 to {MAX_ROUND_NUMBER}, "
                             f"not {first_round!r}.")
    folder = Path(folder)
    if not folder.is_dir():
        raise UserInputError(f"{shown_path(folder)} is not a folder; give the folder that "
                             "holds the vendor's package.")
    paths = walk_folder(folder, hidden_folders=False)
    names = {_relative(folder, p) for p in paths}
    for option, given in (("--columns", columns or {}), ("--sheet", sheets or {})):
        unknown = sorted(set(given) - names)
        if unknown:
            raise UserInputError(
                f"{option} names {unknown[0]}, which is not a file of the package "
                f"{shown_path(folder)}; name the file as its line does (its path inside the "
                f"folder), for example {option} \"{_example(names)}={_FORMS[option]}\".")
    mappings = {name: ColumnMapping.parse(text) for name, text in (columns or {}).items()}
    settings = writer.settings
    limits = PayloadLimits.from_settings(settings)
    stamp = current_timestamp() if timestamp is None else timestamp
    json_files = [path for path in paths
                  if path.suffix.lower() == ".json" and not path.name.startswith(".")]
    with step("read_other") if json_files else nullcontext():
        answers = {path: found for path in json_files
                   for found in [read_answers(path)] if found is not None}
        definitions = {definition: path for path in answers
                       for definition in [definition_for(path)] if definition is not None}
    with step("statements") if any(map(is_statement_file, paths)) else nullcontext():
        statements = _statement_files(package_statements(folder, paths, limits,
                                                         lambda p: _relative(folder, p)),
                                      folder, vendor_id, stamp, limits)
    files: list[PackageFile] = []
    for index, path in enumerate(paths, start=1):
        name = _relative(folder, path)
        if path in statements:
            option = ("--columns" if name in mappings else "--sheet" if name in (sheets or {})
                      else None)
            files.append(statements[path] if option is None else PackageFile(
                name, "skipped", f"{name} holds control implementation statements, not a "
                f".csv or .xlsx table; {option} applies only to one.", unreadable=True))
            if progress:
                progress("reading", index, len(paths))
            continue
        try:
            files.append(_sort_file(path, name, vendor_id, stamp, limits, settings,
                                    mappings.get(name), (sheets or {}).get(name, []),
                                    definitions, answers.get(path)))
        except UserInputError as exc:
            files.append(PackageFile(name, "skipped", _about(str(exc), path, name, folder),
                                     unreadable=True))
        if progress:
            progress("reading", index, len(paths))
    package = Package(vendor_id, folder, _number_rounds(writer, vendor_id, files, first_round),
                      steps)
    _refuse(package, skip_unreadable)
    return package


_FORMS = {"--columns": "id=A,question=B,answer=C+E", "--sheet": "SHEET"}


def _example(names: set[str]) -> str:
    tables = sorted(n for n in names if is_spreadsheet(n))
    return (tables or sorted(names) or ["FILE"])[0]


def _relative(folder: Path, path: Path) -> str:
    return shown_path(path.relative_to(folder).as_posix())


def _about(message: str, path: Path, name: str, folder: Path) -> str:
    """A reader's sentence about a file, naming it as the package names it."""
    return message.replace(shown_path(path), name).replace(shown_path(folder) + "/", "")


def _sort_file(path: Path, name: str, vendor_id: str, timestamp: str, limits: PayloadLimits,
               settings: Any, mapping: ColumnMapping | None, sheets: list[str],
               definitions: dict[Path, Path], answers: dict[str, str] | None) -> PackageFile:
    """What one file becomes; `definitions` are the VSAQ questionnaires that answers files
    of the package read, `answers` this file's VSAQ answers if it is such a file."""
    base = path.name
    if base.startswith(".") or base.startswith(_OFFICE_LOCK):
        what = "a hidden file" if base.startswith(".") else "the lock file of an open workbook"
        return PackageFile(name, "skipped", f"{name} is {what}; nothing in it is evidence.")
    if path in definitions:
        return PackageFile(name, "skipped", f"{name} is the VSAQ questionnaire that "
                           f"{_relative(path.parent, definitions[path])} answers; its question "
                           "texts are read with those answers.", layout="vsaq definition")
    suffix = path.suffix.lower()
    if (mapping is not None or sheets) and not is_spreadsheet(path):
        what = "a column mapping applies" if mapping is not None else "--sheet applies"
        raise UserInputError(f"{name} is not a .csv or .xlsx table; {what} only to one.")
    if is_spreadsheet(path):
        with step("tables"):
            data = read_user_file(path, max_bytes=limits.max_bytes, what="a questionnaire round")
            read = spreadsheet_round(name, data, vendor_id=vendor_id, round_number=1,
                                     timestamp=timestamp, limits=limits, columns=mapping,
                                     sheets=sheets)
        layout = read.layout or "criterion, question, answer table"
        where = f"sheet {read.sheet}" if read.sheet else "the table"
        left = (f"; left out {', '.join(sheet for sheet, _ in read.left_out)}"
                if read.left_out else "")
        return PackageFile(name, "round", f"a questionnaire ({layout}): "
                           f"{_count(len(read.payload.responses), 'answer')} from {where}"
                           f"{left}.",
                           layout=layout, round=LoadedRound(read.payload, name, read.notes),
                           preview=read.preview(), sheets=read.sheets())
    if suffix == ".json":
        with step("read_other"):
            if (definition_for(path) is None) if answers is not None else not _round_shaped(
                    path, limits):
                return PackageFile(name, "skipped", f"{name} is JSON data, not a "
                                   "questionnaire round (vendor_id, round_number, responses) "
                                   "nor VSAQ answers with their questionnaire beside them; "
                                   "nothing in it was read.", layout="JSON data")
            return _json_round(path, name, vendor_id, timestamp, limits, answers)
    kept_why = ""
    pages = None
    if suffix == ".pdf":
        with step("tables"):
            data = read_user_file(path, max_bytes=settings.max_document_bytes,
                                  what="a document")
            found = read_pdf_questionnaire(name, data)
            pages = found.pages
            if found.read is not None:
                return replace(_questionnaire_file(
                    name, found.read, f" from {pages_text(found.read.sheets)}", vendor_id,
                    timestamp, limits), pages=pages)
        if found.looks_like:
            kept_why = (f" It looks like a questionnaire and was kept as a document: "
                        f"{found.reason}.")
    if is_web_page(path):
        with step("tables"):
            data = read_user_file(path, max_bytes=settings.max_document_bytes,
                                  what="a document")
            page = read_page_questionnaire(name, page_text(path, data))
            if page.read is not None:
                return _questionnaire_file(name, page.read, "", vendor_id, timestamp, limits)
        if page.looks_like:
            kept_why = (f" It holds question ids and was kept as a document: "
                        f"{page.reason}.")
    if suffix in SUPPORTED_SUFFIXES:
        document = prepare_document(DocumentFile(path, name), settings.chunk_size,
                                    settings.chunk_overlap, max_bytes=settings.max_document_bytes)
        kind = document.facts.kind if document.facts.kind != "other" else "document"
        return PackageFile(name, "document", _document_reason(document, kind) + kept_why,
                           layout=kind,
                           document=document, pages=document.pages if pages is None else pages,
                           preview=[{"chunk": i, "page": c.page, "ocr": c.ocr,
                                     "text": c.text[:300]}
                                    for i, c in enumerate(document.chunks[:5], start=1)])
    raise UserInputError(f"{name} is not a format the workbench reads (documents: "
                         f"{SUPPORTED_LIST}; questionnaires: {QUESTIONNAIRE_LIST}).")


def _questionnaire_file(name: str, found: LayoutRead, where: str, vendor_id: str,
                        timestamp: str, limits: PayloadLimits) -> PackageFile:
    """A questionnaire read from a file without a workbook (a PDF, a web page) as a round of
    the package; `where` says where its answers stood (" from pages 2-9")."""
    read = layout_round(name, found, vendor_id=vendor_id, round_number=1, timestamp=timestamp,
                        limits=limits)
    return PackageFile(name, "round", f"a questionnaire ({read.layout}): "
                       f"{_count(len(read.payload.responses), 'answer')}{where}.",
                       layout=read.layout, round=LoadedRound(read.payload, name, read.notes),
                       preview=read.preview())


def _statement_files(found: PackageStatements, folder: Path, vendor_id: str, timestamp: str,
                     limits: PayloadLimits) -> dict[Path, PackageFile]:
    """What the package's control statement files become: each system's files one round,
    on the line of its opencontrol.yaml (else of its first file), the others read into it;
    a file that cannot be read, or that its system leaves out, skipped with why."""
    out = {path: PackageFile(_relative(folder, path), "skipped", why, unreadable=True)
           for path, why in found.unreadable.items()}
    out.update({path: PackageFile(_relative(folder, path), "skipped", why)
                for path, why in found.skipped.items()})
    for group in found.groups:
        head = group.manifest or group.files[0]
        others = [f for f in group.every_file if f is not head]
        try:
            read = statement_round(group, vendor_id=vendor_id, round_number=1,
                                   timestamp=timestamp, limits=limits)
        except UserInputError as exc:
            out[head.path] = PackageFile(head.name, "skipped", str(exc), unreadable=True)
            for other in others:
                out[other.path] = PackageFile(
                    other.name, "skipped", f"{other.name} was not read: it is part of the "
                    f"control statements of {group.system}, which {head.name}'s line says "
                    "cannot be read.")
            continue
        count = len(read.payload.responses)
        where = (f" from {len(group.files)} files: {group_names(group)}"
                 if len(group.files) > 1 else "" if head is group.files[0]
                 else f" from {group_names(group)}")
        out[head.path] = PackageFile(
            head.name, "round", f"control implementation statements ({read.layout}) of "
            f"{group.system}: {_count(count, 'answer')}{where}.", layout=read.layout,
            round=LoadedRound(read.payload, head.name, read.notes), preview=read.preview())
        for other in others:
            out[other.path] = PackageFile(
                other.name, "round", f"read with {head.name} as one round, the control "
                f"implementation statements of {group.system}.", layout=read.layout,
                part_of=head.name)
    return out


_ROUND_KEYS = {"vendor_id", "round_number", "timestamp", "responses"}


def _round_shaped(path: Path, limits: PayloadLimits) -> bool:
    """True for JSON that means to be a bulk payload (an object with a payload's keys), or
    that cannot be read as JSON at all: either is read as a round, and refused as one if it
    is not a valid one. JSON data of any other shape is not a round."""
    try:
        data = json.loads(read_user_file(path, max_bytes=limits.max_bytes).decode("utf-8-sig"))
    except (UserInputError, ValueError, RecursionError):
        return True
    return isinstance(data, dict) and bool(set(data) & _ROUND_KEYS)


def _json_round(path: Path, name: str, vendor_id: str, timestamp: str,
                limits: PayloadLimits, answers: dict[str, str] | None) -> PackageFile:
    """A VSAQ answers file (a round of the package's numbering), or a bulk payload, which
    names its own vendor (it must be the package's) and round."""
    if answers is not None:
        read = layout_round(name, read_vsaq(path, answers), vendor_id=vendor_id,
                            round_number=1, timestamp=timestamp, limits=limits)
        return PackageFile(name, "round", f"VSAQ answers: "
                           f"{_count(len(read.payload.responses), 'answer')}.",
                           layout=read.layout,
                           round=LoadedRound(read.payload, name, read.notes),
                           preview=read.preview())
    payload = load_payload_file(path, limits=limits)
    if payload.vendor_id != vendor_id:
        raise UserInputError(f"{name} is a round of the vendor '{payload.vendor_id}', not of "
                             f"'{vendor_id}'; ingest it with that vendor's evidence.")
    return PackageFile(name, "round", f"a questionnaire round (JSON) that names its own round "
                       f"{payload.round_number}: {_count(len(payload.responses), 'answer')}.",
                       layout="bulk payload", round=LoadedRound(payload, name),
                       preview=[{"row": i, "criterion": r.criterion_question_text,
                                 "question": r.question_text, "answer": r.answer_text}
                                for i, r in enumerate(payload.responses, start=1)])


_DATED = {"period_end": "period ending", "as_of": "dated", "reviewed_on": "reviewed"}


def _document_reason(document: PreparedDocument, kind: str) -> str:
    what = {"report": "a report", "certificate": "a certificate", "policy": "a policy document",
            "letter": "a letter", "questionnaire_page": "a questionnaire page",
            "document": "a document"}[kind]
    facts = document.facts
    dated = facts.stated_date
    if dated is not None:
        what += f" ({_DATED[dated[1]]} {dated[0]})"
    chunks = _count(len(document.chunks), "chunk")
    if document.pages is None:
        return f"{what}: {chunks}."
    ocr_pages = len({c.page for c in document.chunks if c.ocr})
    read = f", {ocr_pages} read by OCR" if ocr_pages else ""
    return f"{what} (PDF, {_count(document.pages, 'page')}{read}): {chunks}."


def _count(number: int, thing: str) -> str:
    return f"{number:,} {thing}{'' if number == 1 else 's'}"


_WHEN = ("timestamp", "timestamp_epoch")  # when a round was answered, not what it holds


def _answers(records: Sequence[StoredRecord | StoredChunk]) -> dict[str, tuple[str, str]]:
    """Each answer record as what it holds: its text and its metadata but the time."""
    return {r.id: (r.text, json.dumps({k: v for k, v in r.metadata.items() if k not in _WHEN},
                                      sort_keys=True)) for r in records}


def _stored_rounds(writer: EvidenceWriter, vendor_id: str
                   ) -> dict[int, dict[str, tuple[str, str]]]:
    """The vendor's answers, round by round, as `_answers` gives them."""
    vendor = writer.existing_vendor(vendor_id)
    if vendor is None:
        return {}
    by_round: dict[int, list[StoredChunk]] = {}
    for record in vendor.records(Where.eq(source_type=FOLLOWUP_SOURCE_TYPE)):
        by_round.setdefault(int(record.metadata["round_number"]), []).append(record)
    return {number: _answers(records) for number, records in by_round.items()}


def _origins(answers: dict[str, tuple[str, str]]) -> set[str | None]:
    """The files a stored round's answers were read from (None for one that names none)."""
    return {json.loads(meta).get("origin_file") for _, meta in answers.values()}


def _number_rounds(writer: EvidenceWriter, vendor_id: str, files: list[PackageFile],
                   first_round: int | None) -> list[PackageFile]:
    """Each questionnaire its round: a bulk payload keeps its own; the others are numbered
    from `first_round` or the next free round, and a file whose answers alone make up a
    stored round keeps it (the round is replaced by the file as it is now)."""
    rounds = [f for f in files if f.became == "round" and f.round is not None]
    if not rounds:
        return files
    rounds_held = _stored_rounds(writer, vendor_id)
    stored = {number: _origins(answers) for number, answers in rounds_held.items()}
    claimed = {f.round.payload.round_number for f in rounds
               if f.layout == "bulk payload" and f.round is not None}
    taken = set(stored) | claimed
    numbered: dict[str, tuple[int, bool]] = {}
    next_number = first_round if first_round is not None else max(taken, default=0) + 1
    for item in rounds:
        if item.layout == "bulk payload":
            continue
        origin = _origins_read(item, files)
        own = [n for n, origins in sorted(stored.items()) if origins == origin
               and n not in claimed and n not in {v[0] for v in numbered.values()}]
        if first_round is None and own:
            numbered[item.file] = (own[0], True)
            continue
        while first_round is None and next_number in taken:
            next_number += 1
        number = next_number
        if number > MAX_ROUND_NUMBER:
            raise UserInputError(f"{item.file} would be round {number}, past the last round "
                                 f"number ({MAX_ROUND_NUMBER}).")
        if number in claimed:
            raise UserInputError(f"{item.file} would be round {number}, which a JSON round of "
                                 "the package names as its own; give another --round.")
        if number in stored and stored[number] != origin:
            others = ", ".join(sorted(str(o) for o in stored[number] if o) or ["another file"])
            raise UserInputError(f"{item.file} would be round {number} of {vendor_id}, which "
                                 f"already holds answers from {others}; give another --round "
                                 "or leave it out for the next free round.")
        numbered[item.file] = (number, number in stored)
        taken.add(number)
        next_number += 1
    out = []
    for item in files:
        if item.file in numbered and item.round is not None:
            number, replaces = numbered[item.file]
            payload = item.round.payload.model_copy(update={"round_number": number})
            unchanged = replaces and _answers(payload_records(payload)) == rounds_held[number]
            again = (" (the round that already holds this file's answers"
                     + (", unchanged)" if unchanged else ")") if replaces else "")
            item = replace(item, round=replace(item.round, payload=payload),
                           replaces_round=replaces, unchanged=unchanged,
                           reason=f"{item.reason.removesuffix('.')}; round {number}{again}.")
        elif item.part_of in numbered:
            number = numbered[item.part_of][0]
            item = replace(item, part_round=number,
                           reason=f"{item.reason.removesuffix('.')}; round {number}.")
        out.append(item)
    return out


def _origins_read(item: PackageFile, files: list[PackageFile]) -> set[str | None]:
    """The files a round's answers name as theirs: the file itself, or for a system's
    control statements each of its files that holds an answer."""
    if item.round is None or not any(f.part_of == item.file for f in files):
        return {Path(item.file).name}
    return {r.origin.file if r.origin is not None else None
            for r in item.round.payload.responses}


def _refuse(package: Package, skip_unreadable: bool) -> None:
    unreadable = package.unreadable
    usable = package.documents + package.rounds
    shown = shown_path(package.folder)
    if unreadable and not skip_unreadable:
        listed = "; ".join(f.reason.removesuffix(".") for f in unreadable)
        count = _count(len(unreadable), "file")
        raise UserInputError(
            f"The package {shown} was not ingested, as {count} cannot be read: {listed}; fix "
            f"{'it' if len(unreadable) == 1 else 'them'}, or ingest the rest with "
            "--skip-unreadable.")
    if not usable:
        raise UserInputError(
            f"The package {shown} holds no file the workbench reads (documents: "
            f"{SUPPORTED_LIST}; questionnaires: {QUESTIONNAIRE_LIST})"
            + ("; every file was skipped." if package.files else "; it is empty."))


def ingest_package(writer: EvidenceWriter, package: Package,
                   progress: Progress | None = None) -> list[dict[str, Any]]:
    """Write a package read by `read_package`: its documents (each complete or not at all),
    then each round (all of its answers or none). One line per file, in the package's order.
    The package's `steps` time the writing too."""
    with package.steps.active():
        return _ingest_package(writer, package, progress)


def _ingest_package(writer: EvidenceWriter, package: Package,
                    progress: Progress | None) -> list[dict[str, Any]]:
    outcomes: dict[str, dict[str, Any]] = {}
    documents = package.documents
    if documents:
        report = writer.prepared_documents(
            package.vendor_id, [f.document for f in documents if f.document is not None],
            progress=progress)
        for item, outcome in zip(documents, report.documents, strict=True):
            outcomes[item.file] = {"chunks": outcome.chunks, "status": outcome.status}
    for item in package.rounds:
        assert item.round is not None
        if item.unchanged:  # nothing to write: the round holds exactly these answers
            outcomes[item.file] = {"indexed_count": len(item.round.payload.responses),
                                   "status": "unchanged"}
            continue
        [line] = writer.rounds([item.round.payload], replace=item.replaces_round,
                               progress=progress)
        outcomes[item.file] = {"indexed_count": line.indexed_count,
                               "status": "replaced" if item.replaces_round else "added",
                               **({"removed_count": line.removed_count}
                                  if line.removed_count else {})}
    for item in package.files:  # a file read into another's round says how that round went
        if item.part_of is not None and item.part_of in outcomes:
            outcomes[item.file] = {"status": outcomes[item.part_of]["status"]}
    return [package_line(item, outcomes.get(item.file, {})) for item in package.files]


def package_line(item: PackageFile, outcome: dict[str, Any]) -> dict[str, Any]:
    """The JSON line of one file (CONTRACT.md's `ingest package` line); a workbook's line
    names the sheets read and left out."""
    return {"file": item.file, "became": item.became, "layout": item.layout,
            "round_number": item.round_number, **outcome,
            **({"sheets": item.sheets} if item.sheets is not None else {}),
            "reason": item.reason}


def package_timings(package: Package) -> dict[str, Any]:
    """What the package holds and what reading it (and writing it, once written) took: its
    files, PDF pages (those read by OCR), answers and chunks, the seconds the ingest ran, the
    seconds of each step (`core.ingest.steps`) and the slowest step (`ingest package
    --timings`'s closing line)."""
    steps = package.steps
    return {"files": len(package.files), "documents": len(package.documents),
            "rounds": len(package.rounds),
            "skipped": sum(f.became == "skipped" for f in package.files),
            "pages": sum(f.pages or 0 for f in package.files),
            "ocr_pages": steps.counts.get("ocr_pages", 0),
            "answers": sum(len(f.round.payload.responses) for f in package.rounds
                           if f.round is not None),
            "chunks": sum(len(f.document.chunks) for f in package.documents
                          if f.document is not None),
            "seconds": round(steps.seconds, 3), "step_s": steps.step_s(),
            "slowest_step": steps.slowest()}


PREVIEWED = 3  # answers or chunks a dry run shows of each file


def dry_run_lines(package: Package) -> list[dict[str, Any]]:
    """What `ingest package --dry-run` prints: each file's line as the ingest would print
    it, with what it would hold and its first answers or chunks; nothing is written."""
    lines = []
    for item in package.files:
        would: dict[str, Any] = {}
        if item.document is not None:
            would = {"chunks": len(item.document.chunks)}
        elif item.round is not None:
            would = {"answers": len(item.round.payload.responses)}
        lines.append({**package_line(item, would), "preview": item.preview[:PREVIEWED]})
    return lines
