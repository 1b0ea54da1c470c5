"""A reproducible vendor corpus: policy documents, follow-up documents, and questionnaire
rounds whose answers to each benchmark criterion are planted at known rounds.

Every paragraph is 600 to 950 characters and paragraphs are separated by a blank line, so
the chunker keeps each one as exactly one chunk: a corpus asked for N chunks holds N.

Besides, the store is given what adds lookups to every retrieval: documents in versions (an
auditor's report for three years, a policy in two numbered versions, a certificate issued
again), of which the older are superseded; a control matrix, sent with two rounds, whose
answers are keyed by NIST SP 800-53 control ids and linked to no criterion; and a control for
each criterion asked (`BenchQuery.controls`), kept in the store as the criteria's accepted
mappings, so that the control tier links the matrix's answers to them."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from core.bench.vocabulary import (
    AD_HOC_QUESTIONS,
    AUDITOR,
    CERTIFICATES,
    CERTIFICATION_BODY,
    CONTROL_ANSWERS,
    DOCUMENT_CONTROL,
    DOCUMENT_KINDS,
    DOCUMENT_SUBJECTS,
    DOMAIN_CONTROLS,
    DOMAINS,
    FILLERS,
    LONG_ANSWERS,
    POLICY_CHANGE,
    POLICY_OPENING,
    POLICY_OWNER,
    POLICY_VERSIONS,
    REPORT_OPENING,
    REPORT_TESTS,
    REPORT_YEARS,
    SCOPES,
    TERSE_ANSWERS,
    Domain,
)
from core.config import MAX_RESPONSES_PER_ROUND
from core.controls.answers import control_metadata, control_question, searched_text
from core.hashing import content_hash, format_embedding_content, response_key
from core.ingest.rounds.payload import followup_record_id

VENDOR_ID = "benchmark-vendor"
ROUNDS = 5
MIN_PARAGRAPH, MAX_PARAGRAPH = 600, 950
# A document of 20 to 160 chunks: a short standard up to a long policy or report.
MIN_DOC_CHUNKS, MAX_DOC_CHUNKS = 20, 160
# Follow-up documents (uploaded with a round) hold this share of the chunks.
FOLLOWUP_DOCUMENT_SHARE = 0.03
DEFAULT_SEED = 20240209
# The documents in versions: a corpus smaller than the benchmark's least has none. The
# report has one section per 40 chunks (one per 80 for the policy), up to these.
VERSIONED_MIN_CHUNKS = 100
MAX_REPORT_SECTIONS, MAX_POLICY_SECTIONS = 100, 40
# The share of a policy's sections a new version changes (the rest it carries over as they
# were).
POLICY_CHANGED_SHARE = 0.5
# The rounds that carry the control matrix, and the share of the table's controls each
# answers (a control answered in both has its round-2 answer superseded by round 4's).
CONTROL_MATRIX_ROUNDS = ((2, 0.6), (4, 0.5))


@dataclass(frozen=True)
class GeneratedDocument:
    name: str
    doc_type: str  # tc_files | followup_document
    round_number: int | None
    paragraphs: tuple[str, ...]
    # The series of a document sent in versions ("" for one that is its own), and whether a
    # newer version of the series supersedes it.
    series: str = ""
    superseded: bool = False

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs) + "\n"


@dataclass(frozen=True)
class PlantedAnswer:
    """One response planted for a benchmark criterion: where it is and what it says."""

    record_id: str
    round_number: int
    question: str
    answer: str
    reworded: bool


@dataclass(frozen=True)
class ControlAnswer:
    """An answer of the control matrix: keyed by an 800-53 control id and linked to no
    criterion, so only a criterion mapped to its control links it (the control tier)."""

    record_id: str
    round_number: int
    control: str
    question: str
    answer: str


@dataclass
class BenchQuery:
    """A criterion the benchmark asks, with every response linked to it by hash, and the
    800-53 controls it is mapped to."""

    criterion: str
    domain: str
    planted: list[PlantedAnswer]
    controls: tuple[str, ...] = ()

    def expected_ids(self, max_rounds: int) -> list[str]:
        """The responses every design agrees belong in the context: the latest rounds."""
        latest = sorted(self.planted, key=lambda p: p.round_number)[-max_rounds:]
        return [p.record_id for p in latest]


@dataclass
class Corpus:
    vendor_id: str
    seed: int
    documents: list[GeneratedDocument]
    payloads: list[dict]  # questionnaire payloads, in round order
    queries: list[BenchQuery]
    distractor_criteria: list[str] = field(default_factory=list)
    control_answers: list[ControlAnswer] = field(default_factory=list)

    @property
    def chunks(self) -> int:
        return sum(len(d.paragraphs) for d in self.documents)

    @property
    def superseded_documents(self) -> list[str]:
        """The names of the documents a newer version of their series supersedes."""
        return [d.name for d in self.documents if d.superseded]

    def criteria_controls(self) -> list[tuple[str, list[str]]]:
        """Each criterion asked with the control ids it is mapped to, as a criteria file's
        `controls` column gives them."""
        return [(q.criterion, list(q.controls)) for q in self.queries]

    @property
    def followup_responses(self) -> int:
        return sum(len(p["responses"]) for p in self.payloads)

    def criteria_digest(self) -> str:
        """A fingerprint of the criteria asked, in order: two runs with the same one asked
        the same questions, so their figures can be set side by side."""
        joined = "\n".join(q.criterion for q in self.queries)
        return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16]

    def texts(self) -> list[str]:
        """Every text the ingest embeds, as the store will hold it."""
        texts = [p for d in self.documents for p in d.paragraphs]
        # An answer keyed by an 800-53 control is embedded with the catalog's words on it.
        texts += [searched_text(format_embedding_content(r["question_text"], r["answer_text"]),
                                control_metadata(r.get("questionnaire_id"), None))
                  for p in self.payloads for r in p["responses"]]
        return texts

    def write_documents(self, folder: Path) -> dict[tuple[str, int | None], Path]:
        """Write the documents as .txt files, one folder per (type, round)."""
        folders: dict[tuple[str, int | None], Path] = {}
        for doc in self.documents:
            key = (doc.doc_type, doc.round_number)
            if key not in folders:
                name = "documents" if doc.round_number is None else f"round_{doc.round_number}"
                folders[key] = folder / name
                folders[key].mkdir(parents=True, exist_ok=True)
            (folders[key] / doc.name).write_text(doc.text, encoding="utf-8")
        return folders


def all_criteria() -> list[tuple[Domain, str, tuple[str, ...]]]:
    """Every criterion the vocabulary can ask, interleaved across domains, with rewordings."""
    found = []
    for scope in SCOPES:
        for index in range(max(len(d.criteria) for d in DOMAINS)):
            for domain in DOMAINS:
                if index < len(domain.criteria):
                    template = domain.criteria[index]
                    text = f"{template.text} {scope}?" if scope else f"{template.text}?"
                    rewordings = tuple(
                        f"{r} ({scope.removeprefix('for ')})?" if scope else f"{r}?"
                        for r in template.rewordings)
                    found.append((domain, text, rewordings))
    return found


MAX_QUERIES = len(all_criteria())


def _fill(template: str, rng: random.Random) -> str:
    values = {name: rng.choice(options) for name, options in FILLERS.items()}
    sentence = template.format(**values)
    return sentence[0].upper() + sentence[1:]


def _section(head: str, domain: Domain, rng: random.Random, *, closing: str = "",
             mixed: bool = True) -> str:
    """A section of MIN_PARAGRAPH..MAX_PARAGRAPH characters: `head`, the domain's sentences
    in a random order (then, where `mixed`, a neighbouring domain's), none twice, then
    `closing`."""
    tail = len(closing) + 1 if closing else 0
    room = MAX_PARAGRAPH - tail
    text = head
    pool = rng.sample(domain.sentences, len(domain.sentences))
    if mixed:
        other = rng.choice(DOMAINS)
        pool += rng.sample(other.sentences, len(other.sentences))
    for template in pool:
        sentence = _fill(template, rng)
        if len(text) + 1 + len(sentence) <= room:
            text = f"{text} {sentence}"
        if len(text) + tail >= MIN_PARAGRAPH and rng.random() < 0.35:
            break
    while len(text) + tail < MIN_PARAGRAPH:  # short sentences drawn: fill with the domain's own
        sentence = _fill(rng.choice(domain.sentences), rng)
        if len(text) + 1 + len(sentence) <= room:
            text = f"{text} {sentence}"
    return f"{text} {closing}" if closing else text


def _paragraph(domain: Domain, number: str, rng: random.Random,
               header: tuple[str, ...] = ()) -> str:
    """A numbered policy section: the domain's sentences, then a neighbouring domain's; the
    first section of a document has the document's title and control lines above it, one a
    line."""
    return _section("\n".join((*header, f"{number} {domain.title}.")), domain, rng)


def _header(title: str, rng: random.Random) -> tuple[str, ...]:
    """A policy's title and its document control lines."""
    return (title, *(_fill(line, rng) for line in DOCUMENT_CONTROL))


def _opening(lines: tuple[str, ...], sentences: tuple[str, ...], rng: random.Random) -> str:
    """A document's first section: its title and labelled lines, one a line, then as many of
    `sentences` as fit, in order, as one paragraph of prose."""
    text = "\n".join(lines)
    prose = ""
    for template in sentences:
        sentence = _fill(template, rng)
        if len(text) + 2 + len(prose) + len(sentence) <= MAX_PARAGRAPH:
            prose = f"{prose} {sentence}" if prose else sentence
    text = f"{text}\n{prose}"
    if not MIN_PARAGRAPH <= len(text) <= MAX_PARAGRAPH:  # pragma: no cover - fixed words
        raise AssertionError(f"an opening section of {len(text)} characters: {lines[0]}")
    return text


def _subject(domain: Domain) -> str:
    """What a document's title calls the domain it is about."""
    return DOCUMENT_SUBJECTS.get(domain.slug, domain.title)


def _document_sizes(total: int, rng: random.Random) -> Iterator[int]:
    left = total
    while left > 0:
        size = min(left, rng.randint(MIN_DOC_CHUNKS, MAX_DOC_CHUNKS))
        left -= size
        yield size


def _revisions(versions: int, rng: random.Random) -> list[random.Random]:
    """One stream per version, all in the same state: the sections a version carries over
    from the one before are drawn alike, and differ only where the version changed them."""
    state = rng.getstate()
    rng.random()  # the next document's draws start elsewhere
    streams = []
    for _ in range(versions):
        stream = random.Random()
        stream.setstate(state)
        streams.append(stream)
    return streams


def _reports(sections: int, rng: random.Random) -> list[GeneratedDocument]:
    """An auditor's SOC 2 Type II report for each year: the same system and the same
    controls, described alike, tested again (each year's tests are its own). Each year's
    report supersedes the year before's."""
    texts = [[] for _ in REPORT_YEARS]
    for year, stream, text in zip(REPORT_YEARS, _revisions(len(REPORT_YEARS), rng), texts,
                                  strict=True):
        period = f"January 1, {year} to December 31, {year}"
        text.append(_opening((
            f"SOC 2 Type II Report {year}",
            f"Service auditor: {AUDITOR}",
            "Independent Service Auditor's Report on the Benchmark Vendor Platform system, "
            f"relevant to security and availability, throughout the period {period}.",
        ), REPORT_OPENING, stream))
    for i in range(sections):
        domain = DOMAINS[i % len(DOMAINS)]
        tests = [_fill(rng.choice(REPORT_TESTS), rng) for _ in REPORT_YEARS]
        for stream, text, tested in zip(_revisions(len(REPORT_YEARS), rng), texts, tests,
                                        strict=True):
            text.append(_section(f"Section 4.{i + 1} {domain.title}. Control activities "
                                 "tested throughout the period:", domain, stream,
                                 closing=tested, mixed=False))
    return [GeneratedDocument(f"soc2_type2_report_{year}.txt", "tc_files", None, tuple(text),
                              series="soc2-type2-report",
                              superseded=position < len(REPORT_YEARS) - 1)
            for position, (year, text) in enumerate(zip(REPORT_YEARS, texts, strict=True))]


def _policies(sections: int, rng: random.Random) -> list[GeneratedDocument]:
    """The Information Security Policy in numbered versions, each effective from its date:
    a later version carries the sections over, changing some, and supersedes the earlier."""
    texts = [[] for _ in POLICY_VERSIONS]
    for (version, effective), stream, text in zip(
            POLICY_VERSIONS, _revisions(len(POLICY_VERSIONS), rng), texts, strict=True):
        text.append(_opening((
            "Information Security Policy", f"Version {version}",
            f"Effective date: {effective}", f"Document owner: {POLICY_OWNER}",
            "Classification: Internal", "Approval: the Risk Committee",
        ), POLICY_OPENING, stream))
    for i in range(sections):
        domain = DOMAINS[i % len(DOMAINS)]
        changed = [position > 0 and rng.random() < POLICY_CHANGED_SHARE
                   for position in range(len(POLICY_VERSIONS))]
        for (version, _), stream, text, change in zip(
                POLICY_VERSIONS, _revisions(len(POLICY_VERSIONS), rng), texts, changed,
                strict=True):
            closing = _fill(POLICY_CHANGE.format(version=version), rng) if change else ""
            text.append(_section(f"Section {i + 2} {domain.title}.", domain, stream,
                                 closing=closing))
    return [GeneratedDocument(f"information_security_policy_v{version}.txt", "tc_files", None,
                              tuple(text), series="information-security-policy",
                              superseded=position < len(POLICY_VERSIONS) - 1)
            for position, ((version, _), text) in enumerate(
                zip(POLICY_VERSIONS, texts, strict=True))]


def _certificates() -> list[GeneratedDocument]:
    """The ISO/IEC 27001 certificate, issued again when the last one ran out: the re-issued
    one supersedes it. A certificate is one page, one section."""
    certificates = []
    for position, (edition, issued, until, number) in enumerate(CERTIFICATES):
        standard = f"ISO/IEC 27001:{edition}"
        text = "\n".join((
            "Certificate of Registration",
            f"{standard} Information security management system",
            "This is to certify that the information security management system of "
            f"Benchmark Vendor Ltd has been assessed and found to conform to {standard}.",
            "Scope: the design, development, hosting and support of the Benchmark Vendor "
            "platform, its customer data services and the corporate functions behind them.",
            f"Certificate number: {number}",
            f"Date of issue: {issued}",
            f"Valid until: {until}",
            f"Certification body: {CERTIFICATION_BODY}",
            "Continued validity depends on a satisfactory surveillance audit each year. The "
            "validity of this certificate can be checked on the certification body's public "
            "register of certified organisations.",
        ))
        if not MIN_PARAGRAPH <= len(text) <= MAX_PARAGRAPH:  # pragma: no cover - fixed words
            raise AssertionError(f"a certificate of {len(text)} characters")
        certificates.append(GeneratedDocument(
            f"iso27001_certificate_{issued[-4:]}.txt", "tc_files", None, (text,),
            series="iso27001-certificate", superseded=position < len(CERTIFICATES) - 1))
    return certificates


def _versioned_documents(chunks: int, rng: random.Random) -> list[GeneratedDocument]:
    """The documents the vendor sent in versions, their size growing with the corpus."""
    if chunks < VERSIONED_MIN_CHUNKS:
        return []
    report_sections = min(MAX_REPORT_SECTIONS, chunks // 40)
    policy_sections = min(MAX_POLICY_SECTIONS, chunks // 80)
    return [*_reports(report_sections, rng), *_policies(policy_sections, rng),
            *_certificates()]


def _documents(chunks: int, rng: random.Random, versions: random.Random
               ) -> list[GeneratedDocument]:
    followup_chunks = int(chunks * FOLLOWUP_DOCUMENT_SHARE)
    versioned = _versioned_documents(chunks, versions)
    own_chunks = chunks - followup_chunks - sum(len(d.paragraphs) for d in versioned)
    documents = []
    # The vendor's own documents: each titled as what it is (a policy, a standard, ...) and
    # stating no date or version, so each is a series of its own.
    for index, size in enumerate(_document_sizes(own_chunks, rng)):
        domain = DOMAINS[index % len(DOMAINS)]
        kind, word = DOCUMENT_KINDS[rng.randrange(len(DOCUMENT_KINDS))]
        paragraphs = tuple(
            _paragraph(domain if rng.random() < 0.8 else rng.choice(DOMAINS),
                       f"Section {index + 1}.{i + 1}", rng,
                       _header(f"{_subject(domain)} {word}", rng) if i == 0 else ())
            for i in range(size))
        documents.append(GeneratedDocument(f"{domain.slug}_{kind}_{index + 1:04d}.txt",
                                           "tc_files", None, paragraphs))
    documents += versioned
    for index, size in enumerate(_document_sizes(followup_chunks, rng)):
        domain = rng.choice(DOMAINS)
        round_number = rng.randint(1, ROUNDS)
        paragraphs = tuple(
            _paragraph(domain, f"Remediation note {index + 1}.{i + 1}", rng,
                       _header(f"{_subject(domain)} Remediation Plan", rng) if i == 0 else ())
            for i in range(size))
        documents.append(GeneratedDocument(
            f"round{round_number}_remediation_{domain.slug}_{index + 1:03d}.txt",
            "followup_document", round_number, paragraphs))
    return documents


def questionnaire_random(seed: int) -> random.Random:
    """The stream the criteria, their planted answers and the noise are drawn from: seeded
    apart from the documents' stream, so the corpus size does not move it."""
    return random.Random(f"questionnaires-{seed}")


def _response(criterion: str | None, question: str, answer: str) -> dict:
    response = {"question_text": question, "answer_text": answer}
    if criterion is not None:
        response["criterion_question_text"] = criterion
    return response


def criterion_controls(domain: Domain, criterion: str) -> tuple[str, ...]:
    """The 800-53 controls a criterion of this domain is mapped to: its template's, whatever
    its scope."""
    for template, control in zip(domain.criteria, DOMAIN_CONTROLS[domain.slug], strict=True):
        if criterion.startswith(template.text):
            return (control,)
    return ()


def _control_matrix(vendor_id: str, rng: random.Random) -> list[ControlAnswer]:
    """The control matrix's answers, round by round: each control of the table answered or
    not, by the stream of its own (the criteria asked do not move it)."""
    answers = []
    for round_number, share in CONTROL_MATRIX_ROUNDS:
        for domain in DOMAINS:
            for control in DOMAIN_CONTROLS[domain.slug]:
                if rng.random() >= share:
                    continue
                question = control_question(control)
                answers.append(ControlAnswer(
                    record_id=followup_record_id(
                        vendor_id, response_key(None, question, control), round_number),
                    round_number=round_number, control=control, question=question,
                    answer=rng.choice(CONTROL_ANSWERS)))
    return answers


def _payloads(vendor_id: str, round_number: int, responses: list[dict]) -> list[dict]:
    """A round's responses as payloads: a round larger than one payload may hold is sent in
    parts, as a vendor portal would."""
    return [{"vendor_id": vendor_id, "round_number": round_number,
             "timestamp": f"2024-{round_number + 1:02d}-15T10:30:00Z",
             "responses": responses[start : start + MAX_RESPONSES_PER_ROUND]}
            for start in range(0, len(responses), MAX_RESPONSES_PER_ROUND)]


def generate_corpus(chunks: int, queries: int, seed: int = DEFAULT_SEED,
                    vendor_id: str = VENDOR_ID) -> Corpus:
    """The same arguments always give the same corpus, byte for byte.

    The documents and the questionnaire rounds come from two random streams of the seed, so
    every corpus size asks the same criteria, with the same answers planted in the same
    rounds: only the policy text around them grows. The documents in versions and the
    control matrix have streams of their own, so neither moves the other two."""
    documents = _documents(chunks, random.Random(seed), random.Random(f"versions-{seed}"))
    rng = questionnaire_random(seed)

    criteria = all_criteria()
    chosen = rng.sample(range(len(criteria)), queries)
    asked = [criteria[i] for i in chosen]
    others = [criteria[i] for i in range(len(criteria)) if i not in set(chosen)]
    distractors = rng.sample(others, min(len(others), max(4, queries // 2)))

    by_round: dict[int, list[dict]] = {r: [] for r in range(1, ROUNDS + 1)}
    bench_queries = []
    for domain, criterion, rewordings in asked:
        count = rng.choices((1, 2, 3, 4, 5), weights=(20, 30, 25, 15, 10))[0]
        planted = []
        for round_number in sorted(rng.sample(range(1, ROUNDS + 1), count)):
            reworded = rng.random() < 0.75
            question = rng.choice(rewordings) if reworded else criterion
            answer = (rng.choice(LONG_ANSWERS) if rng.random() < 0.15
                      else rng.choice(TERSE_ANSWERS))
            by_round[round_number].append(_response(criterion, question, answer))
            planted.append(PlantedAnswer(
                record_id=followup_record_id(vendor_id, content_hash(criterion, question),
                                             round_number),
                round_number=round_number, question=question, answer=answer,
                reworded=reworded))
        bench_queries.append(BenchQuery(criterion=criterion, domain=domain.slug,
                                        planted=planted,
                                        controls=criterion_controls(domain, criterion)))
    # Noise a real questionnaire carries: answers to criteria nobody asks here, and
    # ad-hoc questions with no criterion at all.
    for _domain, criterion, rewordings in distractors:
        round_number = rng.randint(1, ROUNDS)
        by_round[round_number].append(
            _response(criterion, rng.choice(rewordings), rng.choice(TERSE_ANSWERS)))
    for round_number in range(1, ROUNDS + 1):
        for question in rng.sample(AD_HOC_QUESTIONS, 2):
            by_round[round_number].append(
                _response(None, f"{question}?", rng.choice(TERSE_ANSWERS)))

    payloads = [payload for round_number, responses in by_round.items()
                for payload in _payloads(vendor_id, round_number, responses)]
    # The control matrix comes with its rounds, after the questionnaires: each answer keyed
    # by its control id (the `questionnaire_id` a matrix's id column is read into).
    matrix = _control_matrix(vendor_id, random.Random(f"controls-{seed}"))
    for round_number, _share in CONTROL_MATRIX_ROUNDS:
        payloads += _payloads(vendor_id, round_number, [
            {"question_text": a.question, "answer_text": a.answer, "questionnaire_id": a.control}
            for a in matrix if a.round_number == round_number])
    return Corpus(vendor_id=vendor_id, seed=seed, documents=documents, payloads=payloads,
                  queries=bench_queries,
                  distractor_criteria=[criterion for _, criterion, _ in distractors],
                  control_answers=matrix)
