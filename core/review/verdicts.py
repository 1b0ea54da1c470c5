"""Verdicts from a language model: the seed-003 prompt of one retrieval sent as it is, the
structured answer checked against what the prompt held, and kept per vendor beside its
evidence.

A verdict quotes, for each source it relies on, the exact words it relies on. Every quote is
checked against the prompt (`core.review.llm.quotes`): a verdict with a quote that is not
the words of the source it names, a cited round the prompt does not hold or without a quote,
or a MET or NOT_MET without any quote is unverified, and counts as INCONCLUSIVE wherever
verdicts are summed up; the model's own verdict stays shown as it said it. A verdict stored
before verdicts quoted was never checked (`verified` None) and counts as its verdict.

A verdict is keyed by what decided it: the criterion's hash, the strategy, the SHA-256 of the
exact prompt and the model. The same prompt is never sent twice to the same model: a stored
verdict for the key is read back instead. When the store changes, the prompt changes, so the
stored verdict no longer matches the current prompt and is reported stale."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field, field_validator

from core.config import Settings
from core.errors import UserInputError
from core.hashing import short_hash
from core.models import RetrievalTrace
from core.retrieval.strategies import DEFAULT_STRATEGY, get_strategy
from core.review.llm.client import LLMClient, describe_missing
from core.review.llm.quotes import (
    CheckedQuote,
    QuoteCheck,
    SourceKind,
    UnverifiedQuote,
    VerdictQuote,
    check_quotes,
    prompt_sources,
)
from core.store import EvidenceStore, Where

VerdictValue = Literal["MET", "NOT_MET", "INCONCLUSIVE"]
SCHEMA_NAME = "criterion_verdict"
NO_VERDICT = "No verdict: no language model has assessed this criterion."
STALE_REASON = ("The vendor's evidence changed since this verdict was given: the prompt it "
                "answered differs from the one the store gives now, so assess again.")


def prompt_sha256(prompt: str) -> str:
    """The full hex SHA-256 of the prompt's UTF-8 bytes: what a verdict answered."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def verdict_id(criterion_hash: str, strategy: str, prompt_hash: str, model: str) -> str:
    """One record per (criterion hash, strategy, prompt, model)."""
    return "v-" + short_hash(json.dumps([criterion_hash, strategy, prompt_hash, model]))


class VerdictAnswer(BaseModel):
    """What the language model must answer, as JSON."""

    verdict: VerdictValue = Field(description="MET, NOT_MET or INCONCLUSIVE")
    reasoning: str = Field(description="why, from the vendor's responses and documents")
    contradictions: list[str] = Field(
        description="each contradiction observed between follow-up rounds; empty if none")
    cited_rounds: list[int] = Field(
        description="the follow-up round numbers the verdict relies on; empty if none")
    quotes: list[VerdictQuote] = Field(
        default_factory=list,
        description="for each source the verdict relies on, the exact words it relies on, "
                    "copied from that source in the prompt: at least one quote from every "
                    "cited round, and at least one for a MET or NOT_MET verdict; a quote "
                    "that is not found word for word in the source it names makes the "
                    "verdict count as INCONCLUSIVE; empty only for an INCONCLUSIVE verdict "
                    "that relies on nothing")

    @field_validator("reasoning")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the reasoning is blank")
        return value.strip()


class Verdict(BaseModel):
    """One stored verdict, as `evidence assess` prints it."""

    vendor_id: str
    criterion: str
    criterion_hash: str
    strategy: str
    verdict: VerdictValue
    reasoning: str
    contradictions: list[str]
    cited_rounds: list[int]
    model: str
    prompt_sha256: str
    assessed_at: str = Field(description="when the model answered, ISO 8601 UTC")
    cached: bool = Field(False, description="read back from the store instead of sent")
    criterion_id: str | None = Field(None, description="the criteria file's id, echoed")
    quotes: list[CheckedQuote] = Field(
        default_factory=list, description="each quote the model gave, checked against the "
                                          "prompt: verified or not, and its source's kind")
    unverified_quotes: list[UnverifiedQuote] = Field(
        default_factory=list, description="why the verdict is not verified: each quote that "
                                          "does not hold and each quote missing; empty when "
                                          "verified")
    verified: bool | None = Field(
        None, description="every quote holds and none is missing; None for a verdict stored "
                          "before verdicts quoted their sources (not checked)")
    rests_on: list[SourceKind] = Field(
        default_factory=list, description="the kinds of the sources its verified quotes come "
                                          "from: attested, vendor_statement")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counted_as(self) -> VerdictValue:
        """The verdict as it counts: INCONCLUSIVE when unverified, else the model's verdict."""
        return "INCONCLUSIVE" if self.verified is False else self.verdict

    @property
    def counted_text(self) -> str:
        """The verdict as a summary shows it: 'MET', 'INCONCLUSIVE (unverified: the model said
        MET)', or 'INCONCLUSIVE (unverified)' for an unverified INCONCLUSIVE."""
        if self.verified is not False:
            return self.counted_as
        if self.verdict == self.counted_as:
            return f"{self.counted_as} (unverified)"
        return f"{self.counted_as} (unverified: the model said {self.verdict})"

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class VerdictStatus(BaseModel):
    """The verdict a reader should see for one criterion, and whether it still holds."""

    vendor_id: str
    criterion: str
    criterion_hash: str
    strategy: str
    verdict: Verdict | None = None
    current_prompt_sha256: str
    stale: bool = False
    stale_reason: str | None = None

    @property
    def summary(self) -> str:
        """One sentence for people: the verdict as it counts, whether its quotes were
        verified, and whether it is current; or that there is none."""
        if self.verdict is None:
            return NO_VERDICT
        verdict = self.verdict
        state = f"stale: {self.stale_reason}" if self.stale else "current"
        if verdict.verified is False:
            return (f"{verdict.counted_as} (unverified: {verdict.model} said {verdict.verdict} "
                    f"but its quotes do not hold; {state})")
        checked = "quotes not checked, " if verdict.verified is None else ""
        return f"{verdict.counted_as} ({verdict.model}, {checked}{state})"


# A verdict's list fields, stored as JSON text (a store's metadata holds scalars only). A record
# written before verdicts quoted has none of the quote fields: they read back empty.
_LISTS = ("contradictions", "cited_rounds", "quotes", "unverified_quotes", "rests_on")


class VerdictStore:
    """One vendor's verdicts; never reads or writes another vendor's. The collection is made
    at the first verdict written: a read of a vendor never assessed creates nothing."""

    def __init__(self, store: EvidenceStore, vendor_id: str) -> None:
        self.store = store
        self.vendor_id = store.open_vendor(vendor_id).vendor_id

    def get(self, record_id: str) -> Verdict | None:
        records = self.store.verdicts(self.vendor_id)
        if records is None:
            return None
        verdicts = [self._read(m) for m in records.by_id(record_id)]
        return next((v for v in verdicts if v is not None), None)

    def for_criterion(self, criterion_hash: str, strategy: str) -> list[Verdict]:
        """Every stored verdict of the criterion under the strategy, oldest first."""
        records = self.store.verdicts(self.vendor_id)
        if records is None:
            return []
        found = records.matching(Where.eq(criterion_hash=criterion_hash, strategy=strategy))
        verdicts = [v for v in map(self._read, found) if v is not None]
        return sorted(verdicts, key=lambda v: v.assessed_at)

    def save(self, verdict: Verdict, raw: str) -> None:
        """One upsert: the verdict is stored whole or not at all."""
        record_id = verdict_id(verdict.criterion_hash, verdict.strategy, verdict.prompt_sha256,
                               verdict.model)
        metadata = verdict.model_dump(mode="json", exclude={"cached", "criterion_id",
                                                            "counted_as", "verified"})
        for name in _LISTS:
            metadata[name] = json.dumps(metadata[name])
        if verdict.verified is not None:
            metadata["verified"] = verdict.verified
        self.store.verdicts(self.vendor_id, create=True).write(record_id, raw, metadata)

    def _read(self, metadata: dict[str, Any]) -> Verdict | None:
        if metadata.get("vendor_id") != self.vendor_id:
            return None
        data = dict(metadata)
        for name in _LISTS:
            data[name] = json.loads(str(data.get(name) or "[]"))
        return Verdict.model_validate({**data, "cached": True})


class Assessor:
    """Assess criteria of a vendor with the configured language model, and read back the
    verdicts given (reading needs no model)."""

    def __init__(self, settings: Settings, store: EvidenceStore,
                 retrieve: Callable[[str, str, str], RetrievalTrace]) -> None:
        self.settings = settings
        self.store = store
        self.retrieve = retrieve

    def client(self) -> LLMClient:
        """The configured client, or a one-sentence refusal naming the settings to set."""
        client = LLMClient.from_settings(self.settings)
        if client is None:
            raise UserInputError(str(describe_missing(self.settings)))
        return client

    def assess(self, vendor_id: str, criterion: str, strategy: str = DEFAULT_STRATEGY, *,
               refresh: bool = False, criterion_id: str | None = None) -> Verdict:
        """The verdict on the prompt the store gives now: read back when this model already
        answered this very prompt (unless `refresh`), else asked and stored."""
        client = self.client()  # before anything is retrieved or embedded
        trace = self.retrieve(vendor_id, criterion, strategy)
        verdicts = VerdictStore(self.store, vendor_id)
        sha = prompt_sha256(trace.prompt)
        if not refresh:
            stored = verdicts.get(verdict_id(trace.criterion_hash, trace.strategy, sha,
                                             client.model))
            if stored is not None:
                return stored.model_copy(update={"criterion_id": criterion_id})
        answer, raw = client.structured([{"role": "user", "content": trace.prompt}],
                                        VerdictAnswer, SCHEMA_NAME)
        checked = check_answer_quotes(answer, trace)
        verdict = Verdict(
            vendor_id=trace.vendor_id, criterion=trace.criterion,
            criterion_hash=trace.criterion_hash, strategy=trace.strategy,
            verdict=answer.verdict, reasoning=answer.reasoning,
            contradictions=answer.contradictions, cited_rounds=answer.cited_rounds,
            model=client.model, prompt_sha256=sha,
            assessed_at=datetime.now(UTC).isoformat(timespec="microseconds"),
            cached=False, criterion_id=criterion_id, quotes=checked.quotes,
            unverified_quotes=checked.unverified_quotes, verified=checked.verified,
            rests_on=checked.rests_on)
        verdicts.save(verdict, raw)
        return verdict

    def assessed(self, vendor_id: str, pairs: Iterable[tuple[str, str]]
                 ) -> set[tuple[str, str]]:
        """Which (criterion hash, strategy) pairs have a stored verdict; needs no model and
        retrieves nothing."""
        stored = VerdictStore(self.store, vendor_id)
        return {pair for pair in pairs if stored.for_criterion(*pair)}

    def latest(self, vendor_id: str, criterion: str, strategy: str = DEFAULT_STRATEGY
               ) -> VerdictStatus:
        """The verdict to show for the criterion now, from a fresh retrieval."""
        return self.status(self.retrieve(vendor_id, criterion, strategy))

    def status(self, trace: RetrievalTrace) -> VerdictStatus:
        """The verdict to show for the criterion of a retrieval already run.

        Of the verdicts stored for the criterion and strategy, those of the configured model
        are preferred when one is configured; among them, one that answered the current
        prompt (what `assess` would read back), else the most recent, which is then stale."""
        sha = prompt_sha256(trace.prompt)
        stored = VerdictStore(self.store, trace.vendor_id).for_criterion(
            trace.criterion_hash, trace.strategy)
        model = (self.settings.llm_model or "").strip()
        preferred = [v for v in stored if v.model == model] or stored
        current = [v for v in preferred if v.prompt_sha256 == sha]
        chosen = (current or preferred or [None])[-1]
        stale = chosen is not None and chosen.prompt_sha256 != sha
        return VerdictStatus(
            vendor_id=trace.vendor_id, criterion=trace.criterion,
            criterion_hash=trace.criterion_hash, strategy=trace.strategy, verdict=chosen,
            current_prompt_sha256=sha, stale=stale, stale_reason=STALE_REASON if stale else None)


def check_answer_quotes(answer: VerdictAnswer, trace: RetrievalTrace) -> QuoteCheck:
    """The answer's quotes and cited rounds checked against the prompt of the retrieval it
    answered. A round is held wherever the prompt shows its answer (with the responses or
    among the excerpts); citing one it does not hold is the model's mistake, recorded as an
    unverified verdict, not a failure."""
    leads = get_strategy(trace.strategy).leads_with_current_answer
    return check_quotes(answer.quotes, verdict=answer.verdict, cited_rounds=answer.cited_rounds,
                        sources=prompt_sources(trace.evidence, trace.followups,
                                               current=trace.current_answer,
                                               leads_with_current=leads),
                        prompt=trace.prompt)
