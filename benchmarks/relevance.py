"""The relevance gate's two judged sets and their baselines.

- `sample`: the sample data's judged set (sample_data/judgments/: criteria and graded
  judgments of acme's excerpts, set by reading each excerpt), on a store of sample_data/.
- `bench`: the generated bench corpus (600 chunks, 12 criteria), judged from what the
  generator planted: each criterion's newest answer 3, its earlier answers 2.

Both are measured with `evidence eval` on every strategy, with the real embedding model.
`--write` saves each run as its baseline (benchmarks/relevance/<set>-baseline.jsonl); the
test suite then runs `evidence eval --baseline ... --fail-below` on both, so a change that
makes ranking worse on either set fails CI.

    python benchmarks/relevance.py            # print both runs
    python benchmarks/relevance.py --write    # and save them as the baselines
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.bench.corpus import VENDOR_ID, Corpus, generate_corpus  # noqa: E402
from core.config import Settings  # noqa: E402
from core.criteria import CriterionEntry  # noqa: E402
from core.outputs.relevance import Choice, evaluate, read_judgments  # noqa: E402
from core.retrieval.strategies import STRATEGIES  # noqa: E402
from core.workbench import Workbench  # noqa: E402

SAMPLE_JUDGMENTS = REPO / "sample_data" / "judgments"
BASELINES = REPO / "benchmarks" / "relevance"
BENCH_CHUNKS, BENCH_QUERIES = 600, 12


def bench_judgments(corpus: Corpus, path: Path) -> Path:
    """The generated corpus's judgments as a CSV: each criterion's newest planted answer 3,
    the earlier ones 2."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["vendor_id", "criterion", "id", "grade"])
        for query in corpus.queries:
            newest = max(p.round_number for p in query.planted)
            for planted in query.planted:
                writer.writerow([corpus.vendor_id, query.criterion, planted.record_id,
                                 3 if planted.round_number == newest else 2])
    return path


def ingest_corpus(workbench: Workbench, corpus: Corpus, folder: Path) -> None:
    for (doc_type, round_number), path in corpus.write_documents(folder).items():
        workbench.ingest_documents(corpus.vendor_id, [path], doc_type=doc_type,
                                   round_number=round_number)
    for payload in corpus.payloads:
        workbench.ingest_questionnaire(payload)


def bench_set(folder: Path, embedder) -> tuple[Workbench, str, Path, Path]:
    """A store of the bench corpus, its criteria file and its judgments file."""
    corpus = generate_corpus(BENCH_CHUNKS, BENCH_QUERIES)
    workbench = Workbench(Settings(store=folder / "store", lexical_dir=folder / "lexical",
                                   reranker_cache_dir=folder / "no-models"), embedder=embedder)
    ingest_corpus(workbench, corpus, folder / "corpus")
    criteria = folder / "criteria.txt"
    criteria.write_text("".join(q.criterion + "\n" for q in corpus.queries), encoding="utf-8")
    return workbench, VENDOR_ID, criteria, bench_judgments(corpus, folder / "judgments.csv")


def sample_set(folder: Path, embedder) -> tuple[Workbench, str, Path, Path]:
    """A store of the sample data, the judged criteria and their judgments."""
    from core.ingest.sample import DEFAULT_SAMPLE_DIR, ingest_sample

    workbench = Workbench(Settings(store=folder / "store", lexical_dir=folder / "lexical",
                                   reranker_cache_dir=folder / "no-models"), embedder=embedder)
    ingest_sample(workbench, DEFAULT_SAMPLE_DIR)
    return (workbench, "acme", SAMPLE_JUDGMENTS / "criteria.txt",
            SAMPLE_JUDGMENTS / "acme.csv")


def measure(workbench: Workbench, vendor: str, criteria_file: Path, judgments: Path
            ) -> list[dict]:
    criteria = [CriterionEntry(line.strip()) for line in
                criteria_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    graded = read_judgments(judgments, workbench.store, vendor, criteria)
    results = evaluate(workbench, vendor, criteria, [Choice(strategy=s) for s in STRATEGIES],
                       graded)
    return [r.line() for r in results]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=("sample", "bench"),
                        default=["sample", "bench"])
    parser.add_argument("--write", action="store_true", help="save the runs as baselines")
    args = parser.parse_args(argv)
    from core.encoders.embedding import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(Settings().embedding_model)
    for name in args.sets:
        with tempfile.TemporaryDirectory(prefix=f"evidence-relevance-{name}-") as folder:
            build = sample_set if name == "sample" else bench_set
            lines = measure(*build(Path(folder), embedder))
        text = "".join(json.dumps(line) + "\n" for line in lines)
        print(f"# {name}\n{text}", end="")
        if args.write:
            BASELINES.mkdir(exist_ok=True)
            (BASELINES / f"{name}-baseline.jsonl").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
