"""A BM25 index of one vendor's committed evidence, beside the vectors.

ChromaDB has no BM25 outside Chroma Cloud, so the lexical side is one SQLite FTS5 file per
vendor, derived from the store and never a second source of truth: a sync brings it to the
committed state a caller read from the manifest, in one transaction, and a query returns only
what that caller's manifest names. The file also keeps postings of its own, so a query reads
only its terms' blocks; the scores computed from them equal FTS5's bm25() to the bit.
Measurements and the reasoning behind the design: benchmarks/README.md, "The lexical index"."""

from core.retrieval.lexical.audit import DIFFERENCES, LexicalFindings, compare_index, read_index
from core.retrieval.lexical.index import IndexedState, LexicalIndex, SyncReport
from core.retrieval.lexical.schema import index_path, lexical_folder
from core.retrieval.lexical.terms import STOP_WORDS, match_expression

__all__ = [
    "DIFFERENCES",
    "STOP_WORDS",
    "IndexedState",
    "LexicalFindings",
    "LexicalIndex",
    "SyncReport",
    "compare_index",
    "index_path",
    "lexical_folder",
    "match_expression",
    "read_index",
]
