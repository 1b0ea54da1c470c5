"""Builds turns.json from a checkout of TREC CAsT's topic files (github daltonj/treccastweb):
every user turn of the 2019 to 2022 evaluation topics with its raw utterance, its manual
rewrite and, where the year gives one, the canonical answer passage shown for it.

    python benchmarks/data/cast/build.py PATH/TO/treccastweb > benchmarks/data/cast/turns.json

2019 keeps raw utterances in evaluation_topics_v1.0.json and rewrites in the resolved TSV;
2020 and 2021 keep both in the manual topics; 2022's conversations are trees, flattened into
every path (turns shared by two paths are kept once, under the first path that has them).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path


def _2019(root: Path) -> list[dict]:
    folder = root / "2019" / "data" / "evaluation"
    with (folder / "evaluation_topics_annotated_resolved_v1.0.tsv").open(encoding="utf-8") as f:
        rewrites = {row[0]: row[1] for row in csv.reader(f, delimiter="\t") if len(row) >= 2}
    topics = json.loads((folder / "evaluation_topics_v1.0.json").read_text(encoding="utf-8"))
    return [{"year": 2019, "conversation": str(topic["number"]), "turn": str(turn["number"]),
             "utterance": turn["raw_utterance"].strip(),
             "rewrite": rewrites[f"{topic['number']}_{turn['number']}"].strip()}
            for topic in topics for turn in topic["turn"]]


def _manual(root: Path, year: int, name: str) -> list[dict]:
    topics = json.loads((root / str(year) / name).read_text(encoding="utf-8"))
    turns = []
    for topic in topics:
        for turn in topic["turn"]:
            item = {"year": year, "conversation": str(topic["number"]),
                    "turn": str(turn["number"]), "utterance": turn["raw_utterance"].strip(),
                    "rewrite": turn["manual_rewritten_utterance"].strip()}
            if turn.get("passage"):
                item["answer"] = turn["passage"].strip()
            turns.append(item)
    return turns


def _2022(root: Path) -> list[dict]:
    paths = json.loads((root / "2022" / "2022_evaluation_topics_flattened_duplicated_v1.0.json"
                        ).read_text(encoding="utf-8"))
    seen, turns = set(), []
    for path in paths:
        conversation = str(path["number"])
        for position, turn in enumerate(path["turn"], start=1):
            topic = conversation.split("-")[0]
            key = (topic, str(turn["number"]))
            item = {"year": 2022, "conversation": conversation, "turn": str(turn["number"]),
                    "position": position, "utterance": turn["utterance"].strip(),
                    "rewrite": turn["manual_rewritten_utterance"].strip()}
            if turn.get("response"):
                item["answer"] = turn["response"].strip()
            item["repeat"] = key in seen
            seen.add(key)
            turns.append(item)
    return turns


def main(root: Path) -> int:
    turns = (_2019(root) + _manual(root, 2020, "2020_manual_evaluation_topics_v1.0.json")
             + _manual(root, 2021, "2021_manual_evaluation_topics_v1.0.json") + _2022(root))
    json.dump({"source": "TREC CAsT evaluation topics 2019-2022, github daltonj/treccastweb",
               "turns": turns}, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
