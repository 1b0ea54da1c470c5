"""Cross-encoder reranking with FlashRank, and the honest fallback when no model is here."""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

from core.config import Settings
from core.errors import ModelUnavailableError
from core.models import RerankerStatus


class Reranker(ABC):
    """Scores (query, passage) relevance in 0..1; one method to implement."""

    name: str

    @abstractmethod
    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Return one relevance score per passage, in the passages' order."""


class FlashRankReranker(Reranker):
    """FlashRank's ONNX cross-encoders, read from `<cache_dir>/<model_name>/`."""

    def __init__(self, model_name: str, cache_dir: Path, *, max_length: int = 512,
                 allow_downloads: bool = False) -> None:
        self.model_name = model_name
        self.cache_dir = Path(cache_dir)
        self.max_length = max_length
        self.allow_downloads = allow_downloads
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
                    "model downloads are off"
                )
            root = logging.getLogger()
            saved_handlers, saved_level = list(root.handlers), root.level
            try:
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


def load_reranker(settings: Settings) -> tuple[Reranker | None, RerankerStatus]:
    """The configured reranker ready to run, or None with the reason it is not."""
    reranker = FlashRankReranker(
        settings.reranker_model, settings.reranker_cache_dir,
        max_length=settings.reranker_max_length,
        allow_downloads=settings.allow_model_downloads,
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
