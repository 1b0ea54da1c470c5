"""The relevance lab: graded judgments of excerpts per vendor and criterion, rank metrics of
each strategy (or setting) over the judged criteria, per-criterion deltas between two choices,
and a gate against a saved run.

A judgment grades one excerpt (a document chunk or a follow-up answer) for one criterion, 0
to 3, by a person (or, kept apart and never counted in the metrics, suggested by a language
model). It follows the excerpt's content, not its id: the key is the SHA-256 of the excerpt's
text with its typography folded, so a re-ingest of unchanged content finds every judgment
again, whatever ids the records get.

The metrics are trec_eval's, computed by `ir-measures` (over pytrec_eval) in the order the
context is meant to be read (`context_ranking`): where the follow-ups take precedence, the
linked follow-ups by tier (led by the current answer where the context leads with it), then
the excerpts; otherwise the `evidence` entries, then the `followups`. nDCG's gain is the
grade and its discount log2(rank + 1), the ideal ranking is the criterion's judged grades; an
unjudged excerpt has grade 0; relevant means grade >= 1; `recall` is the share of the judged
relevant anywhere in the context. Each figure is averaged over the criteria with at least one
relevant judgment."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from core.config import Settings
from core.criteria import CriterionEntry, check_criterion
from core.errors import UserInputError
from core.hashing import criterion_hash, fold_typography, normalize_text
from core.models import FollowupHit, RetrievalTrace, by_round
from core.outputs.quality import earlier_unmarked, expected_followups, ids_in_context
from core.retrieval.strategies import STRATEGIES, get_strategy
from core.review.llm.client import LLMClient
from core.store import EvidenceStore

GRADES = (0, 1, 2, 3)
GRADE_LABELS = {0: "0 not relevant", 1: "1 on the topic", 2: "2 relevant",
                3: "3 answers it"}
Judge = Literal["person", "model"]
METRICS = ("ndcg@6", "ndcg@10", "mrr", "precision@6", "recall@6", "recall")
# How far a metric may fall below the baseline before the gate fails.
DEFAULT_TOLERANCE = 0.01


def excerpt_sha(text: str) -> str:
    """What a judgment follows: the SHA-256 of the excerpt's text, typography folded."""
    folded = normalize_text(fold_typography(normalize_text(text)))
    return hashlib.sha256(folded.encode("utf-8")).hexdigest()


def check_grade(grade: object) -> int:
    text = str(grade).strip()
    if text not in {str(g) for g in GRADES}:
        raise UserInputError(f"Grade {str(grade)[:20]!r} is not one of 0, 1, 2 or 3.")
    return int(text)


class Judgment(BaseModel):
    """One excerpt graded for one criterion."""

    vendor_id: str
    criterion: str
    criterion_hash: str
    excerpt_sha: str = Field(description="SHA-256 of the excerpt's folded text: what it follows")
    excerpt_id: str = Field(description="the excerpt's id when it was judged")
    source: str = ""
    grade: int
    judged_by: Judge = "person"
    judged_at: str = ""
    reviewer: str = ""  # who graded it: a team dashboard's login identity, else unnamed


def _record_id(j: Judgment) -> str:
    return f"j-{j.criterion_hash}-{j.excerpt_sha[:24]}-{j.judged_by}"


class Judgments:
    """One vendor's judgments in the store; never another vendor's."""

    def __init__(self, store: EvidenceStore, vendor_id: str) -> None:
        self.store = store
        self.vendor_id = store.open_vendor(vendor_id).vendor_id

    def all(self, judged_by: Judge | None = "person") -> list[Judgment]:
        records = self.store.judgments(self.vendor_id)
        if records is None:
            return []
        found = [Judgment.model_validate(m) for m in records.all()
                 if m.get("vendor_id") == self.vendor_id]
        return [j for j in found if judged_by is None or j.judged_by == judged_by]

    def grades(self, criterion: str, judged_by: Judge = "person") -> dict[str, int]:
        """excerpt sha -> grade, for the criterion."""
        key = criterion_hash(check_criterion(criterion))
        return {j.excerpt_sha: j.grade for j in self.all(judged_by) if j.criterion_hash == key}

    def save(self, judgments: Sequence[Judgment]) -> None:
        """Kept all together or not at all; a judgment of the same excerpt, criterion and judge
        replaces the one before."""
        if not judgments:
            return
        stamped = [j.model_copy(update={
            "vendor_id": self.vendor_id,
            "judged_at": j.judged_at or datetime.now(UTC).isoformat(timespec="seconds")})
            for j in judgments]
        self.store.judgments(self.vendor_id, create=True).write(
            [_record_id(j) for j in stamped], [j.model_dump() for j in stamped])


def judge(store: EvidenceStore, vendor_id: str, criterion: str, excerpt_id: str, text: str,
          grade: int, *, source: str = "", judged_by: Judge = "person",
          reviewer: str = "") -> Judgment:
    """Record one grade for one excerpt of a criterion's retrieval (by `reviewer`, where the
    dashboard knows who is logged in)."""
    text_criterion = check_criterion(criterion)
    judgment = Judgment(vendor_id=vendor_id, criterion=text_criterion,
                        criterion_hash=criterion_hash(text_criterion),
                        excerpt_sha=excerpt_sha(text), excerpt_id=excerpt_id, source=source,
                        grade=check_grade(grade), judged_by=judged_by, reviewer=reviewer)
    Judgments(store, vendor_id).save([judgment])
    return judgment


# Judgments from a file ----------------------------------------------------------------------

def read_judgments(path: Path, store: EvidenceStore, vendor_id: str,
                   criteria: Sequence[CriterionEntry]) -> list[Judgment]:
    """A CSV (`vendor_id, criterion, id, grade`) or a TREC qrels file (`query 0 id grade`, the
    query being a criterion's id in the criteria file, its line number from 1, or its hash)
    read into judgments of this vendor; an id is looked up in the store for the content it
    follows. Rows of other vendors are left out; a wrong row is one sentence naming it."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"{path}: cannot read the judgments file ({exc}).") from None
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    rows: list[tuple[int, str, str, str]] = []  # line, criterion, id, grade
    if "," in first and "grade" in first.lower():
        reader = csv.DictReader(io.StringIO(text))
        wanted = {"vendor_id", "criterion", "id", "grade"}
        names = {(n or "").strip().lower() for n in reader.fieldnames or []}
        if not wanted <= names:
            raise UserInputError(f"{path}: a judgments CSV needs the columns vendor_id, "
                                 "criterion, id and grade.")
        for line, row in enumerate(reader, start=2):
            row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
            if row["vendor_id"] == vendor_id:
                rows.append((line, row["criterion"], row["id"], row["grade"]))
    else:
        by_query: dict[str, str] = {}
        for number, entry in enumerate(criteria, start=1):
            by_query[str(number)] = entry.text
            by_query[criterion_hash(check_criterion(entry.text))] = entry.text
            if entry.id:
                by_query[entry.id] = entry.text
        for line, raw in enumerate(text.splitlines(), start=1):
            parts = raw.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise UserInputError(f"{path}, line {line}: a qrels line is 'query 0 id grade'.")
            if parts[0] not in by_query:
                raise UserInputError(f"{path}, line {line}: query {parts[0]!r} is not a "
                                     "criterion of the criteria file (its id, line number "
                                     "or hash).")
            rows.append((line, by_query[parts[0]], parts[2], parts[3]))
    vendor = store.open_vendor(vendor_id)
    ids = sorted({r[2] for r in rows})
    texts = {c.id: (c.text, str(c.metadata.get("source") or "")) for c in
             vendor.records_by_ids(ids)}
    judgments = []
    for line, criterion, record_id, grade in rows:
        if record_id not in texts:
            raise UserInputError(f"{path}, line {line}: no excerpt {record_id!r} of vendor "
                                 f"'{vendor_id}' is in the store.")
        text_criterion = check_criterion(criterion)
        try:
            graded = check_grade(grade)
        except UserInputError as exc:
            raise UserInputError(f"{path}, line {line}: {exc}") from None
        body, source = texts[record_id]
        judgments.append(Judgment(
            vendor_id=vendor_id, criterion=text_criterion,
            criterion_hash=criterion_hash(text_criterion), excerpt_sha=excerpt_sha(body),
            excerpt_id=record_id, source=source, grade=graded))
    return judgments


# Metrics ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ranked:
    """One entry of the context, in order."""

    id: str
    sha: str
    source: str
    text: str


def context_ranking(trace: RetrievalTrace) -> list[Ranked]:
    """The context's entries in the order it is meant to be read, each once. Where the
    strategy's follow-ups take precedence, the linked follow-ups first by tier (newest first
    within one), led by the current answer where the context leads with it, then the
    excerpts; otherwise the context's order: the excerpts, then the follow-ups. The XML keeps
    the seeds' order either way."""
    strategy = STRATEGIES.get(trace.strategy)
    excerpts = [(c.id, c.text, c.source) for c in trace.evidence]
    answers = [(f.id, f.content, f"round {f.round_number}") for f in trace.followups]
    if strategy is not None and strategy.followups_first:
        order = {"high": 0, "medium": 1, "low": 2}
        by_tier = sorted(by_round(trace.followups, newest_first=True),
                         key=lambda f: order.get(f.tier or "", 3))
        answers = [(f.id, f.content, f"round {f.round_number}") for f in by_tier]
        current = trace.current_answer
        if strategy.leads_with_current_answer and current is not None and current.content:
            answers.insert(0, (current.id, current.content, f"round {current.round_number}"))
        items = [*answers, *excerpts]
    else:
        items = [*excerpts, *answers]
    seen: set[str] = set()
    ranked = []
    for item in items:
        sha = excerpt_sha(item[1])
        if sha not in seen:
            seen.add(sha)
            ranked.append(Ranked(id=item[0], sha=sha, source=item[2], text=item[1]))
    return ranked


def rank_metrics(ranking: Sequence[str], grades: dict[str, int]) -> dict[str, float]:
    """trec_eval's nDCG@6, nDCG@10, RR, P@6 and R@6 of one ranking (excerpt shas, best first)
    against the criterion's grades, and the recall of the whole context (`recall`: the judged
    relevant anywhere in it, follow-ups placed after the six excerpts included)."""
    import ir_measures
    from ir_measures import RR, P, R, nDCG

    qrels = [ir_measures.Qrel("q", sha, grade) for sha, grade in grades.items()]
    # trec_eval orders by score (ties by id, descending): scores keep the context's order.
    run = [ir_measures.ScoredDoc("q", sha, float(len(ranking) - i))
           for i, sha in enumerate(ranking)]
    measures = {"ndcg@6": nDCG @ 6, "ndcg@10": nDCG @ 10, "mrr": RR, "precision@6": P @ 6,
                "recall@6": R @ 6, "recall": R @ 1000}
    if not run:
        return dict.fromkeys(measures, 0.0)
    found = {m.measure: m.value for m in ir_measures.iter_calc(list(measures.values()),
                                                               qrels, run)}
    return {name: round(float(found.get(measure, 0.0)), 6)
            for name, measure in measures.items()}


class Choice(BaseModel):
    """What is measured: a strategy under settings (overrides of the store's)."""

    strategy: str
    settings: dict[str, str] = Field(default_factory=dict)

    @property
    def label(self) -> str:
        if not self.settings:
            return self.strategy
        return self.strategy + " " + " ".join(f"{k}={v}" for k, v in self.settings.items())


def parse_choices(text: str, strategy: str) -> list[Choice]:
    """`strategy:hybrid,settings:EVIDENCE_RRF_K=20`: two choices, the second changing the first
    (a `settings:` part may hold several NAME=VALUE separated by ';')."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if len(parts) != 2:
        raise UserInputError("--compare takes two choices separated by a comma, such as "
                             "strategy:hybrid,settings:EVIDENCE_RRF_K=20.")
    choices: list[Choice] = []
    base = Choice(strategy=strategy)
    for part in parts:
        kind, _, value = part.partition(":")
        if kind == "strategy":
            get_strategy(value)
            choice = base.model_copy(update={"strategy": value})
        elif kind == "settings":
            pairs = {}
            for pair in filter(None, (x.strip() for x in value.split(";"))):
                name, eq, setting = pair.partition("=")
                if not eq:
                    raise UserInputError(f"--compare: {pair!r} is not NAME=VALUE.")
                pairs[name.strip()] = setting.strip()
            choice = base.model_copy(update={"settings": {**base.settings, **pairs}})
        else:
            raise UserInputError(f"--compare: {part!r} is neither strategy:NAME nor "
                                 "settings:NAME=VALUE.")
        choices.append(choice)
        base = choice
    return choices


def settings_with(settings: Settings, overrides: dict[str, str]) -> Settings:
    """The settings with EVIDENCE_* overrides applied and checked as the environment's are."""
    fields = {}
    for name, value in overrides.items():
        field_name = name.lower().removeprefix("evidence_")
        if field_name not in Settings.model_fields:
            raise UserInputError(f"{name} is not a setting of the workbench.")
        fields[field_name] = value
    data = {**settings.model_dump(), **fields}
    try:
        return Settings.model_validate(data)
    except Exception as exc:  # pydantic names the field and why
        raise UserInputError(f"--compare: the settings {overrides} are not valid "
                             f"({' '.join(str(exc).split())[:200]}).") from None


@dataclass
class CriterionResult:
    criterion: str
    judged: int  # excerpts judged for it
    relevant: int  # of them graded >= 1
    metrics: dict[str, float]
    linked_in_context: float | None  # hash-linked answers expected that the context holds
    missed: list[dict[str, Any]] = field(default_factory=list)  # judged relevant, not in it
    # Whether the criterion's newest answer is in the context (None: no round answered it).
    current_in_context: bool | None = None
    earlier_unmarked: int = 0  # earlier answers shown without the newest beside, labelled


@dataclass
class ChoiceResult:
    choice: Choice
    criteria: list[CriterionResult]

    @property
    def measured(self) -> list[CriterionResult]:
        return [c for c in self.criteria if c.relevant]

    def mean(self, metric: str) -> float:
        rows = self.measured
        return round(sum(c.metrics[metric] for c in rows) / len(rows), 6) if rows else 0.0

    def line(self) -> dict[str, Any]:
        """What `eval --format json` prints for the choice."""
        linked = [c.linked_in_context for c in self.measured if c.linked_in_context is not None]
        answered = [c.current_in_context for c in self.criteria
                    if c.judged and c.current_in_context is not None]
        return {"strategy": self.choice.strategy, "settings": self.choice.settings,
                "label": self.choice.label, "criteria": len(self.measured),
                "judged": sum(c.judged for c in self.criteria),
                **{m: self.mean(m) for m in METRICS},
                "linked_in_context": round(sum(linked) / len(linked), 6) if linked else None,
                "current_answer_in_context": (round(sum(answered) / len(answered), 6)
                                              if answered else None),
                "earlier_unmarked": sum(c.earlier_unmarked for c in self.criteria if c.judged)}


class JudgedReader(Protocol):
    """What the relevance lab reads: retrievals and linked answers, under other settings too."""

    settings: Settings
    store: EvidenceStore

    def retrieve(self, vendor_id: str, criterion: str, strategy: str = ...,
                 questionnaire_ids: Sequence[str] = ..., controls: Sequence[str] = ...
                 ) -> RetrievalTrace: ...

    def linked_followups(self, vendor_id: str, criterion: str) -> list[FollowupHit]: ...

    def with_settings(self, settings: Settings) -> JudgedReader: ...


def evaluate(workbench: JudgedReader, vendor_id: str, criteria: Sequence[CriterionEntry],
             choices: Sequence[Choice], judgments: Sequence[Judgment]) -> list[ChoiceResult]:
    """Each choice's metrics per criterion, on the judgments given (a person's only)."""
    graded: dict[str, dict[str, int]] = {}
    sources: dict[tuple[str, str], Judgment] = {}
    for j in judgments:
        if j.judged_by == "person":
            graded.setdefault(j.criterion_hash, {})[j.excerpt_sha] = j.grade
            sources[(j.criterion_hash, j.excerpt_sha)] = j
    results = []
    for choice in choices:
        get_strategy(choice.strategy)
        bench = (workbench.with_settings(settings_with(workbench.settings, choice.settings))
                 if choice.settings else workbench)
        rows = []
        for entry in criteria:
            trace = bench.retrieve(vendor_id, entry.text, choice.strategy,
                                   entry.questionnaire_ids, entry.controls)
            grades = graded.get(trace.criterion_hash, {})
            ranking = context_ranking(trace)
            shas = [r.sha for r in ranking]
            linked = expected_followups(bench.linked_followups(vendor_id, trace.criterion),
                                        bench.settings.max_followup_rounds)
            cited = ids_in_context(trace)
            missed = [{"id": sources[(trace.criterion_hash, sha)].excerpt_id,
                       "source": sources[(trace.criterion_hash, sha)].source, "grade": grade}
                      for sha, grade in grades.items() if grade >= 1 and sha not in shas]
            rows.append(CriterionResult(
                criterion=trace.criterion, judged=len(grades),
                relevant=sum(g >= 1 for g in grades.values()),
                metrics=rank_metrics(shas, grades),
                linked_in_context=(sum(f.id in cited for f in linked) / len(linked)
                                   if linked else None),
                missed=sorted(missed, key=lambda m: -m["grade"]),
                current_in_context=(trace.current_answer.id in cited
                                    if trace.current_answer is not None else None),
                earlier_unmarked=earlier_unmarked(trace)))
        results.append(ChoiceResult(choice=choice, criteria=rows))
    return results


def deltas(first: ChoiceResult, second: ChoiceResult) -> list[dict[str, Any]]:
    """Per criterion, the second choice's metrics minus the first's."""
    lines = []
    for a, b in zip(first.criteria, second.criteria, strict=True):
        if not a.relevant:
            continue
        lines.append({"compare": [first.choice.label, second.choice.label],
                      "criterion": a.criterion,
                      **{m: round(b.metrics[m] - a.metrics[m], 6) for m in METRICS}})
    return lines


# The gate -----------------------------------------------------------------------------------

def read_baseline(path: Path) -> dict[str, dict[str, Any]]:
    """label -> the line `eval --format json` printed for it."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserInputError(f"{path}: cannot read the baseline ({exc}).") from None
    found = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            raise UserInputError(f"{path}, line {number}: not a line `evidence eval --format "
                                 "json` printed.") from None
        if isinstance(data, dict) and "strategy" in data and "compare" not in data:
            found[str(data.get("label") or data["strategy"])] = data
    if not found:
        raise UserInputError(f"{path}: the baseline holds no strategy line of `evidence eval "
                             "--format json`.")
    return found


def regressions(lines: Sequence[dict[str, Any]], baseline: dict[str, dict[str, Any]],
                tolerance: float) -> list[str]:
    """Each metric that fell below its baseline by more than the tolerance, in words."""
    fallen = []
    for line in lines:
        before = baseline.get(str(line.get("label") or line["strategy"]))
        if before is None:
            continue
        for metric in METRICS:
            if metric in before and line[metric] < float(before[metric]) - tolerance:
                fallen.append(f"{line['label']} {metric} {line[metric]:.3f} < baseline "
                              f"{float(before[metric]):.3f}")
        current, was = line.get("current_answer_in_context"), before.get(
            "current_answer_in_context")
        if current is not None and was is not None and current < float(was) - tolerance:
            fallen.append(f"{line['label']} current_answer_in_context {current:.3f} < "
                          f"baseline {float(was):.3f}")
        if line.get("earlier_unmarked", 0) > int(before.get("earlier_unmarked", 0) or 0):
            fallen.append(f"{line['label']} earlier_unmarked {line['earlier_unmarked']} > "
                          f"baseline {before.get('earlier_unmarked')}")
    return fallen


def table(lines: Sequence[dict[str, Any]]) -> str:
    """The strategy lines as a plain text table."""
    header = ["choice", "criteria", "judged", *METRICS, "linked", "current", "earlier_unmarked"]
    rows = [[line["label"], str(line["criteria"]), str(line["judged"]),
             *(f"{line[m]:.3f}" for m in METRICS),
             "-" if line["linked_in_context"] is None else f"{line['linked_in_context']:.2f}",
             "-" if line.get("current_answer_in_context") is None
             else f"{line['current_answer_in_context']:.2f}",
             str(line.get("earlier_unmarked", 0))]
            for line in lines]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True))
                     .rstrip() for r in [header, *rows])


def strategies_or_all(names: Sequence[str]) -> list[str]:
    for name in names:
        get_strategy(name)
    return list(names) or list(STRATEGIES)




# Suggested grades (a language model, optional) ----------------------------------------------

class SuggestedGrade(BaseModel):
    """One grade a language model suggests for one numbered excerpt."""

    index: int = Field(description="the excerpt's number, as the list shows it")
    grade: int = Field(ge=0, le=3, description="0 not relevant, 1 on the topic but does not "
                                               "help decide, 2 relevant, 3 answers it")


class SuggestedGrades(BaseModel):
    """What the language model answers: a grade for each excerpt it was shown."""

    grades: list[SuggestedGrade]


def suggestion_prompt(criterion: str, texts: Sequence[str]) -> str:
    """The prompt asking for grades: the criterion and each excerpt, numbered."""
    listed = "\n\n".join(f"[{i}] {' '.join(t.split())[:1500]}" for i, t in
                         enumerate(texts, start=1))
    return (f"Grade how relevant each excerpt is to this assessment criterion.\n\n"
            f"Criterion: {criterion}\n\nGrades: 3 answers the criterion directly; 2 relevant "
            "evidence that partly answers it or is needed to judge it; 1 on the topic but does "
            "not help decide; 0 not about it.\n\nExcerpts:\n\n" + listed)


def suggest_grades(workbench: JudgedReader, client: LLMClient, vendor_id: str, criterion: str,
                   strategies: Sequence[str]) -> list[Judgment]:
    """A language model's grades for the excerpts of the criterion's contexts (every
    strategy's) that no person has judged, kept apart from a person's (judged_by "model")
    and never counted in the metrics."""
    text_criterion = check_criterion(criterion)
    key = criterion_hash(text_criterion)
    judged = set(Judgments(workbench.store, vendor_id).grades(text_criterion))
    pending: dict[str, Ranked] = {}
    for name in strategies:
        for entry in context_ranking(workbench.retrieve(vendor_id, text_criterion, name)):
            if entry.sha not in judged:
                pending.setdefault(entry.sha, entry)
    if not pending:
        return []
    shas = list(pending)
    answer, _raw = client.structured(
        [{"role": "user", "content": suggestion_prompt(text_criterion,
                                                       [pending[s].text for s in shas])}],
        SuggestedGrades, "excerpt_grades")
    by_index = {g.index: g.grade for g in answer.grades if 1 <= g.index <= len(shas)}
    suggested = [Judgment(vendor_id=vendor_id, criterion=text_criterion, criterion_hash=key,
                          excerpt_sha=sha, excerpt_id=pending[sha].id,
                          source=pending[sha].source, grade=by_index[i], judged_by="model")
                 for i, sha in enumerate(shas, start=1) if i in by_index]
    Judgments(workbench.store, vendor_id).save(suggested)
    return suggested
