"""The position delete compaction benchmark: what keeping a format v2 table's position delete
files compacted costs as a live table's deletes pile up, maintain's compaction against Iceberg's
``rewrite_position_delete_files``.

Each round of ``maintain`` on v2 writes a partition-wide position delete file, which every reader
of the partition's data files opens; once a reader would open
``spark.eqdelete.maintain.compactPositionDeleteFiles`` of them (10 by default) they are compacted.
Iceberg's action rewrites every position delete file of the partition each time, so a
compaction's cost follows all the deletes the table has resolved. maintain's compaction splits
the partition-wide files into each data file's own and merges them with as few of its older own
files as its size tiers pick, so its cost follows the deletes since the last one.

Each point is a scattered v2 table of ``data_rows`` rows (``rows_per_file`` a data file). The
same history runs twice from the table as generated: ``rounds`` rounds, each one commit of
``delete_rows`` equality delete rows spread over all keys and a resolve (maintain with its
compaction off, not timed); whenever a reader would open the setting's number of files, the
compaction, timed: **Iceberg's** (``rewrite_position_delete_files``, ``rewrite-all``) in one run,
**maintain's** (a round of maintain with nothing to resolve) in the other. Each compaction's
seconds, files removed and written, and position delete rows written (its snapshot's summary)
are reported by the deletes resolved so far; both runs must leave the same rows, which a native
read checks against eqdelete's read before the first compaction plus the deletes. Times are
reported, never asserted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eqdelete import _jvm
from eqdelete._progress import stderr_reporter
from eqdelete.compare import ResultsDifferError, fingerprint
from eqdelete.deletes import write_equality_deletes
from eqdelete.maintain import maintain_round
from eqdelete.status import status
from eqdelete.tools.cdc import CdcSpec, generate
from eqdelete.tools.report import ScatteredPoint, load_results, run_merged
from eqdelete.tools.resolve_bench import call_procedure
from eqdelete.toggles import use_conf, use_strategy

NAMESPACE = "local.compaction_bench"
THRESHOLD = 10
KINDS = ("iceberg", "maintain")


@dataclass(frozen=True)
class CompactionPoint(ScatteredPoint):
    """A scattered v2 table of ``data_rows`` rows; ``rounds`` rounds of ``delete_rows`` new delete rows."""

    data_rows: int
    rounds: int = 150
    delete_rows: int = 10_000
    rows_per_file: int = 100_000
    threshold: int = THRESHOLD   # spark.eqdelete.maintain.compactPositionDeleteFiles

    @property
    def spec(self) -> CdcSpec:
        return CdcSpec(table=f"{NAMESPACE}.scattered_{self.data_rows}", rows=self.data_rows,
                       data_files=max(2, self.data_rows // self.rows_per_file), commits=1,
                       delete_fraction=0.0, upsert_fraction=0.0, layout="scattered", format_version=2)


def default_points(quick: bool = False) -> list[CompactionPoint]:
    """10^7 rows in 100 files, 150 rounds of 10^4 new delete rows; ``quick``: a tiny profile checking rows (CI)."""
    if quick:
        return [CompactionPoint(20_000, rounds=8, delete_rows=50, rows_per_file=2_000, threshold=4)]
    return [CompactionPoint(10**7, rounds=150)]


@dataclass
class Compaction:
    """One compaction of one run: after ``rounds_before`` rounds, ``deletes_before`` position deletes resolved."""

    kind: str
    rounds_before: int
    deletes_before: int
    seconds: float
    files_removed: int
    files_added: int
    rows_written: int


@dataclass
class CompactionResult:
    point: str
    data_rows: int
    data_files: int
    delete_rows: int
    rounds: int
    compactions: list[Compaction] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.compactions = [c if isinstance(c, Compaction) else Compaction(**c) for c in self.compactions]

    def of(self, kind: str) -> list[Compaction]:
        return [c for c in self.compactions if c.kind == kind]


def _summary(spark: SparkSession, table: str) -> dict[str, str]:
    row = spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first()
    return dict(row[0]) if row else {}


def _due(spark: SparkSession, table: str, threshold: int) -> bool:
    with use_conf(spark, [("spark.eqdelete.maintain.compactPositionDeleteFiles", str(threshold))]):
        [row] = status(spark, table)
    return "compact position delete files" in row.next


def run_history(spark: SparkSession, point: CompactionPoint, kind: str, start: int,
                say: Callable[[str], None]) -> tuple[list[Compaction], tuple[int, int]]:
    """One run of the point's history from snapshot ``start``, compacting with ``kind``; its compactions and the rows left."""
    table = point.spec.table
    call_procedure(spark, "rollback_to_snapshot", table, f"snapshot_id => {start}")
    compactions: list[Compaction] = []
    resolved = 0
    for batch in range(1, point.rounds + 1):
        stride = max(1, point.data_rows // point.delete_rows)
        offset = (batch * 7919) % stride
        ids = spark.range(0, point.delete_rows).select((F.col("id") * stride + offset).alias("id"))
        write_equality_deletes(spark, table, point.spec.key_columns, point.spec._rows(ids, F.lit(1)))
        with use_conf(spark, [("spark.eqdelete.maintain.compactPositionDeleteFiles", "0")]):
            resolved += maintain_round(spark, table).rows_resolved
        if not _due(spark, table, point.threshold):
            continue
        started = time.perf_counter()
        if kind == "iceberg":
            call_procedure(spark, "rewrite_position_delete_files", table, "options => map('rewrite-all', 'true')")
        else:
            with use_conf(spark, [("spark.eqdelete.maintain.compactPositionDeleteFiles", str(point.threshold))]):
                round_ = maintain_round(spark, table)
            if not round_.position_delete_files_compacted:
                raise ResultsDifferError(f"{point.key}: maintain's round did not compact where status said it was due: {round_.render()}")
        seconds = time.perf_counter() - started
        summary = _summary(spark, table)
        compactions.append(Compaction(kind, batch, resolved, seconds, int(summary.get("removed-position-delete-files", 0)),
                                      int(summary.get("added-position-delete-files", 0)),
                                      int(summary.get("added-position-deletes", 0))))
        c = compactions[-1]
        say(f"{kind}: compaction after round {batch} ({resolved:,} deletes resolved): {seconds:.2f} s, "
            f"{c.files_removed:,} files into {c.files_added:,}, {c.rows_written:,} rows written")
    with use_strategy(spark, "native"):
        return compactions, fingerprint(spark.table(table))


def run_point(spark: SparkSession, point: CompactionPoint, progress: Callable[[str], None]) -> CompactionResult:
    spec, say = point.spec, (lambda m: progress(f"{point.key}: {m}"))
    say(f"generating {spec.rows:,} rows in {spec.data_files} files (scattered, format v2)")
    generate(spark, spec, replace=True, progress=say)
    table = spec.table
    start = _jvm.current_snapshot_id(spark, table)
    data_files = spark.sql(f"SELECT count(*) FROM {table}.data_files").first()[0]
    result = CompactionResult(point.key, point.data_rows, data_files, point.delete_rows, point.rounds)
    rows: dict[str, tuple[int, int]] = {}
    for kind in KINDS:
        compactions, rows[kind] = run_history(spark, point, kind, start, say)
        result.compactions += compactions
    if len(set(rows.values())) != 1:
        raise ResultsDifferError(f"{point.key}: the rows after the history differ between the compactions: {rows}")
    return result


def markdown(results: list[CompactionResult]) -> str:
    """Per table, the two runs' compactions side by side in order (they come after different
    rounds once maintain's leave a data file several files), then each run's totals."""
    lines = ["| data rows | data files | compaction | Iceberg's: after round | s | files in / out | rows written "
             "| maintain's: after round | s | files in / out | rows written |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def cells(c: Compaction | None) -> str:
        return (f"{c.rounds_before} | {c.seconds:.2f} | {c.files_removed:,} / {c.files_added:,} | {c.rows_written:,}"
                if c else " | | | ")

    def total(cs: list[Compaction]) -> str:
        return (f"{len(cs)} | {sum(c.seconds for c in cs):.1f} | {sum(c.files_removed for c in cs):,} / "
                f"{sum(c.files_added for c in cs):,} | **{sum(c.rows_written for c in cs):,}**")

    for r in sorted(results, key=lambda r: r.data_rows):
        iceberg, ours = r.of("iceberg"), r.of("maintain")
        for i in range(max(len(iceberg), len(ours))):
            head = f"| {r.data_rows:,} | {r.data_files:,} " if i == 0 else "| | "
            lines.append(f"{head}| {i + 1} | {cells(iceberg[i] if i < len(iceberg) else None)} "
                         f"| {cells(ours[i] if i < len(ours) else None)} |")
        lines.append(f"| | | **all** ({r.rounds} rounds of {r.delete_rows:,}) | {total(iceberg)} | {total(ours)} |")
    return "\n".join(lines) + "\n"


def chart(results: list[CompactionResult], path: Path) -> None:
    """A compaction's seconds against the deletes resolved before it, a line per compaction and table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.4))
    for r, color in zip(sorted(results, key=lambda r: r.data_rows), ("tab:blue", "tab:orange", "tab:green")):
        for kind, style in (("iceberg", "-"), ("maintain", "--")):
            points = r.of(kind)
            label = "Iceberg's rewrite_position_delete_files" if kind == "iceberg" else "maintain's compaction"
            ax.plot([c.deletes_before for c in points], [c.seconds for c in points], marker="o", linestyle=style,
                    color=color, label=f"{label}, {r.data_rows:,} rows")
    ax.set_xlabel("position deletes resolved before the compaction")
    ax.set_ylabel("seconds a compaction")
    ax.set_title("compacting a v2 table's position delete files as its deletes pile up", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(spark: SparkSession, points: list[CompactionPoint], out: Path,
        progress: Callable[[str], None] | None = None) -> list[CompactionResult]:
    """Measure ``points``; results already in ``out`` for other points are kept beside them."""
    report = progress or stderr_reporter("eqdelete bench --compaction")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NAMESPACE}")
    return run_merged(points, lambda p: run_point(spark, p, report), {p.key for p in points},
                      out, "compaction", CompactionResult, markdown, chart, report)


def load(out: Path) -> list[CompactionResult]:
    """The results saved in ``out``, if any."""
    return load_results(out, "compaction", CompactionResult)
