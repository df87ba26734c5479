"""Sweeps: where filter, broadcast join, shuffled join and native cross over.

Four axes, each varied alone from a common point (100,000 delete rows in one file on one long
key): delete rows (10^2 to 10^7), delete files (1 to 1000), key columns (1 to 3) and the
type of a single key column (int, long, string, date, decimal, timestamp). Each point is a fresh table: a base load of ``base_rows``
keys, then one commit of equality deletes written through eqdelete's writer (keys spread over
twice the base's range, so about half of them delete a row). Every variant's rows are checked
against native; times are medians of interleaved runs, reported as ratios to native.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Union

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eqdelete._progress import stderr_reporter
from eqdelete.tools.report import run_each, saver
from eqdelete.tools.cdc import CdcSpec, generate
from eqdelete.compare import ResultsDifferError, Variant, fingerprint, measure
from eqdelete.decisions import decisions
from eqdelete.deletes import write_equality_deletes
from eqdelete.toggles import use_strategy

QUERY = "SELECT count(*) AS n, sum(version) AS versions, sum(region) AS regions FROM {t}"
KEY_TYPES = ("long", "string", "date")  # the key_columns axis: the first k of these
SINGLE_KEY_TYPES = ("int", "long", "string", "date", "decimal", "timestamp")  # the key_type axis
AXES = ("delete_rows", "delete_files", "key_columns", "key_type")
BROADCAST_OFF = (("spark.eqdelete.join.broadcastMaxBytes", "-1"), ("spark.sql.autoBroadcastJoinThreshold", "-1"))


def variants(sql: str) -> list[Variant]:
    """native, filter, the join broadcast and shuffled, and what auto picks."""
    return [
        Variant("native", "native", sql),
        Variant("filter", "filter", sql),
        Variant("broadcast_join", "join", sql),
        Variant("shuffled_join", "join", sql, BROADCAST_OFF),
        Variant("auto", "auto", sql),
    ]


@dataclass(frozen=True)
class SweepPoint:
    axis: str
    delete_rows: int
    delete_files: int
    key_columns: int
    key_type: str = "long"  # of a single key column; several key columns are KEY_TYPES[:key_columns]

    @property
    def value(self) -> Union[int, str]:
        return _value(self, self.axis)

    @property
    def key_types(self) -> tuple[str, ...]:
        return (self.key_type,) if self.key_columns == 1 else KEY_TYPES[: self.key_columns]


def default_points(quick: bool = False) -> list[SweepPoint]:
    if quick:  # one point per axis, for CI: it checks rows, never timings
        return [SweepPoint("delete_rows", 2_000, 1, 1), SweepPoint("delete_files", 1_000, 3, 1),
                SweepPoint("key_columns", 1_000, 1, 3), SweepPoint("key_type", 1_000, 1, 1, "string")]
    return ([SweepPoint("delete_rows", d, 1, 1) for d in (100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000)]
            + [SweepPoint("delete_files", 100_000, f, 1) for f in (10, 100, 1_000)]
            + [SweepPoint("key_columns", 100_000, 1, k) for k in (2, 3)]
            + [SweepPoint("key_type", 100_000, 1, 1, t) for t in SINGLE_KEY_TYPES])


@dataclass
class PointResult:
    axis: str
    value: Union[int, str]
    delete_rows: int
    delete_files: int
    key_columns: int
    key_type: str
    data_rows: int
    medians: dict[str, float]
    ratio_to_native: dict[str, float]
    auto_plan: str
    auto_reason: str
    identical: bool


def build(spark: SparkSession, point: SweepPoint, table: str, base_rows: int) -> CdcSpec:
    spec = CdcSpec(table=table, rows=base_rows, data_files=8, commits=0, key_types=point.key_types)
    generate(spark, spec, replace=True, progress=None)
    stride = max(2, 2 * base_rows // point.delete_rows)
    ids = spark.range(0, point.delete_rows).select((F.col("id") * stride + 1).alias("id"))
    write_equality_deletes(spark, table, spec.key_columns, spec._rows(ids, F.lit(1)), files_per_partition=point.delete_files)
    return spec


def run_point(spark: SparkSession, point: SweepPoint, table: str, base_rows: int, runs: int, warmup: int,
              progress: Callable[[str], None]) -> PointResult:
    label = f"{point.axis}={_shown(point.value)}"
    progress(f"{label}: building ({point.delete_rows:,} delete rows in {point.delete_files} file(s), "
             f"key {', '.join(point.key_types)})")
    build(spark, point, table, base_rows)
    sql = QUERY.format(t=table)
    candidates = variants(sql)
    timings = measure(spark, candidates, runs=runs, warmup=warmup, progress=lambda m: progress(f"{label}: {m}"))
    prints = {}
    for variant in candidates:
        with use_strategy(spark, variant.strategy):
            prints[variant.name] = fingerprint(spark.sql(sql))
    with use_strategy(spark, "auto"):
        auto = decisions(spark.sql(sql))
    medians = {name: statistics.median(t.seconds) for name, t in timings.items()}
    result = PointResult(
        axis=point.axis, value=point.value, delete_rows=point.delete_rows, delete_files=sum(d.delete_files for d in auto),
        key_columns=point.key_columns, key_type=",".join(point.key_types), data_rows=base_rows, medians=medians,
        ratio_to_native={k: v / medians["native"] for k, v in medians.items()},
        auto_plan=",".join(sorted({d.strategy for d in auto})), auto_reason="; ".join(d.reason for d in auto),
        identical=len(set(prints.values())) == 1,
    )
    if not result.identical:
        raise ResultsDifferError(f"sweep point {label}: variants returned different rows: {prints}")
    progress(f"{label}: " + ", ".join(f"{k} {v:.2f}x" for k, v in result.ratio_to_native.items()) + f"; auto chose {result.auto_plan}")
    return result


def markdown(results: list[PointResult]) -> str:
    names = list(results[0].medians) if results else []
    lines = ["| axis | value | delete rows | delete files | key types | " + " | ".join(f"{n} s (x native)" for n in names) + " | auto chose |",
             "| --- | ---: | ---: | ---: | --- | " + " | ".join("---:" for _ in names) + " | --- |"]
    for r in results:
        cells = [f"{r.medians[n]:.2f} ({r.ratio_to_native[n]:.2f})" for n in names]
        lines.append(f"| {r.axis} | {_shown(r.value)} | {r.delete_rows:,} | {r.delete_files:,} | {r.key_type} | "
                     + " | ".join(cells) + f" | {r.auto_plan} |")
    return "\n".join(lines) + "\n"


def _shown(value: Union[int, str]) -> str:
    return f"{value:,}" if isinstance(value, int) else value


def _value(r: Union[SweepPoint, PointResult], axis: str) -> Union[int, str]:
    return {"delete_rows": r.delete_rows, "delete_files": r.delete_files, "key_columns": r.key_columns,
            "key_type": r.key_type}[axis]


def _series(results: list[PointResult], axis: str) -> list[PointResult]:
    """The points of ``axis``, plus any other point sharing their two fixed parameters (the
    delete-rows point at 100,000 rows is also the 1-file and the 1-key point)."""
    own = [r for r in results if r.axis == axis]
    others = [a for a in AXES if a != axis]
    fixed = {tuple(_value(r, a) for a in others) for r in own}
    shared = [r for r in results if r.axis != axis and tuple(_value(r, a) for a in others) in fixed]
    by_value = {_value(r, axis): r for r in shared + own}
    return [by_value[v] for v in sorted(by_value)]


def chart(results: list[PointResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = [a for a in AXES if any(r.axis == a for r in results)]
    fig, plots = plt.subplots(1, len(axes), figsize=(4.5 * len(axes), 3.6), squeeze=False)
    for plot, axis in zip(plots[0], axes):
        points = _series(results, axis)
        for name in points[0].medians:
            plot.plot([_value(r, axis) for r in points], [r.ratio_to_native[name] for r in points], marker="o", label=name)
        if axis in ("delete_rows", "delete_files"):
            plot.set_xscale("log")
        plot.axhline(1.0, color="grey", linewidth=0.8)
        plot.set_xlabel(axis.replace("_", " "))
        plot.set_ylabel("median time / native")
        plot.set_title(f"sweep: {axis.replace('_', ' ')}", fontsize=10)
    plots[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(spark: SparkSession, points: list[SweepPoint], out: Path, base_rows: int, runs: int, warmup: int,
        progress: Callable[[str], None] | None = None) -> list[PointResult]:
    report = progress or stderr_reporter("eqdelete sweep")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.sweep")
    save = saver(out, "sweep", markdown)

    results = run_each(points, lambda p: run_point(spark, p, "local.sweep.point", base_rows, runs, warmup, report),
                       save, report, "point")
    chart(results, out / "sweep.png")
    return results
