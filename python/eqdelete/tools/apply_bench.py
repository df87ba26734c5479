"""The sink benchmark (``bench --apply``): what ``apply_changes`` costs per batch as the copy
grows, beside ``MERGE INTO``.

At each size and key, a scattered table (keys spread over every data file, as an upsert writer
leaves them) is generated, and a copy of it is made for each variant run (``--only``), merge-on-read like it. Then, for
``warmup`` + ``runs`` rounds: one commit of ``upserts`` upserts is written to the table (not
timed), its changes read once (``eqdelete.changes`` with ``compute_updates``, checkpointed: the sink
is timed, not the changes), and applied to each copy, in an order that turns each round:

- ``apply_keys``: ``apply_changes(changes, copy, keys=<the key columns>)``;
- ``apply``: ``apply_changes(changes, copy)``, rows matched whole, the copy read whole;
- ``merge``: ``MERGE INTO copy USING <the changes' new images> ON <the key>``: update the
  matched row, insert the others (Spark's own MERGE, merge-on-read, what a user writes without
  eqdelete; it matches by key, where ``apply_changes`` matches whole rows and counts them);
- ``apply_kept``: ``apply_changes(changes, copy, keys=...)`` with ``spark.eqdelete.sink.keptRows``:
  the rows removed looked up in the copy's rows kept by key, not read from the copy. The first
  round (a warm-up) builds them: its time is reported apart (``kept_first_s``).

After the rounds each copy must hold the table's rows (as multisets), else the run fails.
Timings are reported, never asserted.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession

import eqdelete
from eqdelete import _jvm
from eqdelete._progress import stderr_reporter
from eqdelete.compare import ResultsDifferError, fingerprint
from eqdelete.tools.cdc import CdcSpec, generate, write_commit
from eqdelete.tools.report import run_each, saver

SIZES = (10**6, 10**7, 10**8)
#: Key shapes, as ``bench --scale --keys`` names them: the generator's key types of each.
KEYS: dict[str, tuple[str, ...]] = {"long": ("long",), "uuid": ("uuid_string",), "composite": ("long", "string", "date")}
UPSERTS = 10**4
#: Rows per data file, as a writer's target file size gives them.
ROWS_PER_FILE = 500_000
VARIANTS = ("apply_keys", "apply", "merge", "apply_kept")


def _balanced_orders(n: int) -> tuple[tuple[int, ...], ...]:
    """A Williams square of ``n`` (even): ``n`` orders in which each item comes first once and
    follows each other item once."""
    first = [0] + [(i + 1) // 2 if i % 2 else n - i // 2 for i in range(1, n)]
    return tuple(tuple((f + r) % n for f in first) for r in range(n))


#: The orders rounds take the variants in: each first once and right after each other once in
#: every len(VARIANTS) rounds.
ORDERS = tuple(tuple(VARIANTS[i] for i in order) for order in _balanced_orders(len(VARIANTS)))
KEPT_ROWS = "spark.eqdelete.sink.keptRows"
#: The copies' properties: merge-on-read, as the table and the issue's MERGE INTO.
COPY_PROPERTIES = ("'format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
                   "'write.merge.mode'='merge-on-read'")


@dataclass
class ApplyPoint:
    rows: int
    keys: str = "long"
    upserts: int = UPSERTS

    @property
    def table(self) -> str:
        return f"local.bench.apply_{self.keys}_{self.rows}"


@dataclass
class ApplyBenchResult:
    rows: int
    keys: str
    upserts: int
    data_files: int
    changed_rows: int  # the rows of one commit's changes (UPDATE_BEFORE and UPDATE_AFTER, INSERT, DELETE), median
    medians: dict[str, float]  # VARIANTS -> seconds
    kept_first_s: float | None = None  # the first apply_kept: building the kept rows, then applying


def default_points(quick: bool, sizes: tuple[int, ...] | None = None, keys: tuple[str, ...] = tuple(KEYS)) -> list[ApplyPoint]:
    if quick:  # the rows checked: by default for the composite key (narrowed by three columns)
        return [ApplyPoint(n, k, upserts=100) for k in (keys if keys != tuple(KEYS) else ("composite",))
                for n in (sizes or (10**4,))]
    return [ApplyPoint(n, k) for k in keys for n in (sizes or SIZES)]


def _merge_sql(copy: str, view: str, key_columns: list[str], columns: list[str]) -> str:
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in key_columns)
    values = ", ".join(f"s.`{c}`" for c in columns)
    names = ", ".join(f"`{c}`" for c in columns)
    assignments = ", ".join(f"t.`{c}` = s.`{c}`" for c in columns)
    return (f"MERGE INTO {copy} t USING {view} s ON {on} "
            f"WHEN MATCHED AND s._change_type = 'DELETE' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {assignments} "
            f"WHEN NOT MATCHED AND s._change_type <> 'DELETE' THEN INSERT ({names}) VALUES ({values})")


def _timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def chosen_variants(only: str | None) -> tuple[str, ...]:
    """The variants ``only`` names (comma-separated), in VARIANTS' order; all of them for None."""
    if not only:
        return VARIANTS
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not names:
        raise ValueError(f"bench --apply --only takes variants among {', '.join(VARIANTS)}, not {only!r}")
    return tuple(v for v in VARIANTS if v in names)


def run_point(spark: SparkSession, point: ApplyPoint, runs: int, warmup: int,
              progress: Callable[[str], None], variants: tuple[str, ...] = VARIANTS) -> ApplyBenchResult:
    say = lambda m: progress(f"{point.keys} key, {point.rows:,} rows: {m}")  # noqa: E731
    files = max(2, point.rows // ROWS_PER_FILE)
    spec = CdcSpec(point.table, rows=point.rows, data_files=files, commits=0, delete_fraction=0.0,
                   upsert_fraction=point.upserts / point.rows, key_types=KEYS[point.keys], layout="scattered",
                   seed=point.rows)
    say(f"generating a scattered table of {files} data files")
    generate(spark, spec, replace=True, progress=say)
    copies = {v: f"{point.table}_{v}" for v in variants}
    for variant, copy in copies.items():
        say(f"copying it for {variant}")
        spark.sql(f"CREATE OR REPLACE TABLE {copy} USING iceberg TBLPROPERTIES ({COPY_PROPERTIES}) "
                  f"AS SELECT * FROM {point.table}")
    keys, columns = spec.key_columns, spark.table(point.table).columns
    view = "eqdelete_apply_bench_changes"
    timings: dict[str, list[float]] = {v: [] for v in variants}
    changed: list[int] = []
    kept_first: float | None = None
    previous = _jvm.current_snapshot_id(spark, point.table)
    for n in range(warmup + runs):
        write_commit(spark, spec, n + 1)
        latest = _jvm.current_snapshot_id(spark, point.table)
        # Computed once, in the partitions a micro-batch's query gives them (adaptive execution's), so
        # that the sink is timed and not the changes.
        changes: DataFrame = eqdelete.changes(spark, point.table, start_snapshot_id=previous, end_snapshot_id=latest,
                                              compute_updates=True, identifier_columns=keys).localCheckpoint()
        changed.append(changes.count())
        changes.where("_change_type <> 'UPDATE_BEFORE'").createOrReplaceTempView(view)
        runners: dict[str, Callable[[], object]] = {
            "apply_keys": lambda: eqdelete.apply_changes(changes, copies["apply_keys"], keys=keys),
            "apply": lambda: eqdelete.apply_changes(changes, copies["apply"]),
            "merge": lambda: spark.sql(_merge_sql(copies["merge"], view, keys, columns)).collect(),
            "apply_kept": lambda: _with_kept_rows(spark, lambda: eqdelete.apply_changes(changes, copies["apply_kept"], keys=keys)),
        }
        # Every order of the variants in turn, so that each follows each other as often: the first
        # apply after other work ran with twice the CPU (likely: the second finds its generated code compiled), and a
        # rotation had `apply_keys` always follow MERGE or the commit.
        # (Those orders with only the variants chosen.)
        seconds = {v: _timed(runners[v]) for v in ORDERS[n % len(ORDERS)] if v in copies}
        previous = latest
        if n == 0:
            kept_first = seconds.get("apply_kept")
        if n >= warmup:
            for v in variants:
                timings[v].append(seconds[v])
        say(("warm-up: " if n < warmup else f"round {n - warmup + 1}/{runs}: ") + f"{changed[-1]:,} change rows; " +
            ", ".join(f"{v} {seconds[v]:.2f}s" for v in variants))
    expected = fingerprint(spark.table(point.table))
    for variant, copy in copies.items():
        spark.sql(f"REFRESH TABLE {copy}")
        got = fingerprint(spark.table(copy))
        if got != expected:
            raise ResultsDifferError(f"{copy} ({variant}) holds {got} after the rounds, the table {expected}")
    medians = {v: statistics.median(t) for v, t in timings.items()}
    say(", ".join(f"{v} {s:.2f}s" for v, s in medians.items()) + "; every copy holds the table's rows")
    return ApplyBenchResult(point.rows, point.keys, point.upserts, files, int(statistics.median(changed)), medians,
                            kept_first)


def _with_kept_rows(spark: SparkSession, apply: Callable[[], object]) -> object:
    with eqdelete.use_conf(spark, [(KEPT_ROWS, "true")]):
        return apply()


def markdown(results: list[ApplyBenchResult]) -> str:
    lines = ["| key | copy rows | data files | upserts | change rows | apply_changes with keys s | without keys s | "
             "MERGE INTO s | with keys, kept rows s | kept: first apply (the build) s | kept / at the key's smallest | "
             "with keys / without |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    smallest: dict[str, float] = {}
    for r in results:
        keyed, plain, merge, kept = (r.medians.get(v) for v in VARIANTS)
        first = smallest.setdefault(r.keys, kept or 0.0)
        def s(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.2f}"
        lines.append(f"| {r.keys} | {r.rows:,} | {r.data_files:,} | {r.upserts:,} | {r.changed_rows:,} | {s(keyed)} | "
                     f"{s(plain)} | {s(merge)} | {s(kept)} | {s(r.kept_first_s)} | "
                     f"{s(kept / first if kept and first else None)} | {s(keyed / plain if keyed and plain else None)} |")
    return "\n".join(lines) + "\n"


def run(spark: SparkSession, points: list[ApplyPoint], out: Path, runs: int, warmup: int,
        progress: Callable[[str], None] | None = None, variants: tuple[str, ...] = VARIANTS) -> list[ApplyBenchResult]:
    """Measure ``points``; ``variants``: those of VARIANTS to run (at 10^8 rows MERGE INTO takes
    minutes a round)."""
    report = progress or stderr_reporter("eqdelete bench --apply")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.bench")
    save = saver(out, "apply", markdown)
    return run_each(points, lambda p: run_point(spark, p, runs, warmup, report, variants), save, report, "point")
