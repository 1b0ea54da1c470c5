"""A soak of replacements: one vendor's rounds replaced over and over, and its documents
ingested again changed, while every committed record is checked to be found by the vector
search (not only by `get`).

    python benchmarks/soak.py --replacements 1000            # an embedded store
    python benchmarks/soak.py --replacements 1000 --server   # on a `chroma run`

The vendor holds a policy of 30 sections and five rounds of 8 answers. Each replacement
sends one round again with every answer changed and one answer left out (withdrawn), through
`ingest_questionnaires(..., replace=True)` as `evidence ingest questionnaire --replace` does;
every 25th replacement the policy is ingested again with one section changed. Every
`--audit-every` replacements, each record is searched by its own vector
(`VendorStore.unreachable_by_search`); a record not found is counted, then written again as
it is (what `evidence check` does), and searched again. The words embedder is used: what
is exercised is ChromaDB's index, not a model.

It prints one JSON line and writes it to `benchmarks/results/soak-<kind>.json`."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.programme import Server, store_settings, workbench  # noqa: E402

VENDOR = "soak-vendor"
ROUNDS = 5
ANSWERS = 8
SECTIONS = 30


def policy_text(version: int, rng: random.Random) -> str:
    from core.bench.corpus import generate_corpus

    paragraphs = [p for d in generate_corpus(SECTIONS, 4, seed=11).documents
                  for p in d.paragraphs][:SECTIONS]
    changed = version % SECTIONS
    paragraphs[changed] = f"{paragraphs[changed]} Revised in version {version}."
    return "\n\n".join(paragraphs) + "\n"


def round_payload(round_number: int, version: int, rng: random.Random) -> dict[str, Any]:
    left_out = rng.randrange(ANSWERS) if version else None
    responses = [{"criterion_question_text": f"Is control {round_number}.{n} in place?",
                  "question_text": f"Control {round_number}.{n}?",
                  "answer_text": f"Answer {version} to control {round_number}.{n}: "
                                 f"{rng.choice(['Yes', 'No', 'Partially'])}, reviewed "
                                 f"{rng.choice(['monthly', 'quarterly', 'yearly'])}."}
                 for n in range(ANSWERS) if n != left_out]
    return {"vendor_id": VENDOR, "round_number": round_number,
            "timestamp": "2024-03-01T09:00:00Z", "responses": responses}


def soak(store: dict[str, Any], replacements: int, audit_every: int, folder: Path
         ) -> dict[str, Any]:
    from core.ingest.rounds.payload import parse_payload

    bench = workbench(store)
    rng = random.Random(3)
    policy = folder / "policy.md"
    policy.write_text(policy_text(0, rng), encoding="utf-8")
    bench.ingest_documents(VENDOR, [policy])
    for number in range(1, ROUNDS + 1):
        bench.ingest_questionnaire(round_payload(number, 0, rng))

    audits = unreachable_total = still_unreachable = 0
    worst = 0
    began = time.perf_counter()
    for done in range(1, replacements + 1):
        payload = parse_payload(round_payload(rng.randint(1, ROUNDS), done, rng))
        list(bench.ingest_questionnaires([payload], replace=True))
        if done % 25 == 0:
            policy.write_text(policy_text(done, rng), encoding="utf-8")
            bench.ingest_documents(VENDOR, [policy])
        if done % audit_every == 0 or done == replacements:
            vendor = bench.store.open_vendor(VENDOR)
            unreachable = vendor.unreachable_by_search()
            audits += 1
            unreachable_total += len(unreachable)
            worst = max(worst, len(unreachable))
            if unreachable:
                vendor.write_again(unreachable)
                still_unreachable += len(vendor.unreachable_by_search())
    elapsed = time.perf_counter() - began
    vendor = bench.store.open_vendor(VENDOR)
    status = bench.status(VENDOR)[0]
    return {"replacements": replacements, "documents_reingested": replacements // 25,
            "records": vendor.count_chunks(), "followup_responses": status.followup_responses,
            "audits": audits, "unreachable_found": unreachable_total,
            "unreachable_worst_audit": worst, "unreachable_after_rewrite": still_unreachable,
            "seconds": round(elapsed, 1),
            "replacements_per_s": round(replacements / elapsed, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replacements", type=int, default=1000)
    parser.add_argument("--audit-every", type=int, default=50)
    parser.add_argument("--server", action="store_true")
    args = parser.parse_args()
    if args.replacements < 1 or args.audit_every < 1:
        parser.error("--replacements and --audit-every must be at least 1")
    folder = Path(tempfile.mkdtemp(prefix="soak-"))
    server = None
    try:
        if args.server:
            server = Server(folder / "server-store")
        store = store_settings(folder, server, "soak")
        result = {"benchmark": "soak", "store": "server" if server else "embedded",
                  **soak(store, args.replacements, args.audit_every, folder)}
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(result))
    (ROOT / "benchmarks" / "results").mkdir(parents=True, exist_ok=True)
    (ROOT / "benchmarks" / "results" / f"soak-{result['store']}.json").write_text(
        json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
