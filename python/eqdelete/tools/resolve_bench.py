"""The resolve benchmark: what resolving equality deletes costs and what it buys.

For each scenario, on two identical tables (same generator, same seed): the read before
resolving under every strategy and the floor; then one table resolved by eqdelete and the other
compacted by Iceberg's ``rewrite_data_files`` (``delete-file-threshold=1``, so every file with a
delete is rewritten), each timed with the driver's peak heap; then the native read of both
afterwards against the floor. Rows are checked equal throughout; timings are reported, never
asserted. In local mode the executors share the driver's JVM, so the peak heap is theirs too.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession

from eqdelete import _jvm
from eqdelete._progress import spark_progress, stderr_reporter
from eqdelete.tools.report import run_each, saver
from eqdelete.tools.bench import QUERY, Scenario, make_floor
from eqdelete.tools.cdc import generate
from eqdelete.compare import ResultsDifferError, Variant, fingerprint, measure
from eqdelete.config import STRATEGIES
from eqdelete.resolve import resolve_equality_deletes
from eqdelete.toggles import use_strategy


@dataclass
class ResolveBenchResult:
    name: str
    description: str
    equality_delete_files: int
    rows_resolved: int
    resolve_seconds: float
    rewrite_seconds: float
    resolve_peak_heap_mb: float
    rewrite_peak_heap_mb: float
    before: dict[str, float]  # read medians before resolving: each strategy, and the floor
    after: dict[str, float]   # native read medians after: resolved, rewritten, and the floor

    @property
    def resolve_to_rewrite(self) -> float:
        return self.resolve_seconds / self.rewrite_seconds


def timed_with_peak(spark: SparkSession, action: Callable[[], object]) -> tuple[float, float, object]:
    """Seconds, the JVM's peak used heap in MB (executors too, in local mode) and the action's value."""
    _jvm.reset_peak_heap(spark)
    started = time.perf_counter()
    value = action()
    return time.perf_counter() - started, _jvm.peak_heap_bytes(spark) / 2**20, value


def call_procedure(spark: SparkSession, procedure: str, table: str, *arguments: str) -> list:
    """Runs the procedure of ``table``'s catalog (``CALL <catalog>.system.<procedure>``) on the
    table and named ``arguments`` (``"options => map(...)"``); its rows."""
    catalog, name = table.split(".", 1)
    args = ", ".join((f"table => '{name}'", *arguments))
    return spark.sql(f"CALL {catalog}.system.{procedure}({args})").collect()


def run_scenario(spark: SparkSession, scenario: Scenario, runs: int, warmup: int,
                 progress: Callable[[str], None]) -> ResolveBenchResult:
    name, table = scenario.name, scenario.spec.table
    rewritten = f"{table}_rewrite"
    say = lambda m: progress(f"{name}: {m}")  # noqa: E731
    say(f"generating two identical tables ({scenario.description})")
    generate(spark, scenario.spec, replace=True, progress=say)
    generate(spark, replace(scenario.spec, table=rewritten), replace=True, progress=say)
    floor = make_floor(spark, table)
    sql, floor_sql = QUERY.format(t=table), QUERY.format(t=floor)
    with use_strategy(spark, "native"):
        truth = fingerprint(spark.sql(floor_sql))
        if fingerprint(spark.sql(QUERY.format(t=rewritten))) != truth or fingerprint(spark.sql(sql)) != truth:
            raise ResultsDifferError(f"{name}: the generated tables differ from their floor")

    before = measure(spark, [Variant(s, s, sql) for s in STRATEGIES] + [Variant("floor", "native", floor_sql)],
                     runs=runs, warmup=warmup, progress=lambda m: say(f"before: {m}"))
    files = spark.sql(f"SELECT count(*) FROM {table}.delete_files WHERE content = 2").collect()[0][0]

    say("resolving with eqdelete")
    with spark_progress(spark, say, every=10.0):
        resolve_s, resolve_mb, result = timed_with_peak(spark, lambda: resolve_equality_deletes(spark, table))
    say("rewriting with Iceberg's rewrite_data_files")
    with spark_progress(spark, say, every=10.0):
        rewrite_s, rewrite_mb, _ = timed_with_peak(spark, lambda: call_procedure(
            spark, "rewrite_data_files", rewritten, "options => map('delete-file-threshold', '1')"))

    after = measure(spark, [Variant("resolved_native", "native", sql),
                            Variant("rewritten_native", "native", QUERY.format(t=rewritten)),
                            Variant("floor", "native", floor_sql)],
                    runs=runs, warmup=warmup, progress=lambda m: say(f"after: {m}"))
    with use_strategy(spark, "native"):
        if fingerprint(spark.sql(sql)) != truth or fingerprint(spark.sql(QUERY.format(t=rewritten))) != truth:
            raise ResultsDifferError(f"{name}: rows changed by resolving or rewriting")
    medians = lambda timings: {k: statistics.median(t.seconds) for k, t in timings.items()}  # noqa: E731
    outcome = ResolveBenchResult(name, scenario.description, files, result.rows_resolved, resolve_s, rewrite_s,
                                 resolve_mb, rewrite_mb, medians(before), medians(after))
    say(f"resolve {resolve_s:.1f}s ({outcome.resolve_to_rewrite:.2f}x rewrite_data_files {rewrite_s:.1f}s); "
        f"native after {outcome.after['resolved_native']:.2f}s vs floor {outcome.after['floor']:.2f}s")
    return outcome


def markdown(results: list[ResolveBenchResult]) -> str:
    lines = [
        "| scenario | eq delete files | rows resolved | resolve s | rewrite_data_files s | resolve x rewrite "
        "| peak heap MB resolve / rewrite | native after resolve s (x floor) | best strategy before s (x floor) "
        "| native before s (x floor) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        floor_after, floor_before = r.after["floor"], r.before["floor"]
        best = min((s for s in STRATEGIES if s != "native"), key=lambda s: r.before[s])
        lines.append(
            f"| {r.name} | {r.equality_delete_files:,} | {r.rows_resolved:,} | {r.resolve_seconds:.1f} | "
            f"{r.rewrite_seconds:.1f} | {r.resolve_to_rewrite:.2f} | {r.resolve_peak_heap_mb:,.0f} / {r.rewrite_peak_heap_mb:,.0f} | "
            f"{r.after['resolved_native']:.2f} ({r.after['resolved_native'] / floor_after:.2f}) | "
            f"{best} {r.before[best]:.2f} ({r.before[best] / floor_before:.2f}) | "
            f"{r.before['native']:.2f} ({r.before['native'] / floor_before:.2f}) |")
    return "\n".join(lines) + "\n"


def run(spark: SparkSession, scenarios: list[Scenario], out: Path, runs: int, warmup: int,
        progress: Callable[[str], None] | None = None) -> list[ResolveBenchResult]:
    report = progress or stderr_reporter("eqdelete bench --resolve")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.bench")
    save = saver(out, "resolve", markdown)

    return run_each(scenarios, lambda s: run_scenario(spark, s, runs, warmup, report), save, report, "scenario")
