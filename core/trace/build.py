"""One strategy's result turned into its trace: the parts, the context and prompt laid out from
them, the constants in force, every stage's time."""

from __future__ import annotations

import time
from collections.abc import Sequence

from core.config import Settings
from core.criteria import check_criterion
from core.hashing import criterion_hash
from core.models import RerankerStatus, RetrievalTrace, SeedConstants
from core.retrieval.source import Query
from core.retrieval.stages import Timings
from core.retrieval.strategies import Strategy, get_strategy
from core.retrieval.strategies.base import StrategyResult
from core.services import Services
from core.trace.context import (
    format_context_xml,
    format_current_context_xml,
    format_current_prompt,
    format_prompt,
)


def retrieve(services: Services, vendor_id: str, criterion: str, strategy: str,
             questionnaire_ids: Sequence[str] = (), controls: Sequence[str] = ()
             ) -> RetrievalTrace:
    """Run one strategy for one criterion of one vendor; every stage lands in the trace.
    Answers to `questionnaire_ids` (the ids a criteria file maps the criterion to) link to it
    as a hash match does; answers keyed by `controls` (the controls it maps it to, else the
    store's mappings) link in the control tier."""
    chosen = get_strategy(strategy)
    criterion = check_criterion(criterion)
    started = time.perf_counter()
    timings = Timings()
    embedder = services.embedder()
    vendor = services.store.open_vendor(vendor_id, embedding_model=embedder.name)
    reranker, reranker_status = services.reranker()
    with timings.stage("load_model"):  # ~0 once loaded; kept apart from query time
        embedder.warm_up()
    with timings.stage("embed_query"):
        query = Query(text=criterion, criterion_hash=criterion_hash(criterion),
                      embedding=services.embed_query(criterion),
                      questionnaire_ids=tuple(dict.fromkeys(questionnaire_ids)),
                      control_ids=tuple(dict.fromkeys(controls)))
    result, notes = services.runner.run(chosen, vendor, query, reranker, reranker_status,
                                        timings)
    return build_trace(vendor_id=vendor_id, query=query, strategy=chosen, result=result,
                       notes=notes, reranker_status=reranker_status,
                       embedding_model=embedder.name, settings=services.settings,
                       timings=timings, started=started)


def build_trace(*, vendor_id: str, query: Query, strategy: Strategy, result: StrategyResult,
                notes: list[str], reranker_status: RerankerStatus, embedding_model: str,
                settings: Settings, timings: Timings, started: float) -> RetrievalTrace:
    """The trace of one run: the strategy's parts, the context and prompt laid out from
    them, the constants in force and every stage's time since `started`."""
    with timings.stage("format"):
        if strategy.leads_with_current_answer:
            context = format_current_context_xml(result.current_answer, result.evidence,
                                                 result.followups)
            prompt = format_current_prompt(query.text, result.current_answer, result.evidence,
                                           result.followups)
        else:  # the seeds' layouts, as written
            context = format_context_xml(result.evidence, result.followups)
            prompt = format_prompt(query.text, result.evidence, result.followups)
    timings.ms["total"] = (time.perf_counter() - started) * 1000.0
    return RetrievalTrace(
        vendor_id=vendor_id, criterion=query.text, criterion_hash=query.criterion_hash,
        questionnaire_ids=list(query.questionnaire_ids),
        controls=[link.shown() for link in result.controls], strategy=strategy.name,
        reranker=reranker_status, embedding_model=embedding_model,
        constants=SeedConstants(**settings.seed_constants()), context=context, prompt=prompt,
        current_answer=result.current_answer, followups=result.followups,
        evidence=result.evidence, first_stage=result.first_stage,
        hash_path=result.hash_path, semantic_path=result.semantic_path,
        reranked=result.reranked, dropped_followups=result.dropped_followups, notes=notes,
        timings_ms={k: round(v, 3) for k, v in timings.ms.items()}, boost=result.boost,
    )
