"""From `git clone` to a dashboard that answers, and to the first test's result, for one or
more commits side by side (today's install against another), on this machine.

    python benchmarks/from_clone.py b533109 HEAD            # both, one after the other
    python benchmarks/from_clone.py HEAD --cold-uv-cache    # uv with an empty cache of its own

For each commit, in a fresh clone of this repository: `make dashboard` timed to the server
answering, to the indexing page and to the Criterion overview with the vendor's current answer
drawn (headless Chromium); then, in another fresh clone, `make test` timed to its first test's
result. Each time counts from the start of `git clone`. Results go to
benchmarks/results/from-clone.json (one entry per commit and run)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "from-clone.json"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
WAIT_S = 1_800
FIRST_RESULT = re.compile(rb"\[\d+ items?\]\s*\n?[^\n]*?[.FEsx]")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _clone(commit: str, into: Path) -> str:
    subprocess.run(["git", "clone", "-q", str(REPO), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "-q", commit], check=True)
    return subprocess.run(["git", "-C", str(into), "rev-parse", "--short", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("EVIDENCE_", "VIRTUAL_ENV", "UV_"))}
    return {**env, **extra}


def time_dashboard(commit: str, work: Path, env: dict[str, str]) -> dict:
    from playwright.sync_api import sync_playwright

    clone = work / "dashboard"
    started = time.monotonic()
    short = _clone(commit, clone)
    port = _free_port()
    marks: dict[str, float] = {"cloned_s": time.monotonic() - started}
    log = open(work / "dashboard.log", "wb")  # noqa: SIM115
    make = subprocess.Popen(
        ["make", "dashboard"], cwd=clone, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
        env=_env({**env, "STREAMLIT_SERVER_PORT": str(port),
                  "STREAMLIT_SERVER_ADDRESS": "127.0.0.1", "STREAMLIT_SERVER_HEADLESS": "true",
                  "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}))
    url = f"http://127.0.0.1:{port}"
    try:
        stamp = clone / ".venv" / ".installed"
        while time.monotonic() - started < WAIT_S:
            if make.poll() is not None:
                raise RuntimeError(f"make dashboard exited: {(work / 'dashboard.log').read_text()}")
            if "installed_s" not in marks and stamp.exists():
                marks["installed_s"] = time.monotonic() - started
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        marks["served_s"] = time.monotonic() - started
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                                 args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(url)
            page.get_by_role("heading", name="Indexing the sample data").first.wait_for(
                timeout=WAIT_S * 1000)
            marks["indexing_page_s"] = time.monotonic() - started
            page.get_by_role("heading", name="The vendor's current answer").first.wait_for(
                timeout=WAIT_S * 1000)
            marks["first_page_s"] = time.monotonic() - started
            browser.close()
    finally:
        _stop(make)
        log.close()
    return {"commit": short, **{k: round(v, 1) for k, v in marks.items()}}


def time_first_test(commit: str, work: Path, env: dict[str, str]) -> dict:
    clone = work / "test"
    started = time.monotonic()
    short = _clone(commit, clone)
    marks: dict[str, float] = {"cloned_s": time.monotonic() - started}
    make = subprocess.Popen(["make", "test"], cwd=clone, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env=_env({**env, "PYTHONUNBUFFERED": "1"}))
    seen = b""
    stamp = clone / ".venv" / ".installed"
    try:
        assert make.stdout is not None
        while time.monotonic() - started < WAIT_S:
            chunk = make.stdout.read1(4096)
            if not chunk:
                raise RuntimeError(f"make test ended before a test ran: {seen[-2000:]!r}")
            if "installed_s" not in marks and stamp.exists():
                marks["installed_s"] = time.monotonic() - started
            seen += chunk
            if "collected_s" not in marks and re.search(rb"\[\d+ items?\]", seen):
                marks["collected_s"] = time.monotonic() - started
            if FIRST_RESULT.search(seen):
                marks["first_test_s"] = time.monotonic() - started
                break
    finally:
        _stop(make)
    return {"commit": short, **{k: round(v, 1) for k, v in marks.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commits", nargs="+")
    parser.add_argument("--cold-uv-cache", action="store_true",
                        help="give uv an empty cache of its own, as on a new machine")
    parser.add_argument("--only", choices=["dashboard", "test"])
    args = parser.parse_args()
    runs = []
    for commit in args.commits:
        work = Path(tempfile.mkdtemp(prefix="from-clone-"))
        env = {"UV_CACHE_DIR": str(work / "uv-cache")} if args.cold_uv_cache else {}
        try:
            run = {"asked": commit, "cold_uv_cache": args.cold_uv_cache}
            if args.only != "test":
                run["dashboard"] = time_dashboard(commit, work, env)
                if args.cold_uv_cache:  # the test's clone starts as cold as the dashboard's
                    shutil.rmtree(work / "uv-cache", ignore_errors=True)
            if args.only != "dashboard":
                run["test"] = time_first_test(commit, work, env)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        run["date"] = datetime.now(UTC).isoformat(timespec="seconds")
        print(json.dumps(run), flush=True)
        runs.append(run)
    recorded = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    RESULTS.write_text(json.dumps(recorded + runs, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
