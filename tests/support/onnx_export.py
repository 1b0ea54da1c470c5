"""One ONNX export of the real embedding model per test run, in a folder every test module
(and every worker process) that needs it shares: the first to ask exports and checks it, the
others read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.encoders.embedding import SentenceTransformerEmbedder
from core.encoders.onnx.embedder import OnnxEmbedder
from tests.support.shared import built_once


def shared_onnx_cache(factory: pytest.TempPathFactory,
                      torch_embedder: SentenceTransformerEmbedder) -> Path:
    """The run's ONNX cache folder, holding the checked export of `torch_embedder`."""
    def build(folder: Path) -> None:
        OnnxEmbedder(torch_embedder, cache_dir=folder / "onnx-cache", required=True).warm_up()

    return built_once(factory, "onnx-cache", build) / "onnx-cache"
