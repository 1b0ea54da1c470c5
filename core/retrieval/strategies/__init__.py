"""Every seed's retrieval design, selectable by name."""

from __future__ import annotations

from core.errors import UserInputError
from core.retrieval.strategies import (
    doc_boost,
    hash_extraction,
    hybrid,
    precedence,
    semantic,
    tiered,
)
from core.retrieval.strategies.base import Query, Strategy, StrategyResult

STRATEGIES: dict[str, Strategy] = {
    s.name: s for s in (
        semantic.STRATEGY, hash_extraction.STRATEGY, doc_boost.STRATEGY,
        tiered.STRATEGY, precedence.STRATEGY, hybrid.STRATEGY,
    )
}
DEFAULT_STRATEGY = "precedence"


def get_strategy(name: str) -> Strategy:
    """The strategy of that name, or a one-sentence refusal listing the names."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UserInputError(
            f"Unknown strategy '{name}'; choose one of {', '.join(STRATEGIES)}."
        ) from None


__all__ = ["DEFAULT_STRATEGY", "STRATEGIES", "Query", "Strategy", "StrategyResult",
           "get_strategy"]
