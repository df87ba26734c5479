"""A/B comparison of strategies on one query: same rows, median times, plan choices."""

from __future__ import annotations

import math
import random
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eqdelete import _jvm, _remote
from eqdelete._progress import stderr_reporter
from eqdelete.config import STRATEGIES
from eqdelete.decisions import Decision, decisions
from eqdelete.toggles import use_conf, use_strategy


class NoEqualityDeletesError(ValueError):
    """The query reads no Iceberg table whose planned files carry equality deletes."""


class ResultsDifferError(AssertionError):
    """Two strategies returned different rows for the same query and snapshot."""


@dataclass(frozen=True)
class StrategyRun:
    strategy: str
    seconds: list[float]
    rows: int
    fingerprint: int
    peak_heap_bytes: int | None  # None on Spark Connect: the server's heap is not the client's to read
    decisions: list[Decision] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def plan(self) -> str:
        chosen = sorted({d.strategy for d in self.decisions if d.delete_files or d.strategy != "native"})
        return ",".join(chosen) or "native"

    @property
    def delete_files(self) -> int:
        return sum(d.delete_files for d in self.decisions)

    @property
    def delete_rows(self) -> int:
        return sum(d.delete_rows for d in self.decisions)


@dataclass(frozen=True)
class Comparison:
    sql: str
    runs: list[StrategyRun]

    @property
    def identical(self) -> bool:
        return len({(r.rows, r.fingerprint) for r in self.runs}) <= 1

    def by_strategy(self, strategy: str) -> StrategyRun:
        return next(r for r in self.runs if r.strategy == strategy)

    def speedup(self, run: StrategyRun) -> float | None:
        native = next((r for r in self.runs if r.strategy == "native"), None)
        return native.median / run.median if native and run.median > 0 else None

    def render(self) -> str:
        header = f"{'strategy':<10}{'median s':>10}{'vs native':>11}{'plan':>10}{'delete files':>14}{'delete rows':>13}{'rows':>12}{'peak heap MB':>14}"
        lines = [f"query: {self.sql}", header, "-" * len(header)]
        # What the query reads: the same for every strategy, though native records no decision.
        files, rows = max(r.delete_files for r in self.runs), max(r.delete_rows for r in self.runs)
        for r in self.runs:
            speed = self.speedup(r)
            lines.append(
                f"{r.strategy:<10}{r.median:>10.3f}{(f'{speed:.2f}x' if speed else '-'):>11}{r.plan:>10}"
                f"{files:>14,}{rows:>13,}{r.rows:>12,}"
                + (f"{r.peak_heap_bytes / 2**20:>14,.0f}" if r.peak_heap_bytes is not None else f"{'-':>14}")
            )
        lines.append("results: identical across strategies" if self.identical else "RESULTS DIFFER BETWEEN STRATEGIES")
        return "\n".join(lines)

    def save_chart(self, path: str | Path) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        names = [r.strategy for r in self.runs]
        ax.bar(names, [r.median for r in self.runs], color="#4c72b0")
        ax.set_ylabel("median seconds")
        ax.set_title("eqdelete: strategies on one query", fontsize=10)
        for i, r in enumerate(self.runs):
            ax.text(i, r.median, f"{r.median:.2f}s", ha="center", va="bottom", fontsize=8)
        fig.tight_layout()
        out = Path(path)
        fig.savefig(out, dpi=120)
        plt.close(fig)
        return out


def fingerprint(df: DataFrame) -> tuple[int, int]:
    """(row count, order-independent hash of all rows): equal multisets give equal pairs."""
    hashed = df.select(F.xxhash64(*[F.col(f"`{c}`") for c in df.columns]).alias("h"))
    row = hashed.agg(F.count("*").alias("n"), F.sum(F.col("h").cast("decimal(38,0)")).alias("s")).first()
    return int(row["n"]), int(row["s"] or 0)


def _run_once(df: DataFrame) -> float:
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()  # runs the whole query, collects nothing
    return time.perf_counter() - started


@dataclass(frozen=True)
class Variant:
    """One thing to time: ``sql`` run under ``strategy`` and session settings ``conf``,
    reported as ``name``; a run past ``time_box`` seconds is cancelled (see ``measure``)."""

    name: str
    strategy: str
    sql: str
    conf: tuple[tuple[str, str], ...] = ()
    time_box: float | None = None


@dataclass(frozen=True)
class Timing:
    seconds: list[float]  # a run cancelled at its time box counts as math.inf
    peak_heap_bytes: int | None
    peak_executor_heap_bytes: int | None = None  # only where executors run in their own JVMs
    rows: list[tuple] | None = None  # with keep_rows: what the last run returned

    @property
    def timed_out(self) -> bool:
        return any(math.isinf(s) for s in self.seconds)


class _TimeBox:
    """Runs a query in a Spark job group and cancels the group ``seconds`` after it starts;
    the thread's own job group, if any, is restored after."""

    _PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")

    def __init__(self, spark: SparkSession, name: str, seconds: float | None) -> None:
        self.context, self.seconds = spark.sparkContext, seconds
        self.group = f"eqdelete-measure-{name}-{time.monotonic_ns()}"
        self.expired = threading.Event()

    def __enter__(self) -> "_TimeBox":
        self.before = {key: self.context.getLocalProperty(key) for key in self._PROPERTIES}
        self.context.setJobGroup(self.group, f"eqdelete measure ({self.seconds}s time box)", True)
        if self.seconds is not None:
            self.timer = threading.Timer(self.seconds, self._cancel)
            self.timer.daemon = True
            self.timer.start()
        return self

    def _cancel(self) -> None:
        self.expired.set()
        self.context.cancelJobGroup(self.group)

    def __exit__(self, *exc: object) -> bool:
        if self.seconds is not None:
            self.timer.cancel()
        for key, value in self.before.items():
            self.context.setLocalProperty(key, value)  # type: ignore[arg-type]
        # A run cancelled at its time box ends in Spark's cancellation error: that is the result.
        return exc[0] is not None and self.expired.is_set()

    def stage_ids(self) -> list[int]:
        tracker = self.context.statusTracker()
        ids: list[int] = []
        for job in tracker.getJobIdsForGroup(self.group):
            info = tracker.getJobInfo(job)
            ids.extend(info.stageIds if info else [])
        return ids


def measure(
    spark: SparkSession,
    variants: Sequence[Variant],
    *,
    runs: int,
    warmup: int,
    progress: Callable[[str], None] = lambda _m: None,
    seed: int = 0,
    keep_rows: bool = False,
) -> dict[str, Timing]:
    """Time every variant ``runs`` times after ``warmup`` runs each, interleaved: each round runs
    every variant once, in a fresh random order, so that JIT warm-up, caches and background
    noise fall on all of them alike instead of on whichever would run first or last.

    Each run plans the query anew (the strategy is read while optimizing), as a user's would.
    Times are taken on the client; the driver's peak heap only where the client holds the JVM
    (None on Spark Connect), and the executors' (the largest of any executor, from Spark's
    stage metrics) where they run in JVMs of their own. With ``keep_rows`` each run collects
    its rows (for a query of few rows, such as an aggregate) and keeps the last run's, sorted.
    A variant with a ``time_box`` whose
    run passes it is cancelled, counted as ``math.inf`` and not run again: one run never holds
    the whole measurement.
    """
    order = random.Random(seed)
    seconds: dict[str, list[float]] = {v.name: [] for v in variants}
    classic = not _remote.is_remote(spark)
    executors = classic and not spark.sparkContext.master.startswith("local[") and spark.sparkContext.uiWebUrl is not None
    peaks: dict[str, int | None] = {v.name: 0 if classic else None for v in variants}
    executor_peaks: dict[str, int | None] = {v.name: 0 if executors else None for v in variants}
    kept: dict[str, list[tuple] | None] = {v.name: None for v in variants}

    def once(variant: Variant) -> float:
        df = spark.sql(variant.sql)
        if not keep_rows:
            return _run_once(df)
        started = time.perf_counter()
        rows = df.collect()
        elapsed = time.perf_counter() - started
        kept[variant.name] = sorted(tuple(r) for r in rows)
        return elapsed

    def run(variant: Variant) -> float:
        if not classic:
            with use_strategy(spark, variant.strategy), use_conf(spark, variant.conf):
                return once(variant)
        _jvm.reset_peak_heap(spark)
        elapsed = math.inf  # unless the run ends before its time box
        with use_strategy(spark, variant.strategy), use_conf(spark, variant.conf), \
                _TimeBox(spark, variant.name, variant.time_box) as box:
            elapsed = once(variant)
        if box.expired.is_set():
            elapsed = math.inf
        peaks[variant.name] = max(peaks[variant.name] or 0, _jvm.peak_heap_bytes(spark))
        if executors:
            executor_peaks[variant.name] = max(executor_peaks[variant.name] or 0, _executor_peak_heap(spark, box.stage_ids()))
        return elapsed

    def boxed_out(variant: Variant) -> bool:
        return any(math.isinf(s) for s in seconds[variant.name])

    for i in range(warmup):
        for variant in variants:
            if boxed_out(variant):
                continue
            progress(f"{variant.name}: warm-up {i + 1}/{warmup}")
            if math.isinf(run(variant)):
                seconds[variant.name].append(math.inf)
    for i in range(runs):
        shuffled = list(variants)
        order.shuffle(shuffled)
        for variant in shuffled:
            if not boxed_out(variant):
                seconds[variant.name].append(run(variant))
        progress(f"round {i + 1}/{runs}: " + ", ".join(f"{v.name} {_shown(seconds[v.name][-1], v.time_box)}" for v in variants))
    return {name: Timing(values, peaks[name], executor_peaks[name], kept[name]) for name, values in seconds.items()}


def _shown(seconds: float, time_box: float | None) -> str:
    return f"> {time_box:.0f}s" if math.isinf(seconds) else f"{seconds:.3f}s"


def _executor_peak_heap(spark: SparkSession, stage_ids: list[int]) -> int:
    """The largest JVM heap any executor reported during ``stage_ids`` (Spark's REST API)."""
    import json
    import urllib.request

    base = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{spark.sparkContext.applicationId}/stages"
    peak = 0
    for stage in stage_ids:
        try:
            with urllib.request.urlopen(f"{base}/{stage}") as response:
                attempts = json.load(response)
        except OSError:
            continue  # a stage Spark skipped (its shuffle reused) has no record
        for attempt in attempts:
            metrics = attempt.get("peakExecutorMetrics") or {}
            peak = max(peak, int(metrics.get("JVMHeapMemory", 0)))
    return peak


def compare_rows(spark: SparkSession, sql: str, strategies: Sequence[str], timings: dict[str, Timing]) -> Comparison:
    """The comparison of ``timings`` (keyed by strategy), with each strategy's rows fingerprinted
    and its plan decisions recorded."""
    results = []
    for strategy in strategies:
        with use_strategy(spark, strategy):
            df = spark.sql(sql)
            rows, digest = fingerprint(df)
            timing = timings[strategy]
            results.append(StrategyRun(strategy, timing.seconds, rows, digest, timing.peak_heap_bytes, decisions(df)))
    return Comparison(sql, results)


_stderr = stderr_reporter("eqdelete compare")


def compare(
    spark: SparkSession,
    sql: str,
    strategies: Sequence[str] = STRATEGIES,
    *,
    runs: int = 3,
    warmup: int = 1,
    progress: Callable[[str], None] | None = _stderr,
    check: bool = True,
) -> Comparison:
    """Run ``sql`` under each strategy (``runs`` timed runs after ``warmup``, interleaved: see
    ``measure``), check that every strategy returns the same rows, and return the comparison
    (``render()`` prints a table).

    Raises NoEqualityDeletesError for a query reading no Iceberg table with equality deletes,
    and ResultsDifferError (after printing the table) when results differ and ``check``.
    Rows are compared exactly: a floating-point sum can differ in its last bits with the
    order rows arrive in, so compare such aggregates rounded or as integers.
    """
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown or not strategies:
        raise ValueError(f"unknown strategy {', '.join(unknown) or '(none given)'}: choose from {', '.join(STRATEGIES)}")
    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be at least 1 and warmup at least 0 (got {runs}, {warmup})")
    report = progress or (lambda _m: None)
    with use_strategy(spark, "join"):
        planned = decisions(spark.sql(sql))
    if not any(d.delete_files for d in planned):
        tables = ", ".join(sorted({d.table for d in planned})) or "none"
        raise NoEqualityDeletesError(
            "this query reads no Iceberg table with equality deletes, so there is nothing to compare "
            f"(Iceberg tables read: {tables})"
        )

    timings = measure(spark, [Variant(s, s, sql) for s in strategies], runs=runs, warmup=warmup, progress=report)
    comparison = compare_rows(spark, sql, strategies, timings)
    if check and not comparison.identical:
        report(comparison.render())
        raise ResultsDifferError(f"strategies returned different rows for: {sql}")
    return comparison
