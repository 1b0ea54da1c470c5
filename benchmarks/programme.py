"""A programme's store: many vendors in one store, timed on what grows with their number.

    python benchmarks/programme.py --vendors 1000              # an embedded store
    python benchmarks/programme.py --vendors 1000 --server     # the same on a `chroma run`
    python benchmarks/programme.py --vendors 1000 --server --plain-server

A server is measured as its operator sets it up (`python -m core.store.lookups DIR` adds the
two lookup indexes ChromaDB's schema lacks, and its configuration file bounds the vector
indexes it keeps loaded to `EVIDENCE_STORE_OPEN_INDEXES`); `--plain-server` runs it as
`chroma run --path` does.

Every vendor holds one policy of 30 sections (30 chunks) and one questionnaire round of 8
answers, written through the library with an embedder that hashes words (no model time is
counted: what is timed is the store's work). Then, each in a process of its own where a
fresh process is what is measured:

- **ingest:** each vendor's ingest (documents, then the round), the first vendors' against
  the last ones' (`ingest_last_vs_first`; the very first vendor, which imports the readers,
  is left out);
- **status:** `Workbench.status()` of every vendor in a fresh process once its store is
  connected (`open_store_s`: importing and starting ChromaDB, the same at any number of
  vendors), and `evidence status` whole, as a person runs it, Python's start included;
- **interaction:** what every dashboard rerun reads of the store before drawing (the state
  of every vendor and of the one selected, which key its caches), p50 over 30 reruns;
- **retrieve:** `precedence` p50 on sampled vendors, against the same vendor's p50 in a store
  holding it alone, the two taking turns in one process (`retrieve_vs_one_vendor`: the
  largest of the sampled vendors' ratios);
- **first retrieve:** a fresh process's first retrieve of a sampled vendor, once its store is
  connected;
- **memory:** a process that retrieves once from every vendor, its resident memory at the end
  and its peak, with the store's cap on open vector indexes (`EVIDENCE_STORE_OPEN_INDEXES`).

It prints one JSON line and writes it to `benchmarks/results/programme-<kind>-<N>.json`."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"
CHUNKS = 30
ANSWERS = 8
SAMPLED = 5
RUNS = 60


def vendor_name(index: int) -> str:
    return f"vendor-{index:04d}"


def vendor_material(index: int, folder: Path) -> tuple[Path, dict[str, Any], str]:
    """The vendor's policy file, its round payload and a criterion its round answers."""
    from core.bench.corpus import generate_corpus

    vendor = vendor_name(index)
    corpus = generate_corpus(CHUNKS, 4, seed=index, vendor_id=vendor)
    policy = folder / vendor / "policy.txt"
    policy.parent.mkdir(parents=True, exist_ok=True)
    policy.write_text("\n\n".join(p for d in corpus.documents for p in d.paragraphs) + "\n",
                      encoding="utf-8")
    seen: set[tuple[str | None, str]] = set()
    responses = []
    for payload in corpus.payloads:
        for response in payload["responses"]:
            key = (response.get("criterion_question_text"), response["question_text"])
            if key not in seen and len(responses) < ANSWERS:
                seen.add(key)
                responses.append(response)
    round_payload = {"vendor_id": vendor, "round_number": 1,
                     "timestamp": "2024-02-15T10:30:00Z", "responses": responses}
    return policy, round_payload, corpus.queries[0].criterion


def workbench(store: dict[str, Any]) -> Any:
    from core.bench.words import HashedWordsEmbedder
    from core.config import Settings
    from core.workbench import Workbench

    return Workbench(Settings(**store), embedder=HashedWordsEmbedder())


def rss_mb() -> tuple[float, float]:
    """This process's resident memory now and at its peak, in MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text()
                  .splitlines() if ":" in line)
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


# The measurements, each run in a process of its own (`--job`) ----------------------------

def job_ingest(store: dict[str, Any], first: int, last: int, scratch: str) -> dict[str, Any]:
    bench = workbench(store)
    times = []
    for index in range(first, last):
        policy, payload, _ = vendor_material(index, Path(scratch))
        began = time.perf_counter()
        bench.ingest_documents(vendor_name(index), [policy])
        bench.ingest_questionnaire(payload)
        times.append(time.perf_counter() - began)
    return {"times": times}


def opened(store: dict[str, Any]) -> tuple[Any, float]:
    """A workbench with its store connected (ChromaDB imported and started, the same at any
    number of vendors), and the seconds that took."""
    bench = workbench(store)
    began = time.perf_counter()
    bench.store.client  # noqa: B018 - connecting is what is timed
    return bench, time.perf_counter() - began


def job_status(store: dict[str, Any]) -> dict[str, Any]:
    bench, open_s = opened(store)
    began = time.perf_counter()
    statuses = bench.status()
    return {"status_s": time.perf_counter() - began, "open_s": open_s,
            "vendors": len(statuses),
            "chunks": sum(s.chunks for s in statuses),
            "answers": sum(s.followup_responses for s in statuses)}


def job_interaction(store: dict[str, Any], vendors: list[str]) -> dict[str, Any]:
    bench = workbench(store)
    bench.store_state()  # the client connected, as a running dashboard's is
    times = []
    for vendor in vendors:
        began = time.perf_counter()
        every, one = bench.store_state(), bench.store_state(vendor)
        times.append(time.perf_counter() - began)
        assert every and one
    return {"interaction_p50_s": statistics.median(times)}


def job_retrieve(store: dict[str, Any], alone: dict[str, Any], vendor: str,
                 criterion: str) -> dict[str, Any]:
    """The vendor's retrieval in the programme's store and in a store holding it alone, in
    one process, taking turns, so both are measured under the same conditions; and the
    first retrieve of the programme's store (connected, nothing of the vendor read yet)."""
    bench, _ = opened(store)
    began = time.perf_counter()
    bench.retrieve(vendor, criterion, "precedence")
    first = time.perf_counter() - began
    single, _ = opened(alone)
    single.retrieve(vendor, criterion, "precedence")
    times: dict[str, list[float]] = {"programme": [], "alone": []}
    for run in range(2 * RUNS):
        name, reader = (("programme", bench), ("alone", single))[run % 2]
        reader.forget_query_embeddings()
        began = time.perf_counter()
        reader.retrieve(vendor, criterion, "precedence")
        times[name].append(time.perf_counter() - began)
    return {"first_s": first, "p50_s": statistics.median(times["programme"]),
            "alone_p50_s": statistics.median(times["alone"])}


def job_touch_all(store: dict[str, Any], criteria: dict[str, str]) -> dict[str, Any]:
    bench = workbench(store)
    for vendor, criterion in criteria.items():
        bench.retrieve(vendor, criterion, "precedence")
    now, peak = rss_mb()
    return {"rss_mb": now, "peak_rss_mb": peak}


JOBS = {"ingest": job_ingest, "status": job_status, "interaction": job_interaction,
        "retrieve": job_retrieve, "touch_all": job_touch_all}


def run_job(name: str, **arguments: Any) -> dict[str, Any]:
    """The job in a fresh Python process; its result."""
    done = subprocess.run([sys.executable, __file__, "--job", json.dumps([name, arguments])],
                          capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"The {name} job failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# A ChromaDB server ------------------------------------------------------------------------

class Server:
    """`chroma run` on 127.0.0.1, on a free port, for the length of the run."""

    def __init__(self, path: Path, *, lookup_indexes: bool = True,
                 open_indexes: int | None = None) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        chroma = Path(sys.executable).with_name("chroma")
        self.log = open(path.parent / "chroma-server.log", "ab")  # noqa: SIM115
        # As an operator bounds the vector indexes a server keeps loaded (ChromaDB's default
        # is 65,536): the server's own configuration file, ChromaDB's keys.
        self.open_indexes = open_indexes
        config = path.parent / f"{path.name}.yaml"
        lines = [f"port: {self.port}", 'listen_address: "127.0.0.1"',
                 f"persist_path: {json.dumps(str(path))}"]
        if open_indexes is not None:
            lines += ["segment_manager:", "  hnsw_index_pool_cache_config:", "    memory:",
                      f"      capacity: {open_indexes}"]
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.process = subprocess.Popen(
            [str(chroma), "run", str(config)], stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
        for _ in range(600):
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{self.port}/api/v2/heartbeat", timeout=2):
                    break
            except OSError:
                if self.process.poll() is not None:
                    raise SystemExit("chroma run exited before answering") from None
                time.sleep(0.1)
        else:
            raise SystemExit("chroma run did not answer its heartbeat")
        # What the server's operator does once (core/store/lookups.py): ChromaDB's schema
        # lacks two lookup indexes, without which every call scans every collection's rows.
        self.lookup_indexes = lookup_indexes
        if lookup_indexes:
            from core.store.lookups import index_lookups

            index_lookups(path / "chroma.sqlite3", timeout_s=60.0)

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(status.split("VmRSS:")[1].split()[0]) / 1024

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()
        self.log.close()


# The run -----------------------------------------------------------------------------------

def store_settings(folder: Path, server: Server | None, name: str) -> dict[str, Any]:
    if server is None:
        return {"store": str(folder / name), "lexical_dir": str(folder / name / "lexical")}
    return {"chroma_host": "127.0.0.1", "chroma_port": server.port,
            "store": str(folder / "no-embedded-store"),
            "lexical_dir": str(folder / f"{name}-lexical")}


def measure(vendors: int, folder: Path, server: Server | None,
            one_vendor_server: Server | None) -> dict[str, Any]:
    scratch = folder / "material"
    store = store_settings(folder, server, "programme")
    progress = print if sys.stderr.isatty() else (lambda *a, **k: None)

    began = time.perf_counter()
    times: list[float] = []
    step = 100
    for first in range(0, vendors, step):
        times += run_job("ingest", store=store, first=first, last=min(vendors, first + step),
                         scratch=str(scratch))["times"]
        progress(f"ingested {len(times)} of {vendors} vendors", file=sys.stderr)
    build_s = time.perf_counter() - began
    window = max(1, min(20, (vendors - 1) // 2))
    first_s = statistics.mean(times[1 : 1 + window])
    last_s = statistics.mean(times[-window:])

    status = run_job("status", store=store)
    began = time.perf_counter()
    cli_env = {**os.environ}
    if server is None:
        argv = ["--store", store["store"], "status"]
    else:
        argv = ["status"]
        cli_env.update(EVIDENCE_CHROMA_HOST="127.0.0.1", EVIDENCE_CHROMA_PORT=str(server.port),
                       EVIDENCE_LEXICAL_DIR=store["lexical_dir"])
    done = subprocess.run([str(Path(sys.executable).with_name("evidence")), *argv],
                          capture_output=True, text=True, env=cli_env)
    cli_s = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"evidence status failed: {done.stderr}")

    rng = random.Random(7)
    sampled = sorted(rng.sample(range(vendors), min(SAMPLED, vendors)))
    interaction = run_job("interaction", store=store,
                          vendors=[vendor_name(i) for i in rng.choices(range(vendors), k=30)])

    ratios, p50s, floors, firsts = [], [], [], []
    for index in sampled:
        _, _, criterion = vendor_material(index, scratch)
        alone = store_settings(folder, one_vendor_server, f"alone-{index}")
        run_job("ingest", store=alone, first=index, last=index + 1, scratch=str(scratch))
        here = run_job("retrieve", store=store, alone=alone, vendor=vendor_name(index),
                       criterion=criterion)
        p50s.append(here["p50_s"])
        floors.append(here["alone_p50_s"])
        firsts.append(here["first_s"])
        ratios.append(here["p50_s"] / here["alone_p50_s"])

    criteria = {vendor_name(i): vendor_material(i, scratch)[2] for i in range(vendors)}
    touched = run_job("touch_all", store=store, criteria=criteria)

    from core.config import Settings
    from core.store import chromadb_version

    result: dict[str, Any] = {
        "benchmark": "programme", "store": "server" if server else "embedded",
        "vendors": vendors, "chunks_per_vendor": CHUNKS, "answers_per_vendor": ANSWERS,
        "vendors_read_by_status": status["vendors"],
        "build_s": round(build_s, 1),
        "ingest_first_s": round(first_s, 4), "ingest_last_s": round(last_s, 4),
        "ingest_last_vs_first": round(last_s / first_s, 3),
        "status_s": round(status["status_s"], 4),
        "open_store_s": round(status["open_s"], 3),
        "evidence_status_cli_s": round(cli_s, 3),
        "interaction_p50_s": round(interaction["interaction_p50_s"], 5),
        "retrieve_p50_ms": round(statistics.median(p50s) * 1000, 2),
        "one_vendor_retrieve_p50_ms": round(statistics.median(floors) * 1000, 2),
        "retrieve_vs_one_vendor": round(max(ratios), 3),
        "retrieve_vs_one_vendor_each": [round(r, 3) for r in ratios],
        "first_retrieve_s": round(max(firsts), 4),
        "touched_all_rss_mb": round(touched["rss_mb"], 1),
        "touched_all_peak_rss_mb": round(touched["peak_rss_mb"], 1),
        "open_indexes": Settings().store_open_indexes,
        "chromadb": chromadb_version(), "date": time.strftime("%Y-%m-%d"),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                 capture_output=True, text=True).stdout.strip(),
    }
    if server is not None:
        result["server_rss_mb"] = round(server.rss_mb(), 1)
        result["server_lookup_indexes"] = server.lookup_indexes
        result["server_open_indexes"] = server.open_indexes
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vendors", type=int, default=1000)
    parser.add_argument("--server", action="store_true",
                        help="measure on a `chroma run` server instead of an embedded store")
    parser.add_argument("--plain-server", action="store_true",
                        help="leave the server's SQLite without the two lookup indexes its "
                             "operator adds (python -m core.store.lookups DIR)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="build in this folder and keep it (default: a temporary one)")
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        name, arguments = json.loads(args.job)
        print(json.dumps(JOBS[name](**arguments)))
        return 0
    if args.vendors < 2:
        parser.error("--vendors must be at least 2")
    folder = args.keep or Path(tempfile.mkdtemp(prefix="programme-"))
    folder.mkdir(parents=True, exist_ok=True)
    servers: list[Server] = []
    try:
        server = one_vendor_server = None
        if args.server:
            indexed = not args.plain_server
            from core.config import Settings

            bound = None if args.plain_server else Settings().store_open_indexes
            server = Server(folder / "server-store", lookup_indexes=indexed, open_indexes=bound)
            one_vendor_server = Server(folder / "one-vendor-server-store",
                                       lookup_indexes=indexed, open_indexes=bound)
            servers = [server, one_vendor_server]
        result = measure(args.vendors, folder, server, one_vendor_server)
    finally:
        for running in servers:
            running.stop()
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(result))
    RESULTS.mkdir(parents=True, exist_ok=True)
    kind = "plain-server" if args.server and args.plain_server else result["store"]
    (RESULTS / f"programme-{kind}-{args.vendors}.json").write_text(
        json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
