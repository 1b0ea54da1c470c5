"""One typed configuration object: store, models, and every constant of the seed designs."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Constructor arguments beat EVIDENCE_* environment variables beat these defaults."""

    model_config = SettingsConfigDict(env_prefix="EVIDENCE_", extra="ignore")

    # Store: an embedded ChromaDB folder, or a server when chroma_host is set.
    store: Path = Path(".evidence")
    chroma_host: str | None = None
    chroma_port: int = 8000

    # Models. Downloads are off: a model that is not on disk is reported, never fetched.
    embedding_model: str = "all-MiniLM-L6-v2"
    embed_batch_size: int = Field(64, ge=1)
    reranker_model: str = "ms-marco-TinyBERT-L-2-v2"
    reranker_cache_dir: Path = Path.home() / ".cache" / "flashrank"
    reranker_max_length: int = Field(512, ge=16)
    allow_model_downloads: bool = False

    # Seed 000: post-retrieval hash extraction.
    top_first_stage_n: int = Field(100, ge=1)
    top_to_rerank_n: int = Field(70, ge=1)
    top_reranked_n: int = Field(6, ge=1)
    max_followup_rounds: int = Field(3, ge=1)
    # Seed 000's COHERE_SCORE_THRESHOLD has no value in the seed; this cutoff applies to
    # reranker relevance (0..1) only, never to first-stage similarity.
    relevancy_cutoff: float = Field(0.01, ge=0.0, le=1.0)

    # The status quo the seeds set out to fix searched 70 and reranked those.
    semantic_first_stage_n: int = Field(70, ge=1)

    # Seed 002: conservative boost for follow-up documents; the cap answers its open question.
    followup_document_boost: float = Field(1.15, gt=0.0)
    followup_boost_cap: float | None = 1.0

    # Seed 003: tiers and the semantic fallback path.
    fuzzy_match_threshold: float = Field(0.7, ge=0.0, le=1.0)
    semantic_path_top_k: int = Field(10, ge=1)
    # `precedence` only: a follow-up linked to this criterion's text with a typo (same words,
    # at most typo_max_words differing, each this similar) counts as the same criterion and
    # may take the low tier; any other unlinked follow-up competes as ordinary evidence.
    typo_word_similarity: float = Field(0.75, ge=0.0, le=1.0)
    typo_max_words: int = Field(2, ge=0)

    # Ingestion.
    chunk_size: int = Field(1000, ge=100)
    chunk_overlap: int = Field(150, ge=0)
    max_responses_per_round: int = Field(100, ge=1)

    def seed_constants(self) -> dict[str, float | int | None]:
        """The retrieval constants in force, as recorded in every trace."""
        names = (
            "top_first_stage_n", "top_to_rerank_n", "top_reranked_n", "max_followup_rounds",
            "relevancy_cutoff", "semantic_first_stage_n", "followup_document_boost",
            "followup_boost_cap", "fuzzy_match_threshold", "semantic_path_top_k",
            "typo_word_similarity", "typo_max_words",
        )
        return {name: getattr(self, name) for name in names}
