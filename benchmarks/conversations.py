"""The continuation detector and the two forms of source anchoring, measured on the labelled
conversation turns of sample_data/conversations/labelled_turns.json with the real embedding
model: the sample data is indexed into a throw-away store, every conversation is asked turn
by turn, then every later turn is searched again under each anchoring form.

    python benchmarks/conversations.py            # prints the figures, writes
                                                  # benchmarks/results/conversations.json
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.answers.conversation.evaluation import evaluate, load_labelled  # noqa: E402
from core.config import BENCHMARK_RESULTS_DIR, Settings  # noqa: E402
from core.encoders.embedding import SentenceTransformerEmbedder  # noqa: E402
from core.ingest.sample import DEFAULT_SAMPLE_DIR, ingest_sample  # noqa: E402
from core.workbench import Workbench  # noqa: E402


def main() -> int:
    embedder = SentenceTransformerEmbedder(Settings().embedding_model)
    with tempfile.TemporaryDirectory(prefix="evidence-conversations-") as folder:
        root = Path(folder)
        benches = {form: Workbench(Settings(store=root / "store", lexical_dir=root / "lexical",
                                            reranker_cache_dir=root / "no-models",
                                            source_anchoring=form), embedder=embedder)
                   for form in ("calibrated", "seed")}
        ingest_sample(benches["calibrated"], DEFAULT_SAMPLE_DIR)
        figures = evaluate(benches, load_labelled()).to_json()
    figures["embedding_model"] = embedder.name
    out = BENCHMARK_RESULTS_DIR / "conversations.json"
    out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=2))
    print(f"written to {out.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
