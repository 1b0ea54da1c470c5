"""Cross-encoder reranking with FlashRank, and the honest fallback when no model is here."""

from __future__ import annotations

import importlib
import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.config import Settings
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
                 download_timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S) -> None:
        self.model_name = model_name
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
                    self._ranker = Ranker(
                        model_name=self.model_name, cache_dir=str(self.cache_dir),
                        max_length=self.max_length, log_level="WARNING",
                    )
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


def load_reranker(settings: Settings) -> tuple[Reranker | None, RerankerStatus]:
    """The configured reranker ready to run, or None with the reason it is not."""
    reranker = FlashRankReranker(
        settings.reranker_model, settings.reranker_cache_dir,
        max_length=settings.reranker_max_length,
        allow_downloads=settings.allow_model_downloads,
        download_timeout_s=settings.model_download_timeout_s,
    )
    try:
        reranker.warm_up()
    except ModelUnavailableError as exc:
        return None, fallback_status(reranker.name, str(exc))
    return reranker, RerankerStatus(
        name=reranker.name, ran=True, reason=f"FlashRank model loaded from {reranker.model_dir}"
    )


def fallback_status(wanted: str, why: str) -> RerankerStatus:
    """The status reported when retrieval keeps first-stage order because no reranker ran."""
    return RerankerStatus(
        name="none",
        ran=False,
        reason=f"{wanted} unavailable ({why.rstrip('.')}); evidence kept in first-stage order",
    )
