"""One typed configuration object: store, models, and every constant of the seed designs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Limits on what a user may hand in. They live here, beside Settings, because the payload
# model enforces the defaults even where no Settings object is at hand.
MAX_RESPONSES_PER_ROUND = 100
# A criterion or question is one sentence or a short paragraph; the retrieval side refuses
# criteria longer than this too, so a longer linked criterion could never be asked for.
MAX_QUESTION_CHARS = 2000
# A criterion is asked with the same words a follow-up links to: one limit for both.
MAX_CRITERION_CHARS = MAX_QUESTION_CHARS
# An answer may quote a policy paragraph or two; the embedding model reads only the first
# few hundred words, and the whole answer goes into every LLM context that cites it.
MAX_ANSWER_CHARS = 10_000
# Room for a full round at the limits above even when every character is written as a
# six-byte JSON escape (100 x 14,000 x 6 = 8.4 MB); a larger file is refused before it is
# read into memory.
MAX_QUESTIONNAIRE_BYTES = 10_000_000
# Larger than any SOC 2 report or policy PDF a reviewer receives; a bigger file is an
# archive or a scan, and reading it whole would hold it in memory during the ingest.
MAX_DOCUMENT_BYTES = 50_000_000
# Follow-up rounds are counted one by one; the bound keeps the number inside ChromaDB's
# 64-bit metadata integers and catches typing slips.
MAX_ROUND_NUMBER = 1000
# The retrieval constants of the seeds that every trace records (Settings' fields).
SEED_CONSTANT_NAMES = (
    "top_first_stage_n", "top_to_rerank_n", "top_reranked_n", "max_followup_rounds",
    "relevancy_cutoff", "semantic_first_stage_n", "followup_document_boost",
    "followup_boost_cap", "fuzzy_match_threshold", "semantic_path_top_k",
    "typo_word_similarity", "typo_max_words",
)
# Where `evidence bench` results are recorded (benchmarks/README.md) and the dashboard's
# Quality page reads them from.
BENCHMARK_RESULTS_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
# Settings whose values are secrets: no message shows them, even a refused value.
SECRET_SETTINGS = frozenset({"chroma_token", "llm_api_key"})
_TOKEN_CHARACTERS = re.compile(r"[\x21-\x7e]+")


class Settings(BaseSettings):
    """Constructor arguments beat EVIDENCE_* environment variables beat these defaults."""

    # A refused value is never part of the error's text: it may be a token (the CLI names
    # the other refused values itself).
    model_config = SettingsConfigDict(env_prefix="EVIDENCE_", extra="ignore",
                                      hide_input_in_errors=True)

    # Store: an embedded ChromaDB folder, or a server when chroma_host is set.
    store: Path = Path(".evidence")
    chroma_host: str | None = None
    chroma_port: int = 8000
    # A server: every request gives up when the server has not answered for this long
    # (connecting, sending, or waiting for the next bytes of the answer).
    chroma_timeout_s: float = Field(30.0, gt=0.0, le=3600.0)
    # A shared server behind a reverse proxy that terminates TLS and checks a token
    # (docs/deployment.md): https, the PEM file of the CAs that signed the proxy's
    # certificate (unset: certifi's public CAs, or SSL_CERT_FILE), and the token sent as
    # `Authorization: Bearer <token>` on every request. The token is never shown.
    chroma_ssl: bool = False
    chroma_ca_bundle: Path | None = None
    chroma_token: SecretStr | None = None
    # An embedded store keeps at most this many vector indexes loaded (an LRU: one per vendor
    # collection read, about 2.6 MB each for a small vendor, more for a large one); a process
    # that reads every vendor of a large programme stays bounded by it. ChromaDB's own bound
    # is its file handles / 5. It holds per process (the first embedded store opened sets it);
    # a server is bounded by the server's own configuration.
    store_open_indexes: int = Field(256, ge=8, le=1_000_000)

    # Models. Downloads are off: a model that is not on disk is reported, never fetched.
    embedding_model: str = "all-MiniLM-L6-v2"
    embed_batch_size: int = Field(64, ge=1)
    reranker_model: str = "ms-marco-TinyBERT-L-2-v2"
    reranker_cache_dir: Path = Path.home() / ".cache" / "flashrank"
    reranker_max_length: int = Field(512, ge=16)
    allow_model_downloads: bool = False
    # What runs the embedding model: "auto" is ONNX Runtime when the model's local ONNX export
    # passes its check against torch (else torch, with a note), "onnx" ONNX Runtime or an
    # error, "torch" sentence-transformers on torch. Exports are cached in onnx_cache_dir.
    embedding_runtime: Literal["auto", "onnx", "torch"] = "auto"
    onnx_cache_dir: Path = Path.home() / ".cache" / "evidence-workbench" / "onnx"
    # The control catalog's vectors, per embedding model and catalog version (computed at
    # the first proposal on a machine, about 1,000 controls).
    controls_cache_dir: Path = Path.home() / ".cache" / "evidence-workbench" / "controls"

    # Network: a permitted model download gives up when the network stalls this long
    # (connecting, or waiting for the next bytes). It bounds every wait, not the whole
    # download, which may take minutes on a slow but live connection.
    model_download_timeout_s: float = Field(30.0, gt=0.0, le=3600.0)

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

    # Lexical index (BM25, SQLite FTS5) beside the vectors, derived from the store. Its files
    # live in lexical_dir; by default the store's own folder (embedded) or a per-server
    # folder under ~/.cache/evidence-workbench (server).
    lexical_dir: Path | None = None
    lexical_first_stage_n: int = Field(100, ge=1)
    # Reciprocal rank fusion: score = sum of 1 / (rrf_k + rank) over the lists (Cormack 2009).
    rrf_k: int = Field(60, ge=1)

    # Seed 001: the conversation. The last user and assistant messages are always in the
    # history; similar earlier messages fill it up to history_window.
    history_window: int = Field(5, ge=2)
    min_recent_messages: int = Field(2, ge=0)
    # Without a language model a question continues the previous answer when it refers back
    # and the previous answer's evidence is within this cosine of the store's best match.
    continuation_margin: float = Field(0.08, ge=0.0, le=1.0)
    source_anchoring_enabled: bool = True
    # "seed": seed 001's additive 0.3 on the fused score; "calibrated": a boost in fused-score
    # units (anchor_fused_ranks ranks' worth of 1 / (rrf_k + 1)).
    source_anchoring: Literal["seed", "calibrated"] = "calibrated"
    source_anchoring_boost: float = Field(0.3, ge=0.0)
    anchor_fused_ranks: float = Field(0.5, ge=0.0)
    # Under the calibrated form, a question searched with words carried from the
    # conversation is also searched as asked, and the two rankings are fused (reciprocal
    # rank, rrf_k) with this weight on the question's own: its subject words still count.
    # 0: the search query alone.
    question_as_asked_weight: float = Field(0.25, ge=0.0, le=1.0)

    # Seed 004: the question-answering pipeline.
    qa_first_stage_n: int = Field(10, ge=1)
    qa_candidate_cap: int = Field(7, ge=1)
    qa_answer_n: int = Field(4, ge=1)
    qa_suggestion_n: int = Field(2, ge=0)
    # Which cross-encoder reranks: FlashRank's ONNX models, or a sentence-transformers
    # CrossEncoder (a model name or a local folder).
    reranker: Literal["flashrank", "cross-encoder"] = "flashrank"
    cross_encoder_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"

    # An optional OpenAI-compatible chat-completions endpoint (Ollama /v1, vLLM, llama.cpp).
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = None
    llm_timeout_s: float = Field(60.0, gt=0.0, le=3600.0)

    # Who records a reviewer decision when none is named (the workbench has no accounts):
    # unset, the operating system's user.
    reviewer: str | None = None

    # A team's dashboard (docs/login.md): the access file mapping the identity provider's
    # groups to roles and vendors, the ID-token claim holding a user's groups, and whether a
    # dashboard without login may be served on an address other than the loopback one.
    access_file: Path | None = None
    groups_claim: str = "groups"
    allow_anonymous: bool = False

    # Recorded benchmark results the dashboard shows.
    benchmark_results: Path = BENCHMARK_RESULTS_DIR

    # Threads each model runs on (ONNX Runtime's and torch's intra-op threads); 0 is every CPU
    # this process may use. Several processes sharing a machine run faster with a share each
    # than with every one spinning a thread per core.
    model_threads: int = Field(0, ge=0, le=1024)

    # Ingestion. Writers into one store take turns (core/store/locking.py): a second one waits this
    # long for the first; on a server, a writer's lease lapses if not renewed for write_lease_s.
    write_lock_wait_s: float = Field(900.0, ge=0.0, le=86400.0)
    write_lease_s: float = Field(60.0, ge=1.0, le=3600.0)
    # Ingestion.
    # Documents in time: a current report whose period ended longer ago than this is stale.
    stale_after_days: int = Field(365, ge=1, le=36500)
    chunk_size: int = Field(1000, ge=100)
    chunk_overlap: int = Field(150, ge=0)
    max_responses_per_round: int = Field(MAX_RESPONSES_PER_ROUND, ge=1)
    max_question_chars: int = Field(MAX_QUESTION_CHARS, ge=1)
    max_answer_chars: int = Field(MAX_ANSWER_CHARS, ge=1)
    max_questionnaire_bytes: int = Field(MAX_QUESTIONNAIRE_BYTES, ge=1)
    max_document_bytes: int = Field(MAX_DOCUMENT_BYTES, ge=1)

    @field_validator("chroma_ca_bundle")
    @classmethod
    def _readable_ca_bundle(cls, path: Path | None) -> Path | None:
        if path is None:
            return None
        path = path.expanduser()
        if not path.is_file():
            raise ValueError(f"there is no file at {path}; give the PEM file of the CA "
                             "certificates that signed the server's certificate")
        import ssl

        try:
            ssl.create_default_context(cafile=str(path))
        except (OSError, ssl.SSLError, ValueError):
            raise ValueError(f"{path} holds no PEM CA certificate that can be read") from None
        return path

    @field_validator("chroma_token")
    @classmethod
    def _header_safe_token(cls, token: SecretStr | None) -> SecretStr | None:
        # Checked here, so a token that cannot be sent in an HTTP header is refused as a
        # setting (without showing it) rather than failing inside the HTTP library.
        if token is not None and not _TOKEN_CHARACTERS.fullmatch(token.get_secret_value()):
            raise ValueError("a token is one or more printable ASCII characters without "
                             "spaces")
        return token

    def seed_constants(self) -> dict[str, float | int | None]:
        """The retrieval constants in force, as recorded in every trace."""
        return {name: getattr(self, name) for name in SEED_CONSTANT_NAMES}
