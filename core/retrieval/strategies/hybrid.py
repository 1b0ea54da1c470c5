"""The precedence design with a hybrid first stage: the vector search and the lexical (BM25)
index fused by reciprocal rank fusion, so an exact term (a CVE id, a product name, a control
number) the embedding blurs still reaches the reranker."""

from __future__ import annotations

from core.retrieval.strategies import precedence
from core.retrieval.strategies.base import Strategy

STRATEGY = Strategy(
    name="hybrid",
    seed="000+002+003",
    summary="precedence with a hybrid first stage: vector search 100 and BM25 (SQLite FTS5) "
            "100 fused by reciprocal rank fusion (k=60); follow-ups as in precedence",
    run=precedence.run,
    search="hybrid",
    leads_with_current_answer=True,
    followups_first=True,
)
