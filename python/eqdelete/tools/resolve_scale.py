"""The resolve scale benchmark: what ``resolve_equality_deletes`` costs when it has little to do.

Resolving every few minutes on a large table pays only if a run costs in proportion to the
deletes that arrived since the last one (the delta), not to the table. Each point is a table
(a base load, then one commit deleting 0.1% of its keys) resolved once (the **first** resolve,
every delete), then one commit of ``delta`` new equality delete rows; from that snapshot:

- the **delta resolve**, timed (median of ``runs``, the table rolled back to the snapshot
  before each), with the data files it read and the rows it resolved;
- Iceberg's ``rewrite_position_delete_files`` on the resolved table: the upkeep of the position
  deletes resolves leave behind;
- Iceberg's ``rewrite_data_files`` (``delete-file-threshold=1``: every data file a delete
  touches is rewritten) from the same snapshot, once, time-boxed.

Two axes: data rows 10^6 to 10^8 with 10^4 new delete rows, and 10^3 to 10^6 new delete rows
on 10^7 data rows. Two layouts: **scattered** (every data file a random share of the keys,
as a streaming sink writes them; the new deletes spread over all keys), where every data file
may hold a deleted key and its key column is read; and **clustered** (each data file one key
range, as a table written or compacted in key order; the new deletes on the newest keys),
where Iceberg's planning pairs the deletes with the files of their range only. Rows are
checked: eqdelete's read of the snapshot before equals Iceberg's own, and the native read
after each operation equals it.
Times are reported, never asserted.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eqdelete import _jvm
from eqdelete._progress import spark_progress, stderr_reporter
from eqdelete.tools.report import load_results, run_merged
from eqdelete.tools.cdc import LAYOUTS, CdcSpec, generate
from eqdelete.compare import ResultsDifferError, _TimeBox, fingerprint
from eqdelete.deletes import write_equality_deletes
from eqdelete.resolve import resolve_equality_deletes
from eqdelete.tools.resolve_bench import call_procedure, timed_with_peak
from eqdelete.toggles import use_strategy

AXES = ("data_rows", "delta")
DATA_AXIS = (10**6, 10**7, 10**8)
DATA_AXIS_DELTA = 10**4
DELTA_AXIS = (10**3, 10**4, 10**5, 10**6)
DELTA_AXIS_DATA_ROWS = 10**7
#: Share of the keys the history deletes before the first resolve.
HISTORY_DELETES = 0.001
DATA_ROWS_PER_FILE = 1_000_000
NAMESPACE = "local.resolve_scale"
OPERATIONS = ("delta_resolve", "rewrite_position_delete_files", "rewrite_data_files")


@dataclass(frozen=True)
class ResolvePoint:
    """A table of ``data_rows`` keys laid out as ``layout``, with ``delta`` new delete rows since
    its last resolve."""

    axis: str
    layout: str
    data_rows: int
    delta: int

    @property
    def key(self) -> str:
        return f"{self.axis}/{self.layout}/{self.data_rows}/{self.delta}"

    @property
    def size(self) -> int:
        """Where the point lies on its axis: data rows, or delta."""
        return self.data_rows if self.axis == "data_rows" else self.delta

    @property
    def spec(self) -> CdcSpec:
        return CdcSpec(table=f"{NAMESPACE}.{self.layout}_{self.data_rows}_{self.delta}", rows=self.data_rows,
                       data_files=max(2, self.data_rows // DATA_ROWS_PER_FILE), commits=1,
                       delete_fraction=HISTORY_DELETES, upsert_fraction=0.0, layout=self.layout)

    def delta_ids(self, spark: SparkSession) -> DataFrame:
        """The keys the new deletes name: spread evenly over every key (scattered), or the newest
        ``delta`` keys (clustered: the last key range)."""
        ids = spark.range(0, self.delta)
        if self.layout == "clustered":
            return ids.select((F.lit(self.data_rows - self.delta) + F.col("id")).alias("id"))
        stride = max(1, self.data_rows // self.delta)
        return ids.select((F.col("id") * stride + stride // 2).alias("id"))


def default_points(quick: bool = False) -> list[ResolvePoint]:
    """Both axes in both layouts, smallest first; ``quick``: a tiny profile checking rows (CI)."""
    if quick:
        return [ResolvePoint("data_rows", "scattered", 20_000, 200), ResolvePoint("data_rows", "clustered", 60_000, 200)]
    # The axes cross at 10^7 data rows and 10^4 new delete rows: measured once, on the data axis.
    return [ResolvePoint("data_rows", layout, n, DATA_AXIS_DELTA) for layout in LAYOUTS for n in DATA_AXIS] + [
        ResolvePoint("delta", layout, DELTA_AXIS_DATA_ROWS, d) for layout in LAYOUTS for d in DELTA_AXIS
        if d != DATA_AXIS_DELTA]


def on_axis(r: "ResolveScaleResult", axis: str) -> bool:
    """Whether ``r`` lies on ``axis``: measured on it, or the point where the axes cross."""
    return r.axis == axis or (r.data_rows, r.delta) == (DELTA_AXIS_DATA_ROWS, DATA_AXIS_DELTA)


@dataclass
class ResolveScaleResult:
    point: str
    axis: str
    layout: str
    data_rows: int
    delta: int
    data_files: int
    data_files_read: int        # by the delta resolve
    rows_resolved: int          # by the delta resolve
    first_resolve_seconds: float
    seconds: dict[str, float | None]  # median per operation; None: past the time box
    peak_heap_mb: dict[str, float]
    time_box: float

    @property
    def resolve_to_rewrite(self) -> float | None:
        rewrite = self.seconds["rewrite_data_files"]
        return None if rewrite is None else self.seconds["delta_resolve"] / rewrite


def _native(spark: SparkSession, table: str) -> tuple[int, int]:
    with use_strategy(spark, "native"):
        return fingerprint(spark.table(table))


def run_point(spark: SparkSession, point: ResolvePoint, runs: int, time_box: float,
              progress: Callable[[str], None]) -> ResolveScaleResult:
    spec, say = point.spec, (lambda m: progress(f"{point.key}: {m}"))
    table = spec.table
    say(f"generating {spec.rows:,} rows in {spec.data_files} files ({point.layout}), deleting {HISTORY_DELETES:.1%}")
    generate(spark, spec, replace=True, progress=say)
    say("the first resolve: every delete")
    first_s, _, _ = timed_with_peak(spark, lambda: resolve_equality_deletes(spark, table))
    say(f"first resolve {first_s:.1f} s; {point.delta:,} new equality delete rows")
    write_equality_deletes(spark, table, spec.key_columns, spec._rows(point.delta_ids(spark), F.lit(1)))
    start = _jvm.current_snapshot_id(spark, table)
    data_files = spark.sql(f"SELECT count(*) FROM {table}.data_files").first()[0]
    with use_strategy(spark, "auto"):
        truth = fingerprint(spark.table(table))
    if _native(spark, table) != truth:
        raise ResultsDifferError(f"{point.key}: eqdelete's read and Iceberg's own differ before resolving")

    def rolled_back() -> None:
        call_procedure(spark, "rollback_to_snapshot", table, f"snapshot_id => {start}")

    def checked(what: str) -> None:
        if _native(spark, table) != truth:
            raise ResultsDifferError(f"{point.key}: the rows read natively after {what} differ from eqdelete's read before")

    timings: dict[str, list[float]] = {"delta_resolve": [], "rewrite_position_delete_files": []}
    heap: dict[str, float] = {}
    result = None
    for run in range(1, runs + 1):
        rolled_back()
        with spark_progress(spark, say, every=15.0):
            seconds, heap["delta_resolve"], result = timed_with_peak(spark, lambda: resolve_equality_deletes(spark, table))
        timings["delta_resolve"].append(seconds)
        seconds, heap["rewrite_position_delete_files"], _ = timed_with_peak(
            spark, lambda: call_procedure(spark, "rewrite_position_delete_files", table, "options => map('rewrite-all', 'true')"))
        timings["rewrite_position_delete_files"].append(seconds)
        if run == 1:
            checked("the delta resolve and rewrite_position_delete_files")
        say(f"run {run}/{runs}: delta resolve {timings['delta_resolve'][-1]:.2f} s ({result.data_files_read:,} of "
            f"{data_files:,} data files read, {result.rows_resolved:,} rows), rewrite_position_delete_files {seconds:.2f} s")

    rolled_back()
    say(f"rewrite_data_files (time box {time_box:.0f} s)")
    rewritten: float | None = None
    with _TimeBox(spark, "rewrite_data_files", time_box), spark_progress(spark, say, every=15.0):
        rewritten, heap["rewrite_data_files"], _ = timed_with_peak(
            spark, lambda: call_procedure(spark, "rewrite_data_files", table, "options => map('delete-file-threshold', '1')"))
    if rewritten is None:
        heap["rewrite_data_files"] = _jvm.peak_heap_bytes(spark) / 2**20
    else:
        checked("rewrite_data_files")
    seconds = {name: statistics.median(values) for name, values in timings.items()} | {"rewrite_data_files": rewritten}
    assert result is not None
    outcome = ResolveScaleResult(point.key, point.axis, point.layout, point.data_rows, point.delta, data_files,
                                 result.data_files_read, result.rows_resolved, first_s, seconds, heap, time_box)
    say(", ".join(f"{name} {_seconds(outcome, name)}" for name in OPERATIONS))
    return outcome


def _seconds(r: ResolveScaleResult, name: str) -> str:
    value = r.seconds[name]
    return f"> {r.time_box:.0f} s" if value is None else f"{value:.2f} s"


def markdown(results: list[ResolveScaleResult]) -> str:
    lines = ["| axis | layout | data rows | new delete rows | data files read / all | rows resolved | first resolve s "
             "| delta resolve s | rewrite_position_delete_files s | rewrite_data_files s | resolve x rewrite_data_files "
             "| peak heap MB resolve / rewrite_data_files |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in sorted(results, key=lambda r: (r.axis, r.layout, r.data_rows, r.delta)):
        ratio = r.resolve_to_rewrite
        lines.append(
            f"| {r.axis} | {r.layout} | {r.data_rows:,} | {r.delta:,} | {r.data_files_read:,} / {r.data_files:,} | "
            f"{r.rows_resolved:,} | {r.first_resolve_seconds:.2f} | "
            + " | ".join(_seconds(r, name).removesuffix(" s") for name in OPERATIONS)
            + f" | {'-' if ratio is None else f'{ratio:.3f}'} | "
            f"{r.peak_heap_mb['delta_resolve']:,.0f} / {r.peak_heap_mb['rewrite_data_files']:,.0f} |")
    return "\n".join(lines) + "\n"


def chart(results: list[ResolveScaleResult], path: Path) -> None:
    """Log-log: seconds against data rows (fixed delta) and against delta (fixed table), a line
    per operation and layout; a time-boxed rewrite drawn at its box, hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = [a for a in AXES if any(r.axis == a for r in results)]
    fig, panels = plt.subplots(1, len(axes), figsize=(6 * len(axes), 4.2), squeeze=False)
    for panel, axis in zip(panels[0], axes):
        for layout, marker in zip(LAYOUTS, ("o", "s")):
            points = sorted((r for r in results if on_axis(r, axis) and r.layout == layout),
                            key=lambda r: r.data_rows if axis == "data_rows" else r.delta)
            xs = [r.data_rows if axis == "data_rows" else r.delta for r in points]
            for name, style in zip(OPERATIONS, ("-", ":", "--")):
                shown = [(x, r.seconds[name]) for x, r in zip(xs, points) if r.seconds[name] is not None]
                if shown:
                    panel.plot(*zip(*shown), marker=marker, linestyle=style, label=f"{name} ({layout})")
                boxed = [(x, r.time_box) for x, r in zip(xs, points) if r.seconds[name] is None]
                if boxed:
                    panel.plot(*zip(*boxed), marker="^", linestyle="none", fillstyle="none", color="black",
                               label=f"{name} ({layout}) > time box")
        panel.set_xscale("log")
        panel.set_yscale("log")
        panel.set_xlabel(f"data rows ({DATA_AXIS_DELTA:,} new delete rows)" if axis == "data_rows"
                         else f"new delete rows ({DELTA_AXIS_DATA_ROWS:,} data rows)")
        panel.set_ylabel("seconds")
        panel.set_title(f"resolve against rewriting: {axis.replace('_', ' ')}", fontsize=10)
        panel.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(spark: SparkSession, points: list[ResolvePoint], out: Path, runs: int, time_box: float,
        progress: Callable[[str], None] | None = None) -> list[ResolveScaleResult]:
    """Measure ``points``; results already in ``out`` for other points are kept beside them.
    Returns this run's results."""
    report = progress or stderr_reporter("eqdelete bench --resolve --scale")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NAMESPACE}")
    return run_merged(points, lambda p: run_point(spark, p, runs, time_box, report), {p.key for p in points},
                      out, "resolve-scale", ResolveScaleResult, markdown, chart, report)


def load(out: Path) -> list[ResolveScaleResult]:
    """The results saved in ``out``, if any."""
    return load_results(out, "resolve-scale", ResolveScaleResult)

