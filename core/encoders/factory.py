"""The embedder the settings ask for: sentence-transformers on torch, or the same model on
ONNX Runtime. The one module that knows both runtimes."""

from __future__ import annotations

from collections.abc import Callable

from core.config import Settings
from core.encoders.embedding import Embedder, SentenceTransformerEmbedder
from core.encoders.onnx.embedder import OnnxEmbedder
from core.errors import ModelUnavailableError


def configured_embedder(settings: Settings, *,
                        torch_embedder: Callable[..., Embedder] | None = None) -> Embedder:
    """The embedder the settings ask for; nothing is loaded until it is first used.

    `embedding_runtime` "torch" gives sentence-transformers on torch; "onnx" the same model
    on ONNX Runtime, or ModelUnavailableError at first use when its export is refused; "auto"
    ONNX Runtime when its export passes the check, else torch with a logged note. The torch
    embedder is made by `torch_embedder` (SentenceTransformerEmbedder's signature); only a
    SentenceTransformerEmbedder can be exported, and any other embedder it makes is used as
    it is (with "onnx", refused)."""
    make = torch_embedder or SentenceTransformerEmbedder
    torch = make(settings.embedding_model, batch_size=settings.embed_batch_size,
                 allow_downloads=settings.allow_model_downloads,
                 download_timeout_s=settings.model_download_timeout_s,
                 threads=settings.model_threads)
    if settings.embedding_runtime == "torch":
        return torch
    if not isinstance(torch, SentenceTransformerEmbedder):
        if settings.embedding_runtime == "onnx":
            raise ModelUnavailableError(
                f"EVIDENCE_EMBEDDING_RUNTIME=onnx, but the embedder '{torch.name}' is not a "
                "sentence-transformers model, the only kind exported to ONNX.")
        return torch
    return OnnxEmbedder(torch, cache_dir=settings.onnx_cache_dir,
                        required=settings.embedding_runtime == "onnx",
                        threads=settings.model_threads)
