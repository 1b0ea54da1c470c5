"""A reproducible vendor corpus: policy documents, follow-up documents, and questionnaire
rounds whose answers to each benchmark criterion are planted at known rounds.

Every paragraph is 600 to 950 characters and paragraphs are separated by a blank line, so
the chunker keeps each one as exactly one chunk: a corpus asked for N chunks holds N."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from core.bench.vocabulary import (
    AD_HOC_QUESTIONS,
    DOMAINS,
    FILLERS,
    LONG_ANSWERS,
    SCOPES,
    TERSE_ANSWERS,
    Domain,
)
from core.config import MAX_RESPONSES_PER_ROUND
from core.hashing import content_hash, format_embedding_content
from core.ingest.rounds.payload import followup_record_id

VENDOR_ID = "benchmark-vendor"
ROUNDS = 5
MIN_PARAGRAPH, MAX_PARAGRAPH = 600, 950
# A document of 20 to 160 chunks: a short standard up to a long policy or report.
MIN_DOC_CHUNKS, MAX_DOC_CHUNKS = 20, 160
# Follow-up documents (uploaded with a round) hold this share of the chunks.
FOLLOWUP_DOCUMENT_SHARE = 0.03
DEFAULT_SEED = 20240209


@dataclass(frozen=True)
class GeneratedDocument:
    name: str
    doc_type: str  # tc_files | followup_document
    round_number: int | None
    paragraphs: tuple[str, ...]

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


@dataclass
class BenchQuery:
    """A criterion the benchmark asks, with every response linked to it by hash."""

    criterion: str
    domain: str
    planted: list[PlantedAnswer]

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

    @property
    def chunks(self) -> int:
        return sum(len(d.paragraphs) for d in self.documents)

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
        texts += [format_embedding_content(r["question_text"], r["answer_text"])
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


def _paragraph(domain: Domain, number: str, rng: random.Random) -> str:
    """A numbered policy section of MIN_PARAGRAPH..MAX_PARAGRAPH characters: the domain's
    sentences in a random order, then a neighbouring domain's, none twice."""
    text = f"{number} {domain.title}."
    pool = rng.sample(domain.sentences, len(domain.sentences))
    other = rng.choice(DOMAINS)
    pool += rng.sample(other.sentences, len(other.sentences))
    for template in pool:
        sentence = _fill(template, rng)
        if len(text) + 1 + len(sentence) <= MAX_PARAGRAPH:
            text = f"{text} {sentence}"
        if len(text) >= MIN_PARAGRAPH and rng.random() < 0.35:
            break
    while len(text) < MIN_PARAGRAPH:  # short sentences drawn: fill with the domain's own
        sentence = _fill(rng.choice(domain.sentences), rng)
        if len(text) + 1 + len(sentence) <= MAX_PARAGRAPH:
            text = f"{text} {sentence}"
    return text


def _document_sizes(total: int, rng: random.Random) -> Iterator[int]:
    left = total
    while left > 0:
        size = min(left, rng.randint(MIN_DOC_CHUNKS, MAX_DOC_CHUNKS))
        left -= size
        yield size


def _documents(chunks: int, rng: random.Random) -> list[GeneratedDocument]:
    followup_chunks = int(chunks * FOLLOWUP_DOCUMENT_SHARE)
    documents = []
    kinds = ("policy", "standard", "procedure", "soc2_excerpt", "security_whitepaper")
    for index, size in enumerate(_document_sizes(chunks - followup_chunks, rng)):
        domain = DOMAINS[index % len(DOMAINS)]
        kind = kinds[rng.randrange(len(kinds))]
        paragraphs = tuple(
            _paragraph(domain if rng.random() < 0.8 else rng.choice(DOMAINS),
                       f"Section {index + 1}.{i + 1}", rng)
            for i in range(size))
        documents.append(GeneratedDocument(f"{domain.slug}_{kind}_{index + 1:04d}.txt",
                                           "tc_files", None, paragraphs))
    for index, size in enumerate(_document_sizes(followup_chunks, rng)):
        domain = rng.choice(DOMAINS)
        round_number = rng.randint(1, ROUNDS)
        paragraphs = tuple(_paragraph(domain, f"Remediation note {index + 1}.{i + 1}", rng)
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


def generate_corpus(chunks: int, queries: int, seed: int = DEFAULT_SEED,
                    vendor_id: str = VENDOR_ID) -> Corpus:
    """The same arguments always give the same corpus, byte for byte.

    The documents and the questionnaire rounds come from two random streams of the seed, so
    every corpus size asks the same criteria, with the same answers planted in the same
    rounds: only the policy text around them grows."""
    documents = _documents(chunks, random.Random(seed))
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
                                        planted=planted))
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

    payloads = []
    for round_number, responses in by_round.items():
        # A round larger than one payload may hold is sent in parts, as a vendor portal would.
        for start in range(0, len(responses), MAX_RESPONSES_PER_ROUND):
            payloads.append({
                "vendor_id": vendor_id, "round_number": round_number,
                "timestamp": f"2024-{round_number + 1:02d}-15T10:30:00Z",
                "responses": responses[start : start + MAX_RESPONSES_PER_ROUND],
            })
    return Corpus(vendor_id=vendor_id, seed=seed, documents=documents, payloads=payloads,
                  queries=bench_queries,
                  distractor_criteria=[criterion for _, criterion, _ in distractors])
