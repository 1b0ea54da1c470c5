"""Evidence precedence workbench: the retrieval library (never imports streamlit)."""

from core.config import Settings
from core.models import RetrievalTrace
from core.retrieval.strategies import DEFAULT_STRATEGY, STRATEGIES
from core.workbench import Workbench

__all__ = ["DEFAULT_STRATEGY", "STRATEGIES", "RetrievalTrace", "Settings", "Workbench"]
