"""The changes benchmark (``bench --changes``): what reading one commit's changes costs as the
table grows, beside what users can do without eqdelete.

At each size, a scattered table (keys spread over every data file, so no file's key bounds
exclude a key) gets one commit of ``upserts`` upserts by equality deletes, as an upsert writer
makes them. Then, side by side and interleaved (``compare.measure``), the seconds to compute
that commit's changes:

- ``changes``: ``eqdelete_changes`` of the commit (under the session's strategy, auto);
- ``except_all``: the difference of two time-travel reads, both ways (``EXCEPT ALL``), read
  natively: what a user of Iceberg alone can do, since Iceberg's changelog refuses delete files;
- ``parent_read``: one read of the parent snapshot's rows (which has no delete files): the
  reference of a plan that reads the table once, as finding scattered keys' old rows does
  without an index of them.

Both must give the same rows (as multisets), checked before timing. Then, with kept row images
(``spark.eqdelete.changes.rowImages``), what a long-running stream or session pays:

- ``row_images_build``: the commit's changes read once with them, which builds them from a full
  read at its parent first (once per table and application); on a reused table (``--reuse-tables``)
  an earlier run's checkpointed images are restored instead, and this is ``row_images_resumed``;
- ``row_images``: then, ``runs`` times, one more commit of as many upserts is written (not timed)
  and its changes read: the images brought forward by the commit and its deleted rows looked up
  in them (checked in the plan);
- ``row_images_plain``: the changes of those same commits read without them, checked to be the
  same rows.

Timings are reported, never asserted.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession

from eqdelete import _jvm
from eqdelete._progress import stderr_reporter
from eqdelete.compare import ResultsDifferError, Variant, fingerprint, measure
from eqdelete.toggles import use_conf, use_strategy
from eqdelete.tools.cdc import CdcSpec, generate, write_commit
from eqdelete.tools.report import run_merged
from eqdelete.tools.restarted import in_a_new_application
from eqdelete.tools.scale import KEY_SHAPES, shape_suffix

SIZES = (10**6, 10**7, 10**8)
ROW_IMAGES = "spark.eqdelete.changes.rowImages"
UPSERTS = 10**4
#: Rows per data file, as a writer's target file size gives them (about 10 MB of these rows).
ROWS_PER_FILE = 500_000


@dataclass
class ChangesPoint:
    rows: int
    upserts: int = UPSERTS
    keys: str = "long"  # a KEY_SHAPES name

    @property
    def table(self) -> str:
        return f"local.bench.changes_{self.rows}" + shape_suffix(self.keys, "_")

    @property
    def key(self) -> str:
        """Its name in the saved results: a run of other keys or sizes into the same --out keeps it."""
        return f"{self.keys}/{self.rows}"


@dataclass
class ChangesBenchResult:
    rows: int
    upserts: int
    data_files: int
    changed_rows: int
    # changes, except_all, parent_read, row_images_build (or row_images_resumed, restored from an earlier run's
    # checkpoints on a reused table), row_images, row_images_plain, row_images_restart (a
    # commit's changes after a restart: restoring and loading them); row_image_checkpoint_bytes (the median
    # bytes a commit's changes wrote to durable storage) and row_image_stored_bytes (their version there)
    medians: dict[str, float]
    row_image_bytes: int | None = None  # the bytes the kept row images took
    keys: str = "long"                  # the key's shape (a KEY_SHAPES name)
    point: str = ""                     # ChangesPoint.key (results saved before it was kept: from keys and rows)

    def __post_init__(self) -> None:
        self.point = self.point or f"{self.keys}/{self.rows}"


def default_points(quick: bool, keys: str = "long") -> list[ChangesPoint]:
    return [ChangesPoint(10**4, upserts=100, keys=keys)] if quick else [ChangesPoint(n, keys=keys) for n in SIZES]


def _changes_sql(table: str, columns: list[str], parent: int, commit: int) -> str:
    data = ", ".join(f"`{c}`" for c in columns)
    return f"SELECT {data}, _change_type FROM eqdelete_changes('{table}', {parent}, {commit})"


def _sqls(table: str, columns: list[str], parent: int, commit: int) -> dict[str, str]:
    """The commit's rows inserted and deleted, each tagged: by eqdelete, and by two reads' difference."""
    at = lambda s: f"SELECT * FROM {table} VERSION AS OF {s}"  # noqa: E731
    return {
        "changes": _changes_sql(table, columns, parent, commit),
        "except_all": f"SELECT *, 'INSERT' AS _change_type FROM ({at(commit)} EXCEPT ALL {at(parent)}) "
                      f"UNION ALL SELECT *, 'DELETE' AS _change_type FROM ({at(parent)} EXCEPT ALL {at(commit)})",
        "parent_read": at(parent),
    }


def _lineage(spark: SparkSession, table: str) -> list[int]:
    """The current snapshot's ancestors, oldest first."""
    rows = spark.sql(f"SELECT snapshot_id, parent_id FROM {table}.snapshots").collect()
    parents = {r[0]: r[1] for r in rows}
    at, chain = _jvm.current_snapshot_id(spark, table), []
    while at is not None:
        chain.append(at)
        at = parents.get(at)
    return chain[::-1]


def run_point(spark: SparkSession, point: ChangesPoint, runs: int, warmup: int,
              progress: Callable[[str], None], reuse: bool = False, only_row_images: bool = False) -> ChangesBenchResult:
    keyed = "" if point.keys == "long" else f", {point.keys} key"
    say = lambda m: progress(f"{point.rows:,} rows{keyed}: {m}")  # noqa: E731
    files = max(2, point.rows // ROWS_PER_FILE)
    spec = CdcSpec(point.table, rows=point.rows, data_files=files, commits=1, delete_fraction=0.0,
                   upsert_fraction=point.upserts / point.rows, layout="scattered", seed=point.rows,
                   key_types=KEY_SHAPES[point.keys])
    if reuse and spark.catalog.tableExists(point.table):
        say("reusing the table a run before generated (its first commit; later ones came from kept row images' runs)")
    else:
        say(f"generating a scattered table of {files} data files and one commit of {point.upserts:,} upserts")
        generate(spark, spec, replace=True, progress=say)
    chain = _lineage(spark, point.table)
    parent, commit = chain[0], chain[1]
    columns = spark.table(point.table).columns
    if only_row_images:
        before = _row_image_bytes(spark)
        medians = _with_row_images(spark, spec, columns, chain[-2], chain[-1], len(chain), runs, say)
        changed = fingerprint(spark.sql(_changes_sql(point.table, columns, parent, commit)))[0]
        return ChangesBenchResult(point.rows, point.upserts, files, changed, medians, _row_image_bytes(spark) - before,
                                  point.keys, point.key)
    sqls = _sqls(point.table, columns, parent, commit)
    with use_strategy(spark, "native"):
        truth = fingerprint(spark.sql(sqls["except_all"]))
    changed = fingerprint(spark.sql(sqls["changes"]))
    if changed != truth:
        raise ResultsDifferError(f"{point.table}: the changes {changed} differ from the difference of the two reads {truth}")
    timings = measure(spark, [Variant("changes", "auto", sqls["changes"], conf=((ROW_IMAGES, "false"),)), Variant("except_all", "native", sqls["except_all"]),
                              Variant("parent_read", "native", sqls["parent_read"])],
                      runs=runs, warmup=warmup, progress=say)
    medians = {k: statistics.median(t.seconds) for k, t in timings.items()}
    say(f"changes {medians['changes']:.2f}s, EXCEPT ALL of two reads {medians['except_all']:.2f}s, "
        f"one read of the parent {medians['parent_read']:.2f}s")
    before = _row_image_bytes(spark)
    # Built at the parent of the table's last commit (the first, unless reused), which is read with them first.
    medians.update(_with_row_images(spark, spec, columns, chain[-2], chain[-1], len(chain), runs, say))
    return ChangesBenchResult(point.rows, point.upserts, files, truth[0], medians, _row_image_bytes(spark) - before,
                              point.keys, point.key)


def _with_row_images(spark: SparkSession, spec: CdcSpec, columns: list[str], parent: int, commit: int, snapshots: int,
                     runs: int, say: Callable[[str], None]) -> dict[str, float]:
    """The seconds of the commit's changes with kept row images (building them), then the medians
    over ``runs`` new commits (after the table's ``snapshots``) of their changes with them and
    without; each checked to be the same rows, and the images checked to be used."""
    def timed(sql: str, images: bool) -> tuple[float, tuple]:
        with use_conf(spark, [(ROW_IMAGES, str(images).lower())]):
            started = time.perf_counter()
            df = spark.sql(sql)
            df.write.format("noop").mode("overwrite").save()
            elapsed = time.perf_counter() - started
            if images and "RowImages of snapshot(s)" not in df._jdf.queryExecution().optimizedPlan().toString():
                raise AssertionError(f"{spec.table}: the changes were not looked up in kept row images ({sql})")
            return elapsed, fingerprint(spark.sql(sql))

    def both(sql: str) -> tuple[float, float]:
        (imaged, rows), (plain, expected) = timed(sql, True), timed(sql, False)
        if rows != expected:
            raise ResultsDifferError(f"{spec.table}: the changes with kept row images {rows} differ from those without "
                                     f"{expected} ({sql})")
        return imaged, plain

    images = spark.sparkContext._jvm.eqdelete.changes.KeptRowImages
    with use_strategy(spark, "auto"):
        builds = images.built()
        build, _ = both(_changes_sql(spec.table, columns, parent, commit))
        # A reused table may hold an earlier run's checkpointed images: then they were restored, not built.
        first = "row_images_build" if images.built() > builds else "row_images_resumed"
        say(f"with kept row images: {build:.2f}s, " + ("building them" if first == "row_images_build" else
                                                       "restoring an earlier run's and bringing them forward (no build)"))
        imaged, plain, written, previous = [], [], [], commit
        for n in range(runs):
            write_commit(spark, spec, snapshots + n)
            latest = _jvm.current_snapshot_id(spark, spec.table)
            before = _checkpointed(spark)[0]
            seconds = both(_changes_sql(spec.table, columns, previous, latest))
            written.append(_checkpointed(spark)[0] - before)
            imaged.append(seconds[0])
            plain.append(seconds[1])
            previous = latest
            say(f"a new commit's changes: {seconds[0]:.2f}s with kept row images, {seconds[1]:.2f}s without, "
                f"{written[-1]:,} bytes checkpointed")
        stored = _checkpointed(spark)[1]
        # A restart: the images forgotten (as a new application has none); the next commit's read restores them.
        restored = images.restored()
        images.forgetAll(spark._jsparkSession)
        write_commit(spark, spec, snapshots + runs)
        latest = _jvm.current_snapshot_id(spark, spec.table)
        restart, _ = both(_changes_sql(spec.table, columns, previous, latest))
        if images.restored() != restored + 1:
            raise AssertionError(f"{spec.table}: the kept row images were not restored after a restart")
        say(f"after a restart: {restart:.2f}s with kept row images (restored, loaded)")
        # And as a real restart: one more commit, whose changes a new application reads first.
        write_commit(spark, spec, snapshots + runs + 1)
        previous, latest = latest, _jvm.current_snapshot_id(spark, spec.table)
        sql = _changes_sql(spec.table, columns, previous, latest)
        fresh = in_a_new_application(spark, {"kind": "changes", "sql": sql})
        if fresh["restored"] != 1 or fresh["built"] != 0:
            raise AssertionError(f"{spec.table}: the new application did not restore the kept row images ({fresh})")
        with use_conf(spark, [(ROW_IMAGES, "false")]):
            if tuple(fresh["fingerprint"]) != fingerprint(spark.sql(sql)):
                raise ResultsDifferError(f"{spec.table}: the new application's changes differ from those without row images")
        say(f"in a new application: {fresh['seconds']:.2f}s with kept row images (restored, loaded), after "
            f"{fresh['session_seconds']:.1f}s starting its session")
    return {first: build, "row_images": statistics.median(imaged), "row_images_plain": statistics.median(plain),
            "row_images_restart": restart, "row_image_checkpoint_bytes": statistics.median(written),
            "row_image_stored_bytes": stored, "row_images_new_process": fresh["seconds"]}


def _checkpointed(spark: SparkSession) -> list[int]:
    """[bytes the kept row images wrote to durable storage, bytes their current versions take there]."""
    return [int(b) for b in spark.sparkContext._jvm.eqdelete.changes.KeptRowImages.checkpointed(spark._jsparkSession)]


def _row_image_bytes(spark: SparkSession) -> int:
    """The bytes of this application's kept row images, on the executors' disks and in RocksDB's memtables."""
    return int(spark.sparkContext._jvm.eqdelete.changes.KeptRowImages.bytes(spark._jsparkSession))


def markdown(results: list[ChangesBenchResult]) -> str:
    lines = ["| key | data rows | data files | upserts | changed rows | changes s | EXCEPT ALL of two reads s | "
             "EXCEPT ALL / changes | one read of the parent s | changes / one read | changes / changes at the smallest | "
             "later commits with kept row images s | / at the smallest | the same without s | building them s | their bytes | "
             "after a restart s | in a new application s | checkpointed a commit | on durable storage |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: | ---: | ---: | ---: | ---: |"]
    smallest = {}  # each key shape's smallest table: what "at the smallest" compares with
    for r in sorted(results, key=lambda r: r.rows):
        smallest.setdefault(r.keys, r)
    for r in results:
        first, first_imaged = (smallest[r.keys].medians.get(k) for k in ("changes", "row_images"))
        c, e, read = (r.medians.get(k) for k in ("changes", "except_all", "parent_read"))
        without = (f"{c:.2f} | {e:.2f} | {e / c:.1f} | " + (f"{read:.2f} | {c / read:.2f}" if read else "- | -") +
                   (f" | {c / first:.2f}" if first else " | -")) if c and e else "- | - | - | - | - | -"
        imaged, build, resumed, plain = (r.medians.get(k) for k in ("row_images", "row_images_build", "row_images_resumed",
                                                                    "row_images_plain"))
        built = f"{build:.2f}" if build else f"- (resumed: {resumed:.2f})" if resumed else "-"
        with_images = (f"{imaged:.2f} | {imaged / first_imaged:.2f} | {plain:.2f} | {built}"
                       if imaged and first_imaged and plain else "- | - | - | -")
        size = f"{r.row_image_bytes / 2**20:,.0f} MiB" if r.row_image_bytes else "-"
        restart, fresh, written, stored = (r.medians.get(k) for k in ("row_images_restart", "row_images_new_process",
                                                                      "row_image_checkpoint_bytes", "row_image_stored_bytes"))
        durable = (f"{restart:.2f} | " + (f"{fresh:.2f}" if fresh else "-") + f" | {written / 2**10:,.0f} KiB | "
                   f"{stored / 2**20:,.0f} MiB" if restart and written is not None and stored else "- | - | - | -")
        lines.append(f"| {r.keys} | {r.rows:,} | {r.data_files:,} | {r.upserts:,} | {r.changed_rows:,} | {without} | {with_images} | "
                     f"{size} | {durable} |")
    return "\n".join(lines) + "\n"


def run(spark: SparkSession, points: list[ChangesPoint], out: Path, runs: int, warmup: int,
        progress: Callable[[str], None] | None = None, reuse: bool = False,
        only_row_images: bool = False) -> list[ChangesBenchResult]:
    report = progress or stderr_reporter("eqdelete bench --changes")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.bench")
    # Beside the results already in `out` for other keys and sizes.
    return run_merged(points, lambda p: run_point(spark, p, runs, warmup, report, reuse, only_row_images),
                      {p.key for p in points}, out, "changes", ChangesBenchResult, markdown, lambda _results, _path: None,
                      report)
