"""One ONNX export of the real embedding model per test session, in a folder every test
module that needs it shares: the first to ask exports and checks it, the others read it."""

from __future__ import annotations

from pathlib import Path

from core.encoders.embedding import SentenceTransformerEmbedder
from core.encoders.onnx.embedder import OnnxEmbedder


def shared_onnx_cache(basetemp: Path, torch_embedder: SentenceTransformerEmbedder) -> Path:
    """The session's ONNX cache folder, holding the checked export of `torch_embedder`."""
    cache = basetemp / "onnx-cache"
    OnnxEmbedder(torch_embedder, cache_dir=cache, required=True).warm_up()
    return cache
