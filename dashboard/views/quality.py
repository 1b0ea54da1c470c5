"""Strategy quality: the recorded benchmarks (how many hash-linked follow-ups each strategy
keeps in the context as the corpus grows, and what each stage costs), every strategy run
live on the selected vendor's criteria, and each strategy's rank quality against the grades
people gave the vendor's excerpts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from core.bench.results import crowding_curve, parse_result
from core.bench.run import FLOOR_N_RESULTS, BenchResult
from core.config import MAX_CRITERION_CHARS
from core.errors import EvidenceError, UserInputError
from core.ingest.criteria_lists import criteria_lines
from core.outputs.quality import StrategyComparison, StrategyRun
from core.outputs.relevance import GRADE_LABELS, METRICS, ChoiceResult, deltas
from core.retrieval.strategies import DEFAULT_STRATEGY, STRATEGIES
from core.review.llm.client import LLMError
from core.review.verdicts import VerdictStatus
from dashboard import actions, charts, judging, resources, widgets
from dashboard.selection import selected_vendor
from dashboard.styles import COMPLETE_STYLE, INCOMPLETE_STYLE, NONE_STYLE
from dashboard.text import minute_utc, plain

MAX_CRITERIA = 50  # each criterion runs every strategy: 50 make 250 retrievals
FLOOR_TEXT = (f"the floor: embedding the query plus one bare ChromaDB query "
              f"(n_results={FLOOR_N_RESULTS}), no strategy logic")
X_FLOOR_HELP = ("x floor = p50 of (retrieve time - reranker model time) / p50 of "
                + FLOOR_TEXT)
NO_LINKED = "no linked follow-up"
HOW_TO_JUDGE = ("grade excerpts 0 to 3 under “Judge these excerpts” on the Criterion overview, "
                "Precedence tiers or Boosted vs unboosted pages, or run "
                "`evidence eval --judgments FILE`")
METRIC_NAMES = {"ndcg@6": "nDCG@6", "ndcg@10": "nDCG@10", "mrr": "MRR",
                "precision@6": "Precision@6", "recall@6": "Recall@6",
                "recall": "Recall (whole context)"}
DELTA_DEFAULTS = ("hybrid", "precedence")
ROW_PX = 35  # st.dataframe's row height

Labelled = tuple[str, BenchResult]  # (where it came from, the run)


def parse_criteria(text: str) -> list[str]:
    """One criterion per line, blank lines and repeats skipped; an empty or over-long list,
    or an over-long line, is refused with one sentence."""
    criteria = list(dict.fromkeys(criteria_lines(text, max_chars=MAX_CRITERION_CHARS)))
    if not criteria:
        raise UserInputError("The criteria list is empty; enter one criterion per line.")
    if len(criteria) > MAX_CRITERIA:
        raise UserInputError(f"The list holds {len(criteria)} criteria; at most {MAX_CRITERIA} "
                             "are compared at once, since each runs every strategy.")
    return criteria


def default_criteria(vendor: str | None) -> list[str]:
    """The vendor's criteria (the sample's while no vendor is chosen), plus the criterion
    typed into the sidebar if new."""
    try:
        criteria = ([e.text for e in resources.vendor_criteria(vendor)] if vendor
                    else list(resources.sample_criteria()))
    except EvidenceError:  # a vendor the store does not hold: its section says so
        criteria = list(resources.sample_criteria())
    typed = (st.session_state.get("criterion") or "").strip()
    return criteria + ([typed] if typed and typed not in criteria else [])


def read_uploads(uploads: Sequence[tuple[str, bytes]]) -> tuple[list[Labelled], list[str]]:
    """Uploaded `evidence bench --format json` results, and one sentence per file refused."""
    results, problems = [], []
    for name, data in uploads:
        try:
            results.append((f"uploaded {name}", parse_result(data, name)))
        except ValueError as exc:
            problems.append(str(exc))
    return results, problems


def run_label(source: str, result: BenchResult) -> str:
    return f"{result.chunks:,} chunks · {minute_utc(result.date, result.date)} · {source}"


def run_table(result: BenchResult) -> pd.DataFrame:
    """One row per strategy of one benchmark run."""
    return pd.DataFrame([{
        "strategy": name,
        "p50_ms": result.retrieve_ms_p50[name],
        "p95_ms": result.retrieve_ms_p95.get(name),
        "x_floor": result.ratio_to_floor.get(name),
        # A conversation's continuing turn asks no criterion: it has no linked answers.
        "linked": f"{result.linked_reached[name]}/{result.linked_expected} "
                  f"({result.linked_in_context[name]:.0%})"
                  if name in result.linked_reached else "—",
    } for name in result.retrieve_ms_p50])


def machine_text(machine: dict) -> str:
    """The machine a run was measured on, in one line."""
    parts = [
        f"{machine.get('cpus', '?')} CPUs", f"{machine.get('memory_gb', '?')} GB memory",
        str(machine.get("processor") or "unknown processor"),
        f"{machine.get('platform', 'unknown platform')}",
        f"Python {machine.get('python', '?')}",
        f"torch {machine.get('torch', '?')} ({machine.get('torch_threads', '?')} threads)",
        f"chromadb {machine.get('chromadb', '?')}",
    ]
    return ", ".join(parts)


def rounds_text(rounds: Sequence[int]) -> str:
    """'round 3', 'rounds 3, 4', or 'round 3 ×2' when one round answered twice."""
    counts = Counter(rounds)
    parts = [f"{n}" + (f" ×{c}" if c > 1 else "") for n, c in sorted(counts.items())]
    return ("round " if len(counts) == 1 else "rounds ") + ", ".join(parts)


def matrix_cell(run: StrategyRun) -> str:
    """'3/3', '1/3 (missing rounds 3, 4)', or that no follow-up is linked."""
    if not run.expected:
        return NO_LINKED
    cell = f"{run.reached}/{run.expected}"
    missing = run.missing_rounds
    return f"{cell} (missing {rounds_text(missing)})" if missing else cell


def summary_table(comparison: StrategyComparison) -> pd.DataFrame:
    """One row per strategy: linked answers reached, complete criteria, total time."""
    rows = []
    for summary in comparison.summary():
        rows.append({
            "strategy": summary.strategy,
            "linked": f"{summary.reached}/{summary.expected} ({summary.linked_in_context:.0%})",
            "complete": f"{summary.criteria_complete} of {summary.criteria_linked}",
            "p50_ms": summary.total_ms_p50,
            "p95_ms": summary.total_ms_p95,
        })
    return pd.DataFrame(rows)


def matrix_columns(strategies: Sequence[str]) -> list[str]:
    """The default strategy first (the design under review, in view without scrolling),
    then the others in their usual order."""
    return sorted(strategies, key=lambda name: name != DEFAULT_STRATEGY)


def matrix_table(comparison: StrategyComparison) -> pd.DataFrame:
    """Rows = criteria, columns = strategies, each cell the linked answers it reached."""
    columns = matrix_columns(comparison.strategies)
    rows = []
    for criterion in comparison.criteria:
        runs = {r.strategy: r for r in comparison.runs if r.criterion == criterion}
        first = next(iter(runs.values()))
        linked = (f"{first.linked}; latest {first.expected}: "
                  f"{rounds_text(first.expected_rounds)}" if first.linked else "none")
        rows.append({"Criterion": criterion, "Linked by hash": linked,
                     **{name: matrix_cell(runs[name]) for name in columns}})
    return pd.DataFrame(rows)


def text_width(cells: pd.Series) -> int:
    """Pixels for a text column: its longest cell or name, within 80..220 (left to the grid,
    some strategy columns were squeezed down to their name)."""
    longest = max([len(cells.name), *(len(str(c)) for c in cells)])
    return max(80, min(220, 7 * longest + 24))


def _cell_style(value: str) -> str:
    if value == NO_LINKED:
        return NONE_STYLE
    return INCOMPLETE_STYLE if "missing" in value else COMPLETE_STYLE


def show_benchmarks() -> None:
    """Recorded results (plus uploads): the crowding curve, then one run in detail."""
    st.subheader("Recorded benchmarks")
    folder = resources.get_workbench().settings.benchmark_results
    loaded = resources.benchmark_results()
    for problem in loaded.problems:
        st.warning(problem, icon=":material/warning:")
    files = st.file_uploader(
        "Add results from elsewhere (the JSON of `evidence bench --format json`)",
        type=["json"], accept_multiple_files=True, key="quality_uploads")
    uploaded, refused = read_uploads([(f.name, f.getvalue()) for f in files or []])
    for sentence in refused:
        st.error(sentence)
    runs: list[Labelled] = [("recorded", r) for r in loaded.results] + uploaded
    if not runs:
        st.info(f"No benchmark results are recorded in {folder} yet; these commands record "
                "them (the second at 1k, 10k and 100k chunks):")
        st.code(f"evidence bench --chunks 10000 --format json > {folder}/bench-10000.json\n"
                "python benchmarks/crowding.py", language="bash")
        return
    runs.sort(key=lambda labelled: (labelled[1].chunks, labelled[1].date))

    curve = crowding_curve([r for _, r in runs])
    st.plotly_chart(charts.crowding_figure(curve["sizes"], curve["linked_in_context"]),
                    key="crowding_figure")
    st.caption(
        "A hash-linked follow-up is a questionnaire answer that carries the criterion's hash; "
        "the latest rounds up to the cap belong in the context. Each point is the share that "
        "reached it over every benchmark criterion, from the latest run of that size ("
        + ", ".join(f"{n:,} chunks: {e} linked answers over {q} criteria"
                    for n, e, q in zip(curve["sizes"], curve["linked_expected"],
                                       curve["queries"], strict=True)) + ").")

    labels = [run_label(source, r) for source, r in runs]
    chosen = st.selectbox("Benchmark run", range(len(runs)), index=len(runs) - 1,
                          format_func=labels.__getitem__, key="quality_run_choice")
    result = runs[chosen][1]
    floor_col, ingest_col, memory_col, store_col = st.columns(4)
    floor_col.metric("Floor p50", f"{result.floor_ms_p50:.1f} ms",
                     help=f"p50 over the queries of {FLOOR_TEXT}; p95 "
                          f"{result.floor_ms_p95:.1f} ms")
    ingest_col.metric("Ingest vs raw encode", f"{result.ingest_vs_encode:.0%}",
                      help=f"ingest {result.ingest_per_s:,.0f} texts/s (read, chunk, embed, "
                           f"write) against raw encode {result.encode_per_s:,.0f} texts/s")
    memory_col.metric("Peak memory retrieving", f"{result.peak_rss_mb:,.0f} MB",
                      help="peak resident memory of a fresh process that only retrieves; "
                           f"building the store peaked at {result.ingest_peak_rss_mb:,.0f} MB")
    store_col.metric("Store on disk", f"{result.store_mb:,.0f} MB")
    reranker = (f"reranker {result.reranker.get('name')}" if result.reranker.get("ran")
                else f"no reranker ran ({result.reranker.get('reason', 'no reason given')})")
    st.caption(plain(
        f"{result.chunks:,} chunks, {result.followup_responses:,} follow-up responses, "
        f"{result.queries} criteria (seed {result.seed}), {result.embedding_model}, "
        f"{reranker}. Measured {minute_utc(result.date, result.date)} on "
        f"{machine_text(result.machine)}."))
    st.dataframe(run_table(result), hide_index=True, column_config={
        "strategy": st.column_config.TextColumn("Strategy"),
        "p50_ms": st.column_config.NumberColumn("p50 ms", format="%.1f",
                                                help="median retrieve time over the criteria"),
        "p95_ms": st.column_config.NumberColumn("p95 ms", format="%.1f"),
        "x_floor": st.column_config.NumberColumn("x floor", format="%.2f", help=X_FLOOR_HELP),
        "linked": st.column_config.TextColumn(
            "Linked follow-ups in context",
            help="hash-linked answers (latest rounds up to the cap) the context cites, "
                 "of those expected, over every criterion"),
    })
    st.plotly_chart(charts.stage_latency_figure(
        result.stage_ms_p50, result.floor_ms_p50,
        f"Median time per stage at {result.chunks:,} chunks"), key="bench_stages")
    st.caption("Each segment is one stage's p50 over the criteria, so a bar need not add up "
               "to the p50 total; model loading is left out. The dashed line is "
               f"{FLOOR_TEXT}.")


def show_comparison(vendor: str | None) -> None:
    """Every strategy on the vendor's criteria list, on demand, kept until the store changes."""
    st.subheader("Live comparison on the selected vendor")
    if not vendor:
        st.info("Pick a vendor in the sidebar.")
        return
    cap = resources.get_workbench().settings.max_followup_rounds
    st.caption(plain(
        f"Every strategy on every criterion for {vendor}. A linked answer is a follow-up "
        f"response carrying the criterion's hash; the latest {cap} rounds of them (the round "
        "cap) are expected in the context."))
    text = st.text_area("Criteria, one per line", key="quality_criteria", height=220,
                        help=f"Blank lines and repeats are skipped; at most {MAX_CRITERIA}.")
    if st.button("Compare every strategy", key="quality_compare", type="primary"):
        bar = st.progress(0.0, text="Comparing strategies...")

        def show(stage: str, done: int, total: int) -> None:
            bar.progress(min(done / total, 1.0) if total else 1.0,
                         text=f"Comparing strategies: {done} of {total} retrievals")

        try:
            criteria = parse_criteria(text)
            resources.compare(vendor, criteria, show)
            st.session_state["quality_shown"] = (vendor, tuple(criteria))
        except EvidenceError as exc:
            widgets.show_error(exc, "The comparison failed")
        finally:
            bar.empty()

    shown = st.session_state.get("quality_shown")
    if not shown or shown[0] != vendor:
        st.info(plain(f"Press the button to run every strategy on these criteria for {vendor}."))
        return
    comparison = resources.cached_comparison(*shown)
    if comparison is None:
        st.info("The store changed since the last comparison; press the button to run it "
                "again.")
        return
    try:
        edited = parse_criteria(text) != list(shown[1])
    except UserInputError:
        edited = True
    if edited:
        st.caption(f"Shown: the list as last run ({len(shown[1])} criteria); press the button "
                   "to compare the edited list.")

    st.dataframe(summary_table(comparison), hide_index=True, column_config={
        "strategy": st.column_config.TextColumn("Strategy"),
        "linked": st.column_config.TextColumn(
            "Linked answers in context",
            help="expected hash-linked answers the context cites, over every criterion"),
        "complete": st.column_config.TextColumn(
            "Criteria with every linked answer in context",
            help="of the criteria that have a linked follow-up at all"),
        "p50_ms": st.column_config.NumberColumn(
            "p50 total ms", format="%.1f", help="median retrieve time over the criteria"),
        "p95_ms": st.column_config.NumberColumn("p95 total ms", format="%.1f"),
    }, key="quality_summary")
    summaries = comparison.summary()
    st.plotly_chart(charts.stage_latency_figure(
        {s.strategy: s.stage_ms_p50 for s in summaries},
        title=f"Median time per stage, {len(comparison.criteria)} criteria on {vendor}"),
        key="live_stages")
    ran = comparison.reranker
    reranker = (f"reranker {ran.name}" if ran and ran.ran
                else f"no reranker ran ({ran.reason})" if ran else "no reranker ran")
    st.caption(plain(f"Embedding model {comparison.embedding_model}; {reranker}. No floor is "
                     "measured live; the recorded benchmarks above have one."))

    st.markdown("**Per criterion**: linked answers each strategy put in the context.")
    matrix = matrix_table(comparison)
    st.dataframe(
        matrix.style.map(_cell_style, subset=comparison.strategies), hide_index=True,
        height=ROW_PX * (len(matrix) + 1) + 3,  # every criterion, no scrolling inside
        column_config={
            **{name: st.column_config.TextColumn(width=text_width(matrix[name]))
               for name in comparison.strategies},
            "Criterion": st.column_config.TextColumn(width=280, pinned=True),
            "Linked by hash": st.column_config.TextColumn(
                width=170, help="follow-up responses carrying the criterion's hash, in all "
                                f"rounds; the latest {cap} are expected in the context"),
        }, key="quality_matrix")


HOW_TO_READ = (
    "**How to read this:** higher nDCG, MRR, precision and recall mean the excerpts judged "
    "relevant come earlier in the context, but a strategy is only safe to quote when its "
    "context holds each criterion's current answer (100%) and shows no earlier answer "
    "unmarked (0). Use **precedence** (or **hybrid**, where exact terms such as control ids "
    "matter): they meet both on every criterion; the seed strategies are here to compare.")


def relevance_table(results: Sequence[ChoiceResult]) -> pd.DataFrame:
    """One row per strategy: the judged criteria it was measured on, then each rank metric
    (the mean over the criteria with an excerpt judged relevant)."""
    return pd.DataFrame([{key: line[key] for key in (
        "strategy", "criteria", "judged", *METRICS, "linked_in_context",
        "current_answer_in_context", "earlier_unmarked")}
        for line in (r.line() for r in results)])


def metric_columns(number_format: str) -> dict[str, object]:
    return {name: st.column_config.NumberColumn(METRIC_NAMES.get(name, name),
                                                format=number_format) for name in METRICS}


def delta_table(first: ChoiceResult, second: ChoiceResult) -> pd.DataFrame:
    """One row per criterion with an excerpt judged relevant: the second choice's metrics
    minus the first's."""
    return pd.DataFrame([{"criterion": line["criterion"], **{m: line[m] for m in METRICS}}
                         for line in deltas(first, second)],
                        columns=["criterion", *METRICS])


def missed_table(result: ChoiceResult) -> pd.DataFrame:
    """The excerpts judged relevant that the strategy left out of its context, best grade
    first within each criterion."""
    return pd.DataFrame([{"criterion": c.criterion, "source": m["source"],
                          "grade": GRADE_LABELS[m["grade"]], "id": m["id"]}
                         for c in result.criteria for m in c.missed],
                        columns=["criterion", "source", "grade", "id"])


def show_deltas(by_name: dict[str, ChoiceResult]) -> None:
    """Two strategies picked on the page, their metrics per criterion, one minus the other."""
    names = list(by_name)
    st.markdown("**Per criterion, one strategy against another**")
    pick_a, pick_b = st.columns(2)
    first = pick_a.selectbox("First strategy", names, key="quality_delta_a",
                             index=names.index(DELTA_DEFAULTS[0]))
    second = pick_b.selectbox("Second strategy", names, key="quality_delta_b",
                              index=names.index(DELTA_DEFAULTS[1]))
    if first == second:
        st.info("Pick two different strategies to compare.")
        return
    st.caption(f"Each figure is {second}'s minus {first}'s: above zero, {second} ranks that "
               "criterion's judged excerpts better.")
    st.dataframe(delta_table(by_name[first], by_name[second]), hide_index=True,
                 column_config={"criterion": st.column_config.TextColumn("Criterion",
                                                                         width="large"),
                                **metric_columns("%+.3f")}, key="quality_relevance_deltas")


def show_missed(by_name: dict[str, ChoiceResult]) -> None:
    """For a picked strategy, the excerpts judged relevant that its context left out."""
    names = list(by_name)
    st.markdown("**Judged relevant, left out of the context**")
    sidebar = st.session_state.get("strategy")
    pick = st.selectbox("Strategy", names, key="quality_missed_strategy",
                        index=names.index(sidebar if sidebar in names else DEFAULT_STRATEGY))
    missed = missed_table(by_name[pick])
    if missed.empty:
        st.markdown(f"The {pick} strategy left no excerpt judged relevant out of its context.")
        return
    st.dataframe(missed, hide_index=True, column_config={
        "criterion": st.column_config.TextColumn("Criterion", width="medium"),
        "source": st.column_config.TextColumn("Source", width="medium"),
        "grade": st.column_config.TextColumn("Grade"),
        "id": st.column_config.TextColumn("Id"),
    }, key="quality_relevance_missed")


def vendor_held(vendor: str | None) -> bool:
    """Whether the store holds the sidebar's vendor; if not, one sentence says so."""
    if not vendor:
        st.info(widgets.PICK_VENDOR)
        return False
    if vendor not in resources.vendor_ids():
        st.info(plain(f"The store holds no vendor {vendor}."))
        return False
    return True


def show_relevance(vendor: str | None) -> None:
    """Every strategy's rank metrics over the vendor's judged criteria, two strategies
    compared per criterion, and what a strategy left out; measured on the cached traces,
    kept until the store or the judgments change."""
    st.subheader("Ranking quality against judgments")
    if not vendor_held(vendor):
        return
    try:
        judged = judging.person_judgments(vendor)
    except EvidenceError as exc:
        widgets.show_error(exc, "The judgments could not be read")
        return
    if not judged:
        st.info(f"No excerpt of {plain(vendor)} is judged yet: {HOW_TO_JUDGE}.")
        return
    if not any(j.grade >= 1 for j in judged):
        st.info(f"Every excerpt judged for {plain(vendor)} is graded 0 (not relevant), which "
                f"leaves nothing to measure: {HOW_TO_JUDGE}.")
        return
    try:
        results = resources.relevance(vendor, judged)
    except EvidenceError as exc:
        widgets.show_error(exc, "The measurement failed")
        return
    by_name = {r.choice.strategy: r for r in results}
    criteria = len(results[0].criteria)
    measured = len(results[0].measured)
    st.markdown(HOW_TO_READ)
    st.caption(plain(
        f"{len(judged)} excerpt{'' if len(judged) == 1 else 's'} graded by a person for "
        f"{vendor}, over {criteria} criteri{'on' if criteria == 1 else 'a'} ({measured} with "
        "an excerpt judged relevant). Each context is ranked in the order it is meant to be "
        "read: where the follow-ups take precedence (hash_extraction, tiered, precedence, "
        "hybrid), the linked answers by tier, led by the current answer, then the excerpts; "
        "otherwise the excerpts, then the follow-ups. The measures are trec_eval's: an "
        "unjudged excerpt counts as not relevant, nDCG's gain is the grade, and each figure "
        "is the mean over the criteria with an excerpt judged relevant."))
    st.dataframe(relevance_table(results), hide_index=True, column_config={
        "strategy": st.column_config.TextColumn("Strategy"),
        "criteria": st.column_config.NumberColumn(
            "Criteria", format="%d", help="criteria with an excerpt judged relevant"),
        "judged": st.column_config.NumberColumn("Judged", format="%d",
                                                help="excerpts graded, over every criterion"),
        **metric_columns("%.3f"),
        "linked_in_context": st.column_config.NumberColumn(
            "Linked answers in context", format="percent",
            help="hash-linked answers expected (the latest rounds up to the cap) that the "
                 "context holds, over the criteria with a linked answer"),
        "current_answer_in_context": st.column_config.NumberColumn(
            "Current answer in context", format="percent",
            help="judged criteria with answers whose newest answer the context holds"),
        "earlier_unmarked": st.column_config.NumberColumn(
            "Earlier answers unmarked", format="%d",
            help="earlier answers the context shows without their criterion's newest answer "
                 "beside them, labelled as earlier: a reader may quote them as current"),
    }, key="quality_relevance_metrics")
    show_deltas(by_name)
    show_missed(by_name)


def verdict_criteria(vendor: str) -> list[str]:
    """The criteria whose verdicts are shown: the sidebar's, then the list last compared."""
    typed = (st.session_state.get("criterion") or "").strip()
    shown = st.session_state.get("quality_shown")
    compared = list(shown[1]) if shown and shown[0] == vendor else []
    return list(dict.fromkeys(([typed] if typed else []) + compared))


def verdict_table(criteria: Sequence[str], strategies: Sequence[str],
                  statuses: dict[tuple[str, str], VerdictStatus | None]) -> pd.DataFrame:
    """Rows = criteria, columns = strategies, each cell the stored verdict of that strategy's
    prompt: 'MET', 'NOT_MET (stale)', or '—' where none is stored."""
    return pd.DataFrame([{"Criterion": criterion,
                          **{name: widgets.verdict_cell(statuses[(criterion, name)])
                             for name in strategies}} for criterion in criteria],
                        columns=["Criterion", *strategies])


def assess_with_every_strategy(vendor: str, criterion: str, strategies: Sequence[str]) -> None:
    """One verdict per strategy for one criterion, under a progress bar; the first failure
    stops the run with one sentence (the verdicts already given are kept)."""
    bar = st.progress(0.0, text="Assessing...")
    sent = read_back = 0
    try:
        for done, name in enumerate(strategies):
            bar.progress(done / len(strategies), text=f"Assessing with {name}...")
            verdict = actions.assess(vendor, criterion, name)
            read_back += verdict.cached
            sent += not verdict.cached
    except LLMError as exc:
        st.error(str(exc))
    except EvidenceError as exc:
        widgets.show_error(exc, "The assessment failed")
    else:
        st.success(f"Assessed with {len(strategies)} strategies: {sent} sent to the language "
                   f"model, {read_back} read back from the store (prompt already answered).")
    finally:
        bar.empty()


def show_verdicts(vendor: str | None) -> None:
    """Each strategy's stored verdict side by side, and a button to assess the sidebar's
    criterion with every strategy (when a language model is configured)."""
    st.subheader("Verdicts by strategy")
    if not vendor_held(vendor):
        return
    strategies = matrix_columns(list(STRATEGIES))
    criteria = verdict_criteria(vendor)
    st.caption("The verdict stored for each strategy's prompt: the sidebar's criterion, then "
               "the list last compared. A stale verdict answered a prompt the store no longer "
               "gives (the evidence changed since); — means none is stored. Each strategy puts "
               "different evidence in the prompt, so their verdicts can differ.")
    missing = actions.llm_missing()
    if missing:
        st.info(missing)
    typed = (st.session_state.get("criterion") or "").strip()
    if st.button("Assess the sidebar's criterion with every strategy", key="quality_assess",
                 disabled=missing is not None or not typed):
        assess_with_every_strategy(vendor, typed, strategies)
    if not criteria:
        st.info("Enter a criterion in the sidebar, or compare a list above.")
        return
    try:
        statuses = actions.verdict_statuses(vendor, criteria, strategies)
    except EvidenceError as exc:
        widgets.show_error(exc, "The verdicts could not be read")
        return
    table = verdict_table(criteria, strategies, statuses)
    st.dataframe(table, hide_index=True, height=ROW_PX * (len(table) + 1) + 3, column_config={
        "Criterion": st.column_config.TextColumn(width=280, pinned=True),
        **{name: st.column_config.TextColumn(width=max(120, 8 * len(name) + 24))
           for name in strategies},
    }, key="quality_verdicts")


def render() -> None:
    """The page: the recorded benchmarks, the live comparison, the ranking quality against
    the judgments, then the verdicts of every strategy. None needs a criterion, and the
    benchmarks need no vendor: each section has its own guard."""
    vendor = selected_vendor()
    widgets.header("Strategy quality")
    if "quality_criteria" not in st.session_state:
        st.session_state["quality_criteria"] = "\n".join(default_criteria(vendor))
    show_benchmarks()
    show_comparison(vendor)
    show_relevance(vendor)
    show_verdicts(vendor)


# Streamlit runs a page file as __main__; importing it (as the tests do) defines the functions
# above without drawing the page or opening a store.
if __name__ == "__main__":
    render()
