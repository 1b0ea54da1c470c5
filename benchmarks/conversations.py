"""The conversation mode measured on three sets, each reported apart, with the real embedding
model and no language model (the default):

- `sample`: the labelled turns of sample_data/conversations/labelled_turns.json on the
  sample vendors (written beside the rules);
- `public`: benchmarks/data/tailscale/conversations.json, security-review conversations about
  a public vendor's published policies, written before the decision was reworked and never
  used to tune it; the policies are indexed as the vendor "tailscale";
- `cast`: every TREC CAsT 2019-2022 turn after the first (benchmarks/data/cast/), words only:
  does the turn need the conversation, and how much of what its manual rewrite adds does
  the query expansion carry.

For the two labelled sets, each store is a throw-away one; every conversation is asked turn
by turn, then every later turn is searched again under each anchoring form.

    python benchmarks/conversations.py            # prints the figures and the targets met,
                                                  # writes benchmarks/results/conversations.json
    python benchmarks/conversations.py --sets cast   # one or more of sample, public, cast
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.config import BENCHMARK_RESULTS_DIR, Settings  # noqa: E402
from core.encoders.embedding import SentenceTransformerEmbedder  # noqa: E402
from core.ingest.sample import DEFAULT_SAMPLE_DIR, ingest_sample  # noqa: E402
from core.review.conversation.evaluation import (  # noqa: E402
    LABELLED_TURNS,
    evaluate,
    evaluate_cast,
    load_cast,
    load_labelled,
)
from core.workbench import Workbench  # noqa: E402

PUBLIC = REPO / "benchmarks" / "data" / "tailscale"
DEVELOPMENT = REPO / "benchmarks" / "data" / "cloudgov"
SETS = ("sample", "public", "dev", "cast")


def labelled_set(embedder, data_dir: Path, labelled: Path) -> dict:
    """One labelled set asked on a fresh store of its documents, under both anchoring forms."""
    with tempfile.TemporaryDirectory(prefix="evidence-conversations-") as folder:
        root = Path(folder)
        benches = {form: Workbench(Settings(store=root / "store", lexical_dir=root / "lexical",
                                            reranker_cache_dir=root / "no-models",
                                            source_anchoring=form), embedder=embedder)
                   for form in ("calibrated", "seed")}
        ingest_sample(benches["calibrated"], data_dir)
        return evaluate(benches, load_labelled(labelled)).to_json()


def targets(figures: dict) -> dict[str, bool]:
    """The issue's targets, each met or not, for the sets that were measured."""
    met: dict[str, bool] = {}
    if "cast" in figures:
        cast = figures["cast"]["all"]
        met["cast: right on >= 85% of later turns"] = cast["accuracy"] >= 0.85
        met["cast: neither error above 10%"] = max(cast["said_needed_wrongly_share"],
                                                   cast["missed_share"]) <= 0.10
    if "public" in figures:
        public = figures["public"]
        met["public: right on >= 85% of later turns"] = public["accuracy_after_first"] >= 0.85
        met["public: neither error above 10%"] = max(public["shift_error_share"],
                                                     public["continuation_error_share"]) <= 0.10
        met["public: >= 75% of a continuation's answer from its topic's documents"] = (
            (public["continuation_topic_share"] or 0.0) >= 0.75)
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    args = parser.parse_args(argv)
    figures: dict = {}
    embedder = None
    if {"sample", "public", "dev"} & set(args.sets):
        embedder = SentenceTransformerEmbedder(Settings().embedding_model)
    if "sample" in args.sets:
        figures["sample"] = labelled_set(embedder, DEFAULT_SAMPLE_DIR, LABELLED_TURNS)
    if "public" in args.sets:
        figures["public"] = labelled_set(embedder, PUBLIC, PUBLIC / "conversations.json")
    if "dev" in args.sets:
        figures["dev"] = labelled_set(embedder, DEVELOPMENT, DEVELOPMENT / "conversations.json")
    if "cast" in args.sets:
        figures["cast"] = evaluate_cast(load_cast())
    if embedder is not None:
        figures["embedding_model"] = embedder.name
    figures["targets"] = targets(figures)
    print(json.dumps(figures, indent=2))
    if args.sets == list(SETS):
        out = BENCHMARK_RESULTS_DIR / "conversations.json"
        out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"written to {out.relative_to(REPO)}", file=sys.stderr)
    for target, ok in figures["targets"].items():
        print(f"{'met   ' if ok else 'MISSED'} {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
