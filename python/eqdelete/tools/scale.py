"""The scale benchmark: how each strategy's cost grows with the data and with the deletes.

Two axes, each a series of fresh tables, every point measured in one interleaved run:

- **data rows** 10^6, 10^7, 10^8 in a streaming-upsert shape: a base load, then 20 commits
  that delete 0.1% and upsert 0.4% of the keys in all, so delete rows are 0.5% of data rows;
- **delete rows** 10^5, 10^6, 10^7 and 3x10^7 on a 10^7-row table: one commit of equality
  deletes in files of about 10^6 rows, keys spread over twice the deleted range so about half
  of them delete a row (at 3x10^7 more delete rows than data rows).

Each axis for a key shape (``KEY_SHAPES``): one long column (the default), one string column,
or three columns (long, string, date), the usual key of a CDC table copied from a relational
database. The string and three-column keys get the filter's hashed index where a long key may
get the primitive table or the key bitmap; their delete axis stops at 10^7 delete rows.

Beside every strategy, the references: the **floor** (the live rows compacted, computed from
the generator's rules without Iceberg's delete handling), **floor_keys** (the floor's query
also reading the key column), **deletes_read** (Spark reading every live delete file's key
column once) and the **limit** for applying deletes, floor_keys + deletes_read. Beside them
**data_read**, the query over every row of every live data file, deletes ignored, key column
included: what any strategy reads of the data where no file can be skipped (where most rows
are deleted, far more than floor_keys reads). Each strategy
is reported as x floor, x limit and x native; native is time-boxed and shown as "> N s" past it.
Every strategy's rows are checked against the floor's; times are never asserted.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eqdelete._progress import stderr_reporter
from eqdelete.tools.report import load_results, run_merged
from eqdelete.tools.bench import QUERY, reading_keys
from eqdelete.tools.cdc import CdcSpec, generate
from eqdelete.compare import Timing, Variant, measure
from eqdelete.config import STRATEGIES
from eqdelete.decisions import decisions
from eqdelete.deletes import write_equality_deletes
from eqdelete.toggles import use_strategy

AXES = ("data_rows", "delete_rows")
DATA_AXIS = (10**6, 10**7, 10**8)
DELETE_AXIS = (10**5, 10**6, 10**7, 3 * 10**7)
DELETE_AXIS_DATA_ROWS = 10**7
#: Per commit, 20 commits: 0.1% of keys deleted and 0.4% upserted in all.
UPSERT_COMMITS, DELETE_PER_COMMIT, UPSERT_PER_COMMIT = 20, 0.00005, 0.0002
DELETE_ROWS_PER_FILE = 1_000_000
DATA_ROWS_PER_FILE = 2_500_000
REFERENCES = ("floor", "floor_keys", "deletes_read", "data_read")
NAMESPACE = "local.scale"
#: Iceberg's own reader keeps every delete row a task applies as a record in a hash set: about
#: this many bytes a row (record, values, boxed key, wrapper, map entry), in each running task.
NATIVE_BYTES_PER_DELETE_ROW = 150
DELETES_VIEW = "eqdelete_scale_delete_keys"
DATA_VIEW = "eqdelete_scale_data_rows"
#: Key shapes an axis can be run with: the generator's key types of each.
KEY_SHAPES: dict[str, tuple[str, ...]] = {"long": ("long",), "string": ("string",), "uuid": ("uuid_string",),
                                          "uuid_type": ("uuid",), "composite": ("long", "string", "date")}
#: The delete axis of the hashed index's shapes: to 10^7 delete rows.
HASHED_DELETE_AXIS = tuple(d for d in DELETE_AXIS if d <= 10**7)
REFERENCE_STYLES = {"floor": {"linestyle": ":", "color": "grey"}, "floor_keys": {"linestyle": "--", "color": "grey"},
                    "data_read": {"linestyle": ":", "color": "black"}, "limit": {"linestyle": "-.", "color": "black"}}


def shape_suffix(keys: str, separator: str) -> str:
    """What a key shape adds to a table's or a result's name: ``separator`` and the shape, nothing for
    the long key (whose tables and results keep the names they had before key shapes)."""
    return "" if keys == "long" else f"{separator}{keys}"


@dataclass(frozen=True)
class ScalePoint:
    """One table of an axis: ``data_rows`` keys in the base load and about ``delete_rows``
    equality delete rows, keyed as ``keys`` (a ``KEY_SHAPES`` name) says."""

    axis: str
    data_rows: int
    delete_rows: int
    keys: str = "long"

    @property
    def table(self) -> str:
        return f"{NAMESPACE}.{self.axis}_{self.data_rows}_{self.delete_rows}" + shape_suffix(self.keys, "_")

    @property
    def label(self) -> str:
        keyed = "" if self.keys == "long" else f", {self.keys} key"
        return f"{self.axis}: {self.data_rows:,} data rows, {self.delete_rows:,} delete rows{keyed}"

    @property
    def spec(self) -> CdcSpec:
        files = max(2, self.data_rows // DATA_ROWS_PER_FILE)
        key_types = KEY_SHAPES[self.keys]
        if self.axis == "data_rows":
            return CdcSpec(table=self.table, rows=self.data_rows, data_files=files, commits=UPSERT_COMMITS,
                           delete_fraction=DELETE_PER_COMMIT, upsert_fraction=UPSERT_PER_COMMIT, key_types=key_types)
        return CdcSpec(table=self.table, rows=self.data_rows, data_files=files, commits=0, key_types=key_types)

    def key(self, master: str) -> str:
        """The point on ``master``, as results name it: a later run of it replaces the earlier.
        The long key's points keep the names they had before key shapes."""
        return f"{self.axis}/{self.data_rows}/{self.delete_rows}/{master}" + shape_suffix(self.keys, "/")

    @property
    def size(self) -> int:
        """Where the point lies on its axis: data rows, or delete rows."""
        return self.data_rows if self.axis == "data_rows" else self.delete_rows

    @property
    def stride(self) -> int:
        """Delete axis: the i-th delete row deletes key i * stride + 1 (of the base's 0 .. rows - 1)."""
        return max(2, 2 * self.data_rows // self.delete_rows)


def default_points(quick: bool = False, delete_axis_data_rows: int | None = None, keys: str = "long") -> list[ScalePoint]:
    """Every point of both axes for the key shape ``keys``, smallest first; ``quick``: a tiny
    profile checking rows only (CI); ``delete_axis_data_rows``: the delete axis's table, 10^7
    keys unless given (not in ``quick``)."""
    if keys not in KEY_SHAPES:
        raise ValueError(f"unknown key shape {keys!r}: choose from {', '.join(KEY_SHAPES)}")
    if quick:
        return [ScalePoint("data_rows", 20_000, 100, keys), ScalePoint("data_rows", 60_000, 300, keys),
                ScalePoint("delete_rows", 20_000, 2_000, keys), ScalePoint("delete_rows", 20_000, 60_000, keys)]
    delete_axis = DELETE_AXIS if keys == "long" else HASHED_DELETE_AXIS
    return ([ScalePoint("data_rows", n, int(n * UPSERT_COMMITS * (DELETE_PER_COMMIT + UPSERT_PER_COMMIT)), keys)
             for n in DATA_AXIS]
            + [ScalePoint("delete_rows", delete_axis_data_rows or DELETE_AXIS_DATA_ROWS, d, keys) for d in delete_axis])


@dataclass
class ScaleResult:
    point: str  # which point, on which master: a later run of the same point replaces it
    axis: str
    data_rows: int
    delete_rows: int
    delete_files: int
    master: str
    time_box: float
    medians: dict[str, float | None]  # None: past the time box, or not run (see not_run)
    limit: float
    x_floor: dict[str, float | None] = field(default_factory=dict)
    x_limit: dict[str, float | None] = field(default_factory=dict)
    x_native: dict[str, float | None] = field(default_factory=dict)
    peak_heap_mb: dict[str, float | None] = field(default_factory=dict)
    peak_executor_heap_mb: dict[str, float | None] = field(default_factory=dict)
    auto_plan: str = ""
    auto_reason: str = ""
    identical: bool = False  # eqdelete's strategies' rows against the floor
    not_run: dict[str, str] = field(default_factory=dict)  # variant -> why it was not run
    keys: str = "long"  # the key shape (KEY_SHAPES); results saved before key shapes were long
    native_wrong: bool = False  # Iceberg's own reader answered other rows than the floor (uuid keys)


def build(spark: SparkSession, point: ScalePoint, progress: Callable[[str], None]) -> str:
    """The point's table and its floor (``<table>_floor``); returns the floor's name."""
    spec = point.spec
    generate(spark, spec, replace=True, progress=progress)
    if point.axis == "delete_rows":
        stride = point.stride
        ids = spark.range(0, point.delete_rows).select((F.col("id") * stride + 1).alias("id"))
        files = max(1, math.ceil(point.delete_rows / DELETE_ROWS_PER_FILE))
        progress(f"{point.delete_rows:,} equality delete rows in {files} file(s)")
        write_equality_deletes(spark, spec.table, spec.key_columns, spec._rows(ids, F.lit(1)), files_per_partition=files)
    progress("writing the floor (the live rows, without delete files)")
    floor = f"{spec.table}_floor"
    spark.sql(f"DROP TABLE IF EXISTS {floor} PURGE")
    # The table's own schema (a uuid key stays Iceberg's uuid type, read as the table's is).
    replace(spec, table=floor).create(spark)
    live_rows(spark, point).writeTo(floor).append()
    return floor


def live_rows(spark: SparkSession, point: ScalePoint) -> DataFrame:
    """The rows the point's table holds, from the generator's rules alone."""
    spec = point.spec
    if point.axis == "data_rows":
        return spec.expected(spark)
    ids = spec._ids(spark)
    deleted = ((F.col("id") - 1) % point.stride == 0) & ((F.col("id") - 1) / point.stride < point.delete_rows) & (F.col("id") >= 1)
    return spec._rows(ids.where(~deleted), F.lit(0))


def delete_key_view(spark: SparkSession, table: str, key_columns: list[str]) -> int:
    """A temporary view of the key columns of every live equality delete file of ``table``,
    read by Spark's own Parquet reader (see ``_files_read``); returns how many files."""
    paths = [r[0] for r in spark.sql(f"SELECT file_path FROM {table}.delete_files WHERE content = 2").collect()]
    _files_read(spark, table, paths, key_columns, "deletes").createOrReplaceTempView(DELETES_VIEW)
    return len(paths)


def data_row_view(spark: SparkSession, table: str) -> None:
    """A temporary view of every row of every live data file of ``table``, deletes ignored,
    read by Spark's own Parquet reader (see ``_files_read``)."""
    paths = [r[0] for r in spark.sql(f"SELECT file_path FROM {table}.data_files").collect()]
    _files_read(spark, table, paths, None, "data").createOrReplaceTempView(DATA_VIEW)


def _files_read(spark: SparkSession, table: str, paths: list[str], columns: list[str] | None, role: str) -> DataFrame:
    """``columns`` (all without) of the Parquet files ``paths`` of ``table``, read by Spark's own
    reader; where the table has a uuid column, which Spark's reader refuses (FIXED_LEN_BYTE_ARRAY
    (UUID)), by Iceberg's vectorized reader instead, through a table ``<table>_<role>_files`` that
    holds the files as its data files (dropped without purge: they are ``table``'s)."""
    from eqdelete._jvm import _class, iceberg_catalog

    catalog, identifier = iceberg_catalog(spark, table)
    source = catalog.loadTable(identifier)
    if not any(str(field.type()) == "uuid" for field in source.schema().columns()):
        read = spark.read.parquet(*paths)
        return read.select(*columns) if columns else read
    schema = source.schema().select(columns) if columns else source.schema()
    name = f"{table}_{role}_files"
    spark.sql(f"DROP TABLE IF EXISTS {name}")  # no PURGE: its files are the table's
    unpartitioned = _class(spark, "org.apache.iceberg.PartitionSpec").unpartitioned()
    files = catalog.createTable(iceberg_catalog(spark, name)[1], schema, unpartitioned)
    sizes = {r[0]: (r[1], r[2]) for r in spark.sql(f"SELECT file_path, file_size_in_bytes, record_count FROM {table}.files").collect()}
    append = files.newAppend()
    for path in paths:
        size, records = sizes[path]
        append.appendFile(_class(spark, "org.apache.iceberg.DataFiles").builder(unpartitioned).withPath(path)
                          .withFormat("parquet").withFileSizeInBytes(size).withRecordCount(records).build())
    append.commit()
    read = spark.table(name)
    return read.select(*columns) if columns else read


def run_point(spark: SparkSession, point: ScalePoint, runs: int, warmup: int, time_box: float,
              progress: Callable[[str], None]) -> ScaleResult:
    say = lambda m: progress(f"{point.label}: {m}")  # noqa: E731
    say("building the table")
    floor = build(spark, point, say)
    keys = point.spec.key_columns
    delete_files = delete_key_view(spark, point.table, keys)
    data_row_view(spark, point.table)
    sql = QUERY.format(t=point.table)
    floor_sql = QUERY.format(t=floor)
    not_run = {"native": why} if (why := native_out_of_memory(spark, point)) else {}
    variants = [Variant(s, s, sql, time_box=time_box if s == "native" else None)
                for s in STRATEGIES if s not in not_run] + [
        Variant("floor", "native", floor_sql),
        Variant("floor_keys", "native", reading_keys(floor_sql, keys)),
        Variant("deletes_read", "native", "SELECT " + ", ".join(f"count({k}) AS {k}_read" for k in keys) + f" FROM {DELETES_VIEW}"),
        Variant("data_read", "native", reading_keys(QUERY.format(t=DATA_VIEW), keys)),
    ]
    timings = measure(spark, variants, runs=runs, warmup=warmup, progress=say, keep_rows=True)
    with use_strategy(spark, "auto"):
        auto = decisions(spark.sql(sql))
    result = summarize(point, spark.sparkContext.master, time_box, delete_files, timings, auto, not_run)
    say(", ".join(f"{k} {'not run' if k in result.not_run else _seconds(v, time_box)}" for k, v in result.medians.items())
        + f"; auto chose {result.auto_plan}; rows {'identical' if result.identical else 'DIFFER'}")
    return result


def native_out_of_memory(spark: SparkSession, point: ScalePoint) -> str | None:
    """Why Iceberg's own reader would run out of memory on the point (its delete sets, one per
    running task, over the heap of the JVM running them), or None. Such a run does not end at
    its time box: the JVM spends its time collecting garbage (seen at 3x10^7 delete rows on an
    8 GB driver: 34 full collections, 600 s in them, before it was stopped), so it is not run."""
    context = spark.sparkContext
    conf = context.getConf()
    if context.master.startswith("local["):
        heap = context._jvm.java.lang.Runtime.getRuntime().maxMemory()  # type: ignore[union-attr]
        tasks = context.defaultParallelism
    else:
        heap = context._jsc.sc().executorMemory() * 2**20  # type: ignore[union-attr]  # Spark's own reading, in MiB
        tasks = int(conf.get("spark.executor.cores", "1"))
    needed = point.delete_rows * NATIVE_BYTES_PER_DELETE_ROW * tasks
    if needed <= 0.6 * heap:
        return None
    return (f"not run: Iceberg's reader would hold ~{needed / 2**30:.1f} GB of delete rows ({tasks} task(s) x "
            f"{point.delete_rows:,} rows), over 60% of a {heap / 2**30:.1f} GB heap")


def summarize(point: ScalePoint, master: str, time_box: float, delete_files: int, timings: dict[str, Timing],
              auto: list, not_run: dict[str, str] | None = None) -> ScaleResult:
    skipped: dict[str, None] = dict.fromkeys(not_run or {})  # each variant not run, with no value
    medians = {n: (None if t.timed_out else statistics.median(t.seconds)) for n, t in timings.items()} | skipped
    limit = medians["floor_keys"] + medians["deletes_read"]

    def ratio(to: float | None) -> dict[str, float | None]:
        return {n: (m / to if m is not None and to else None) for n, m in medians.items()}

    floor_rows = timings["floor"].rows
    answered = {s: timings[s].rows for s in STRATEGIES if s in timings and not timings[s].timed_out}
    return ScaleResult(
        point=point.key(master), axis=point.axis, keys=point.keys, data_rows=point.data_rows, delete_rows=sum(d.delete_rows for d in auto),
        delete_files=delete_files, master=master, time_box=time_box, medians=medians, limit=limit,
        x_floor=ratio(medians["floor"]), x_limit=ratio(limit), x_native=ratio(medians["native"]),
        peak_heap_mb={n: _mb(t.peak_heap_bytes) for n, t in timings.items()} | skipped,
        peak_executor_heap_mb={n: _mb(t.peak_executor_heap_bytes) for n, t in timings.items()} | skipped,
        auto_plan=",".join(sorted({d.strategy for d in auto})), auto_reason="; ".join(d.reason for d in auto),
        identical=floor_rows is not None and all(rows == floor_rows for s, rows in answered.items() if s != "native"),
        not_run=dict(not_run or {}),
        native_wrong=floor_rows is not None and "native" in answered and answered["native"] != floor_rows,
    )


def _mb(n: int | None) -> float | None:
    return None if n is None else n / 2**20


def _seconds(value: float | None, time_box: float) -> str:
    return f"> {time_box:.0f} s" if value is None else f"{value:.2f} s"


def markdown(results: list[ScaleResult]) -> str:
    columns = (*STRATEGIES, *REFERENCES)
    lines = ["| axis | key | data rows | delete rows | delete files | master | limit s | "
             + " | ".join(f"{c} s" for c in columns)
             + " | " + " | ".join(f"{s} x floor / x limit / x native" for s in STRATEGIES)
             + " | peak heap MB driver (executor) native / auto | auto chose | rows |",
             "| --- | --- | ---: | ---: | ---: | --- | ---: | " + " | ".join("---:" for _ in columns)
             + " | " + " | ".join("---:" for _ in STRATEGIES) + " | ---: | --- | --- |"]

    def x(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    def heap(r: ScaleResult, name: str) -> str:
        if r.peak_heap_mb.get(name) is None:
            return "-"
        executor = r.peak_executor_heap_mb.get(name)
        return f"{r.peak_heap_mb[name]:,.0f}" + (f" ({executor:,.0f})" if executor is not None else "")

    def seconds(r: ScaleResult, name: str) -> str:
        if name not in r.medians:
            return "-"  # a reference added after the point ran
        return "not run" if name in r.not_run else _seconds(r.medians[name], r.time_box)

    shapes = list(KEY_SHAPES)
    for r in sorted(results, key=lambda r: (shapes.index(r.keys), r.axis, r.data_rows, r.delete_rows, r.master)):
        lines.append(
            f"| {r.axis} | {'/'.join(KEY_SHAPES[r.keys])} | {r.data_rows:,} | {r.delete_rows:,} | {r.delete_files:,} | {r.master} | {r.limit:.2f} | "
            + " | ".join(seconds(r, c) for c in columns) + " | "
            + " | ".join(f"{x(r.x_floor[s])} / {x(r.x_limit[s])} / {x(r.x_native[s])}" for s in STRATEGIES)
            + f" | {heap(r, 'native')} / {heap(r, 'auto')} | {r.auto_plan} | {'identical' if r.identical else 'DIFFER'}"
            + f"{' (native wrong)' if r.native_wrong else ''} |")
    notes = sorted({f"- {r.data_rows:,} data rows, {r.delete_rows:,} delete rows, {r.keys} key ({r.master}): {name} {why}"
                    for r in results for name, why in r.not_run.items()} |
                   {f"- {r.data_rows:,} data rows, {r.delete_rows:,} delete rows, {r.keys} key ({r.master}): native's rows differ "
                    "from the floor: Iceberg's reader loses deletes of uuid keys (docs/known-iceberg-issues.md)"
                    for r in results if r.native_wrong})
    return "\n".join(lines) + "\n" + ("\n" + "\n".join(notes) + "\n" if notes else "")


def chart(results: list[ScaleResult], path: Path) -> None:
    """Log-log: seconds against size, one line per strategy and reference, a panel per axis and
    key shape (a row each), on the master most points ran on (points run on another master, such as local-cluster, as
    crosses); a time-boxed native drawn at its box, hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    masters = [r.master for r in results]
    main = max(set(masters), key=masters.count)
    axes = [a for a in AXES if any(r.axis == a for r in results)]
    shapes = [k for k in KEY_SHAPES if any(r.keys == k for r in results)]
    fig, panels = plt.subplots(len(shapes), len(axes), figsize=(5.5 * len(axes), 4 * len(shapes)), squeeze=False)
    for (keys, axis), panel in zip(((k, a) for k in shapes for a in axes), panels.flat):
        size = (lambda r: r.data_rows) if axis == "data_rows" else (lambda r: r.delete_rows)
        points = sorted((r for r in results if r.axis == axis and r.keys == keys and r.master == main), key=size)
        xs = [size(r) for r in points]
        for name in (*STRATEGIES, "floor", "floor_keys", "data_read", "limit"):
            ys = [r.limit if name == "limit" else r.medians.get(name) for r in points]
            style = REFERENCE_STYLES.get(name, {})
            shown = [(x, y) for x, y in zip(xs, ys) if y is not None]
            if shown:
                panel.plot(*zip(*shown), marker="o", label=name, **style)
            boxed = [(x, r.time_box) for x, y, r in zip(xs, ys, points) if y is None and name in r.medians and name not in r.not_run]
            if boxed:
                panel.plot(*zip(*boxed), marker="^", linestyle="none", fillstyle="none", color="black",
                           label=f"{name} > time box")
        for other in sorted({r.master for r in results if r.axis == axis and r.keys == keys} - {main}):
            for name in ("auto", "native"):
                shown = [(size(r), r.medians[name]) for r in results
                         if r.axis == axis and r.keys == keys and r.master == other and r.medians[name] is not None]
                if shown:
                    panel.plot(*zip(*shown), marker="x", linestyle="none", label=f"{name} ({other})")
        panel.set_xscale("log")
        panel.set_yscale("log")
        panel.set_xlabel(axis.replace("_", " ") + (_data_rows_label(points) if axis == "delete_rows" else " (0.5% deleted)"))
        panel.set_ylabel("median seconds")
        panel.set_title(f"scale: {axis.replace('_', ' ')}, {'/'.join(KEY_SHAPES[keys])} key ({main})", fontsize=10)
        panel.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _data_rows_label(points: list[ScaleResult]) -> str:
    """The delete axis's table size, as 10^N where it is a power of ten."""
    sizes = sorted({r.data_rows for r in points})
    if not sizes:
        return ""
    power = [len(str(n)) - 1 if str(n).strip("0") == "1" else None for n in sizes]
    return " (" + ", ".join(f"10^{p}" if p is not None else f"{n:,}" for n, p in zip(sizes, power)) + " data rows)"


def run(spark: SparkSession, points: list[ScalePoint], out: Path, runs: int, warmup: int, time_box: float,
        progress: Callable[[str], None] | None = None) -> list[ScaleResult]:
    """Measure ``points``; results already in ``out`` for other points (another axis, another
    master) are kept beside them, so axes and masters can be run one at a time into one report.
    Returns this run's results."""
    report = progress or stderr_reporter("eqdelete bench --scale")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NAMESPACE}")
    master = spark.sparkContext.master
    return run_merged(points, lambda p: run_point(spark, p, runs, warmup, time_box, report),
                      {p.key(master) for p in points},
                      out, "scale", ScaleResult, markdown, chart, report)


def load(out: Path) -> list[ScaleResult]:
    """The results saved in ``out``, if any."""
    return load_results(out, "scale", ScaleResult)
