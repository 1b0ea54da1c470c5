"""Cross-encoder reranking, with FlashRank's ONNX models or a sentence-transformers
CrossEncoder (`EVIDENCE_RERANKER`), and the honest fallback when no model is here."""

from __future__ import annotations

import importlib
import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from core.config import Settings
from core.encoders.embedding import configure_hub_access, limit_torch_threads
from core.errors import ModelUnavailableError
from core.models import RerankerStatus

# FlashRank runs on ONNX Runtime, which sends usage telemetry to Microsoft unless this is
# set before it starts.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

DEFAULT_DOWNLOAD_TIMEOUT_S: float = Settings.model_fields["model_download_timeout_s"].default
# FlashRank's module-level `requests` is swapped while a download runs; one swap at a time.
_DOWNLOAD_LOCK = threading.Lock()


class Reranker(ABC):
    """Scores (query, passage) relevance in 0..1; one method to implement."""

    name: str

    @abstractmethod
    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Return one relevance score per passage, in the passages' order."""


class FlashRankReranker(Reranker):
    """FlashRank's ONNX cross-encoders, read from `<cache_dir>/<model_name>/`."""

    def __init__(self, model_name: str, cache_dir: Path, *, max_length: int = 512,
                 allow_downloads: bool = False,
                 download_timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S, threads: int = 0) -> None:
        self.model_name = model_name
        self.threads = threads
        self.cache_dir = Path(cache_dir)
        self.max_length = max_length
        self.allow_downloads = allow_downloads
        self.download_timeout_s = download_timeout_s
        self.name = f"flashrank:{model_name}"
        self._ranker = None
        self._lock = threading.Lock()

    @property
    def model_dir(self) -> Path:
        return self.cache_dir / self.model_name

    @property
    def location(self) -> str:
        """Where the model is read from."""
        return str(self.model_dir)

    @property
    def runtime(self) -> str:
        return (f"flashrank {package_version('flashrank')} on onnxruntime "
                f"{package_version('onnxruntime')} (cpu)")

    @property
    def download_host(self) -> str:
        """The host a download of the model comes from."""
        from flashrank.Config import model_url

        return urlparse(model_url).hostname or "huggingface.co"

    def is_present(self) -> bool:
        """Whether the model's files are on disk, without loading it."""
        from flashrank.Config import model_file_map

        known = model_file_map.get(self.model_name)
        return known is not None and (self.model_dir / known).exists()

    def loaded_reason(self) -> str:
        return f"FlashRank model loaded from {self.model_dir}"

    def warm_up(self) -> None:
        """Load the model; raise ModelUnavailableError saying why it cannot be had."""
        with self._lock:
            if self._ranker is not None:
                return
            from flashrank import Ranker
            from flashrank.Config import model_file_map

            if self.model_name not in model_file_map:
                raise ModelUnavailableError(
                    f"FlashRank does not know the model '{self.model_name}'; known models: "
                    f"{', '.join(sorted(model_file_map))}."
                )
            # FlashRank downloads whenever the model folder is missing; we decide first.
            model_file = self.model_dir / model_file_map[self.model_name]
            if not model_file.exists() and not self.allow_downloads:
                raise ModelUnavailableError(
                    f"FlashRank model '{self.model_name}' is not in {self.cache_dir} and "
                    "model downloads are off; set EVIDENCE_ALLOW_MODEL_DOWNLOADS=1 to fetch it"
                )
            root = logging.getLogger()
            saved_handlers, saved_level = list(root.handlers), root.level
            try:
                with _download_timeout(self.download_timeout_s, enabled=self.allow_downloads):
                    ranker = Ranker(
                        model_name=self.model_name, cache_dir=str(self.cache_dir),
                        max_length=self.max_length, log_level="WARNING",
                    )
                if self.threads:  # FlashRank opens its session on every core
                    from core.encoders.onnx.runtime import open_session

                    ranker.session = open_session(model_file, self.threads)
                self._ranker = ranker
            except Exception as exc:
                raise ModelUnavailableError(
                    f"FlashRank model '{self.model_name}' could not be loaded from "
                    f"{self.model_dir}: {' '.join(str(exc).split())[:200]}"
                ) from exc
            finally:
                # Ranker() calls logging.basicConfig; leave the application's logging alone.
                root.handlers[:] = saved_handlers
                root.setLevel(saved_level)

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.warm_up()
        if not passages:
            return []
        from flashrank import RerankRequest

        request = RerankRequest(
            query=query, passages=[{"id": i, "text": text} for i, text in enumerate(passages)]
        )
        ranked = self._ranker.rerank(request)  # sorts and mutates the dicts it is given
        scores = [0.0] * len(passages)
        for passage in ranked:
            scores[passage["id"]] = float(passage["score"])
        return scores


class CrossEncoderReranker(Reranker):
    """A sentence-transformers CrossEncoder, from a local folder or a Hugging Face name.

    Scores are relevance in 0..1 whatever the model's own activation: the logits are read
    raw and mapped by a sigmoid (one output) or a softmax's second class (two outputs)."""

    def __init__(self, model: str, *, max_length: int = 512, allow_downloads: bool = False,
                 download_timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S, threads: int = 0) -> None:
        self.model_name = model
        self.threads = threads
        self.max_length = max_length
        self.allow_downloads = allow_downloads
        self.download_timeout_s = download_timeout_s
        self.name = f"cross-encoder:{model}"
        self.score_note = ""
        self._model: Any = None
        self._labels = 1
        self._lock = threading.Lock()

    def local_folder(self) -> Path | None:
        """The folder the model is read from when it is on this machine: the name itself
        when it is a folder, else its snapshot in the Hugging Face cache."""
        folder = Path(self.model_name).expanduser()
        if folder.is_dir():
            return folder
        return cached_hub_model(self.model_name)

    @property
    def location(self) -> str:
        """Where the model is read from (for a name not yet fetched: where it would go)."""
        folder = self.local_folder()
        return str(folder) if folder is not None else hub_cache_location(self.model_name)

    @property
    def runtime(self) -> str:
        return (f"sentence-transformers {package_version('sentence-transformers')} CrossEncoder on "
                f"torch {package_version('torch')} (cpu)")

    @property
    def download_host(self) -> str:
        return hub_download_host()

    def is_present(self) -> bool:
        folder = self.local_folder()
        return folder is not None and (folder / "config.json").exists()

    def loaded_reason(self) -> str:
        return f"CrossEncoder model loaded from {self.location}; {self.score_note}"

    def warm_up(self) -> None:
        """Load the model; raise ModelUnavailableError saying why it cannot be had."""
        with self._lock:
            if self._model is not None:
                return
            folder = self.local_folder()
            if folder is None and not self.allow_downloads:
                raise ModelUnavailableError(
                    f"The cross-encoder model '{self.model_name}' is not on this machine (no "
                    "such folder, and not in the Hugging Face cache) and model downloads are "
                    "off; set EVIDENCE_CROSS_ENCODER_MODEL to a model folder, or set "
                    "EVIDENCE_ALLOW_MODEL_DOWNLOADS=1 to fetch it"
                )
            configure_hub_access(self.allow_downloads, self.download_timeout_s)
            from huggingface_hub.utils import logging as hub_logging
            from sentence_transformers import CrossEncoder
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
            # the hub logs every retry of a failing download; the error says it once
            hub_logging.set_verbosity_error()
            source = str(folder) if folder is not None else self.model_name
            limit_torch_threads(self.threads)
            try:
                model = CrossEncoder(source, device="cpu",
                                     local_files_only=not self.allow_downloads)
            except Exception as exc:
                raise ModelUnavailableError(
                    f"The cross-encoder model '{self.model_name}' could not be loaded from "
                    f"{source}: {' '.join(str(exc).split())[:200]}"
                ) from exc
            labels = int(model.num_labels)
            if labels not in (1, 2):
                raise ModelUnavailableError(
                    f"The model '{self.model_name}' has {labels} outputs; a cross-encoder "
                    "reranker gives one relevance logit (or two classes)"
                )
            if model.max_seq_length:
                model.max_seq_length = min(self.max_length, model.max_seq_length)
            configured = type(model.activation_fn).__name__
            if labels == 2:
                self.score_note = ("relevance is the softmax probability of the model's "
                                   "second (relevant) class")
            elif configured == "Sigmoid":
                self.score_note = "relevance is the sigmoid of its logit, as the model is set up"
            else:
                self.score_note = (f"the model returns raw logits (its activation is "
                                   f"{configured}), mapped to 0..1 with a sigmoid")
            self._labels = labels
            self._model = model

    def logits(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """The model's raw outputs for each (query, passage) pair."""
        self.warm_up()
        import torch

        return np.asarray(self._model.predict(
            [(query, passage) for passage in passages], activation_fn=torch.nn.Identity(),
            convert_to_numpy=True, show_progress_bar=False), dtype=np.float64)

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.warm_up()
        if not passages:
            return []
        logits = self.logits(query, passages)
        if self._labels == 2:
            shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
            relevance = shifted[:, 1] / shifted.sum(axis=1)
        else:
            relevance = 0.5 * (1.0 + np.tanh(0.5 * logits.reshape(-1)))  # a stable sigmoid
        return [float(value) for value in relevance]


def cached_hub_model(name: str) -> Path | None:
    """The snapshot folder of a Hugging Face model already in the local cache, or None.
    Reads the cache only; never the network."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(name, "config.json")
    except Exception:  # not a valid repository id: a folder name that does not exist
        return None
    return Path(found).parent if isinstance(found, str) else None


def hub_download_host() -> str:
    """The host Hugging Face models are downloaded from (HF_ENDPOINT, or huggingface.co)."""
    from huggingface_hub import constants

    return urlparse(constants.ENDPOINT).hostname or "huggingface.co"


def hub_cache_location(name: str) -> str:
    """Where the Hugging Face cache keeps (or would keep) the model of this name."""
    from huggingface_hub import constants

    return str(Path(constants.HF_HUB_CACHE) / f"models--{name.replace('/', '--')}")


def package_version(package: str) -> str:
    """The installed version of a distribution, for saying which runtime runs a model."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "(not installed)"


class _RequestsWithTimeout:
    """The `requests` module as FlashRank's downloader sees it: every get has a timeout."""

    def __init__(self, requests_module: Any, timeout_s: float) -> None:
        self._requests = requests_module
        self._timeout_s = timeout_s

    def get(self, url: str, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", self._timeout_s)
        return self._requests.get(url, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._requests, name)


@contextmanager
def _download_timeout(timeout_s: float, *, enabled: bool) -> Iterator[None]:
    """FlashRank downloads with requests.get and no timeout, so a stalled connection would
    hang the loading for good; while a Ranker that may download is built, FlashRank's
    module sees a `requests` whose get has one."""
    if not enabled:
        yield
        return
    ranker_module = importlib.import_module("flashrank.Ranker")
    with _DOWNLOAD_LOCK:
        original = ranker_module.requests
        ranker_module.requests = _RequestsWithTimeout(original, timeout_s)
        try:
            yield
        finally:
            ranker_module.requests = original


def configured_reranker(settings: Settings, *, allow_downloads: bool | None = None
                        ) -> FlashRankReranker | CrossEncoderReranker:
    """The reranker the settings select (`reranker`), not loaded yet."""
    allow = settings.allow_model_downloads if allow_downloads is None else allow_downloads
    if settings.reranker == "cross-encoder":
        return CrossEncoderReranker(
            settings.cross_encoder_model, max_length=settings.reranker_max_length,
            allow_downloads=allow, download_timeout_s=settings.model_download_timeout_s,
            threads=settings.model_threads,
        )
    return FlashRankReranker(
        settings.reranker_model, settings.reranker_cache_dir,
        max_length=settings.reranker_max_length, allow_downloads=allow,
        download_timeout_s=settings.model_download_timeout_s, threads=settings.model_threads,
    )


def load_reranker(settings: Settings) -> tuple[Reranker | None, RerankerStatus]:
    """The configured reranker ready to run, or None with the reason it is not."""
    reranker = configured_reranker(settings)
    try:
        reranker.warm_up()
    except ModelUnavailableError as exc:
        return None, fallback_status(reranker.name, str(exc))
    return reranker, RerankerStatus(name=reranker.name, ran=True,
                                    reason=reranker.loaded_reason())


def fallback_status(wanted: str, why: str) -> RerankerStatus:
    """The status reported when retrieval keeps first-stage order because no reranker ran."""
    return RerankerStatus(
        name="none",
        ran=False,
        reason=f"{wanted} unavailable ({why.rstrip('.')}); evidence kept in first-stage order",
    )
