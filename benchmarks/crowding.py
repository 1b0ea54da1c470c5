"""The crowding curve: `evidence bench` at 1k, 10k and 100k chunks, one JSON result per
size in benchmarks/results/, then the fraction of hash-linked follow-ups each strategy
(`hybrid` among them) and the `ask` turn put in the context, per size, as crowding.json and a
plotly chart (crowding.html, and crowding.png where a Chromium is at hand to draw it).

Every size asks the same criteria, with the same answers planted in the same rounds (the
corpus draws them from a random stream of their own), so only the policy text around them
grows; crowding.json says whether the recorded runs did (`same_criteria`).

    python benchmarks/crowding.py                      # all three sizes, then the chart
    python benchmarks/crowding.py --sizes 1000 10000   # some sizes
    python benchmarks/crowding.py --chart-only         # redraw from the recorded results
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.bench.results import (  # noqa: E402
    crowding_curve,
    load_results,
    parse_result,
    result_file_name,
)
from core.config import BENCHMARK_RESULTS_DIR  # noqa: E402

DEFAULT_SIZES = (1_000, 10_000, 100_000)


def shown(path: Path) -> str:
    """A written file's path as a person reads it: from the repository when it is in it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def run_size(chunks: int, queries: int, results: Path) -> Path:
    """One `evidence bench` run, exactly as the command line runs it; its JSON line kept."""
    command = [sys.executable, "-m", "core.cli", "bench", "--chunks", str(chunks),
               "--queries", str(queries), "--format", "json"]
    print(f"$ evidence bench --chunks {chunks} --queries {queries} --format json",
          file=sys.stderr, flush=True)
    done = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"evidence bench --chunks {chunks} failed (exit {done.returncode}).")
    line = done.stdout.strip().splitlines()[-1]
    result = parse_result(line, f"the output of --chunks {chunks}")
    path = results / result_file_name(result)
    path.write_text(json.dumps(json.loads(line), indent=2) + "\n", encoding="utf-8")
    print(f"  wrote {shown(path)}", file=sys.stderr, flush=True)
    return path


def draw(results_dir: Path) -> None:
    """crowding.json, crowding.html and (with Chromium) crowding.png from the results."""
    from dashboard.charts import crowding_figure

    loaded = load_results(results_dir)
    for problem in loaded.problems:
        print(f"skipped: {problem}", file=sys.stderr)
    if not loaded.results:
        raise SystemExit(f"No bench-*.json results in {results_dir}.")
    curve = crowding_curve(loaded.results)
    if not curve["same_criteria"]:
        print("  note: the recorded sizes did not all ask the same criteria (or did not record "
              "which they asked); re-run them with the same --queries and seed.",
              file=sys.stderr)
    (results_dir / "crowding.json").write_text(json.dumps(curve, indent=2) + "\n",
                                               encoding="utf-8")
    figure = crowding_figure(curve["sizes"], curve["linked_in_context"])
    figure.write_html(results_dir / "crowding.html", include_plotlyjs="cdn")
    png = results_dir / "crowding.png"
    if _render_png(figure, png):
        print(f"  wrote {shown(png)}", file=sys.stderr)
    else:
        print("  crowding.png not drawn: no Chromium and Playwright here.", file=sys.stderr)


def _render_png(figure, target: Path) -> bool:
    """Open the chart in headless Chromium (Debian's; no browser download) and screenshot it."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return False
    if chromium is None:
        return False
    with tempfile.TemporaryDirectory() as folder:
        page_file = Path(folder) / "chart.html"
        figure.write_html(page_file, include_plotlyjs=True, full_html=True,
                          config={"staticPlot": True})
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True)
            page = browser.new_page(viewport={"width": 1000, "height": 560})
            page.goto(page_file.as_uri())
            page.wait_for_selector(".main-svg")
            page.screenshot(path=str(target), full_page=True)
            browser.close()
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--results", type=Path, default=BENCHMARK_RESULTS_DIR)
    parser.add_argument("--chart-only", action="store_true")
    args = parser.parse_args()
    args.results.mkdir(parents=True, exist_ok=True)
    if not args.chart_only:
        for size in args.sizes:
            run_size(size, args.queries, args.results)
    draw(args.results)


if __name__ == "__main__":
    main()
