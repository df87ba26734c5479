"""The maintain scale benchmark: what a round of ``maintain`` costs on a large table whose keys
are scattered, with today's plan and with the kept index of the live rows.

On a table whose every data file holds a random share of the keys (as every streaming sink
writes them), today's plan reads the key column of every data file each round: its cost follows
the table. A long-running ``maintain`` keeps an index of the live rows by key on the executors
(``spark.eqdelete.maintain.liveIndex``), brought forward each round, so a round reads only what
was written since and looks its new delete keys up.

Each point is a scattered table of ``data_rows`` rows (10^6 rows a data file, 0.1% of its keys
deleted by its history). Its first round of a long-running maintain builds the index from the
table: the **build** after a start (reading the table's keys and loading the stores), with the
index's entries and bytes. Then, for each round size (10^3, 10^4, 10^5 new delete rows spread
over all keys), ``runs`` times: one commit of that many equality delete rows, then from that
snapshot a round with **today's plan** (a round run once: no state), timed, the table rolled back
to the snapshot; then a round of the long-running maintain through the **kept index**, timed,
which commits and stays. Both must resolve the same rows; at the end the native read must equal
eqdelete's read before the last round. Before each, what a round under auto (the default,
``spark.eqdelete.maintain.liveIndex``) would choose from the round's metadata is recorded: "auto
picks" (index or reading). Each kept round's bytes written to durable storage (its checkpoint:
deltas, snapshots, manifest) are recorded. Last, a **restart**: the driver lets go of the index
(as a restarted ``maintain`` has none; its checkpoints stay), one more commit of the middle round
size, and the round that restores the index from its last saved version, loads its stores and
brings it forward, timed beside the build and the steady rounds; with the bytes the index's
version takes on durable storage. Then a **restart as in production**: one more commit, and the
first round of a new application (a new process: new driver and executor JVMs, the same settings)
restoring the index, checked to restore it and to leave the rows right; beside it, on the same
commit (rolled back after; from 10^6 rows), today's plan as a new application's first round, which
shows what new JVMs' first round costs whatever it does. Times are reported, never asserted.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eqdelete import _jvm
from eqdelete._progress import stderr_reporter
from eqdelete.compare import ResultsDifferError, fingerprint
from eqdelete.deletes import write_equality_deletes
from eqdelete.maintain import MaintainRound, maintain_round
from eqdelete.tools.cdc import CdcSpec, generate
from eqdelete.tools.report import ScatteredPoint, load_results, run_merged
from eqdelete.tools.resolve_bench import call_procedure, timed_with_peak
from eqdelete.tools.restarted import in_a_new_application
from eqdelete.tools.scale import KEY_SHAPES, shape_suffix
from eqdelete.toggles import use_conf, use_strategy

SIZES = (10**6, 10**7, 10**8, 3 * 10**8)
#: The order key shapes are reported in.
KEY_ORDER = {k: i for i, k in enumerate(KEY_SHAPES)}
ROUNDS = (10**3, 10**4, 10**5)
DATA_ROWS_PER_FILE = 1_000_000
HISTORY_DELETES = 0.001
NAMESPACE = "local.maintain_scale"
#: Rounds measure finding and writing the deletes, not the compactions that follow some of them.
# Position delete compaction off, so a round is its resolve; the kept index always (auto reads a
# small table's data files instead: the kept column is the index's cost at every size).
ROUND_CONF = [("spark.eqdelete.maintain.compactPositionDeleteFiles", "0"), ("spark.eqdelete.maintain.liveIndex", "always")]


@dataclass(frozen=True)
class MaintainScalePoint(ScatteredPoint):
    """A scattered table of ``data_rows`` rows, with rounds of ``rounds`` new delete rows."""

    data_rows: int
    rounds: tuple[int, ...] = ROUNDS
    rows_per_file: int = DATA_ROWS_PER_FILE
    keys: str = "long"  # a KEY_SHAPES name

    @property
    def axis(self) -> str:
        return "data_rows"

    @property
    def key(self) -> str:
        """The long key's points keep the names they had before key shapes."""
        return super().key + shape_suffix(self.keys, "/")

    @property
    def spec(self) -> CdcSpec:
        return CdcSpec(table=f"{NAMESPACE}.scattered_{self.data_rows}{shape_suffix(self.keys, '_')}", rows=self.data_rows,
                       data_files=max(2, self.data_rows // self.rows_per_file), commits=1,
                       delete_fraction=HISTORY_DELETES, upsert_fraction=0.0, layout="scattered",
                       key_types=KEY_SHAPES[self.keys])


def default_points(quick: bool = False, keys: str = "long") -> list[MaintainScalePoint]:
    """10^6 to 3x10^8 rows (to 10^8 for a key other than one long); ``quick``: a tiny profile
    checking rows (CI)."""
    if quick:
        return [MaintainScalePoint(40_000, rounds=(100, 400), rows_per_file=5_000, keys=keys)]
    return [MaintainScalePoint(n, keys=keys) for n in SIZES if keys == "long" or n <= 10**8]


@dataclass
class RoundSize:
    """Rounds of ``delete_rows`` new delete rows: medians, today's plan against the kept index."""

    delete_rows: int
    rows_resolved: int
    today_seconds: float
    kept_seconds: float
    today_files_read: int
    kept_files_read: int
    kept_driver_peak_heap_mb: float = 0.0   # the most the driver's heap reached in a kept round (garbage included)
    auto_picks: str = ""                     # what a round under auto chose at this size (index or reading), from metadata
    kept_checkpoint_bytes: int = 0           # median bytes a kept round wrote to durable storage (its checkpoint)

    @property
    def kept_to_today(self) -> float:
        return self.kept_seconds / self.today_seconds


@dataclass
class MaintainScaleResult:
    point: str
    data_rows: int
    data_files: int
    build_seconds: float        # the first round of a long-running maintain: reads every data file, builds the index
    build_rows_resolved: int
    index_entries: int          # after the last round
    index_bytes: int
    build_driver_peak_heap_mb: float = 0.0
    rounds: list[RoundSize] = field(default_factory=list)
    restart_delete_rows: int = 0      # the round after a restart: its new delete rows,
    restart_seconds: float = 0.0      # its time (restoring, loading the stores, bringing them forward, resolving)
    restart_files_read: int = 0
    stored_bytes: int = 0             # the index's current version on durable storage
    # The same, restarted as it is in production: a new application's first round (new JVMs), and
    # its session's start before it (not counted in the round).
    new_process_seconds: float = 0.0
    new_process_session_seconds: float = 0.0
    # A new application's first round of today's plan (no index, as --once) on the same commit: what
    # a first round of new JVMs costs whatever it does.
    new_process_today_seconds: float = 0.0
    keys: str = "long"                # the key's shape (a KEY_SHAPES name)

    @property
    def bytes_per_key(self) -> float:
        return self.index_bytes / self.index_entries if self.index_entries else 0.0

    def __post_init__(self) -> None:
        self.rounds = [r if isinstance(r, RoundSize) else RoundSize(**r) for r in self.rounds]


def _checked(today: MaintainRound, kept: MaintainRound, where: str) -> None:
    if today.rows_resolved != kept.rows_resolved or not kept.committed:
        raise ResultsDifferError(f"{where}: today's plan resolved {today.rows_resolved:,} rows, the kept index "
                                 f"{kept.rows_resolved:,} (committed: {kept.committed})")


def _commit_deletes(spark: SparkSession, point: MaintainScalePoint, size: int, batch: int) -> None:
    """One commit of ``size`` equality delete rows spread over all keys, shifted by ``batch``."""
    stride = max(1, point.data_rows // size)
    ids = spark.range(0, size).select((F.col("id") * stride + (batch * 7919) % stride).alias("id"))
    write_equality_deletes(spark, point.spec.table, point.spec.key_columns, point.spec._rows(ids, F.lit(1)))


def run_point(spark: SparkSession, point: MaintainScalePoint, runs: int,
              progress: Callable[[str], None]) -> MaintainScaleResult:
    spec, say = point.spec, (lambda m: progress(f"{point.key}: {m}"))
    table = spec.table
    say(f"generating {spec.rows:,} rows in {spec.data_files} files (scattered), deleting {HISTORY_DELETES:.1%}")
    generate(spark, spec, replace=True, progress=say)
    _jvm.forget_kept_indexes(spark, table, checkpoints=True)
    data_files = spark.sql(f"SELECT count(*) FROM {table}.data_files").first()[0]
    say("the first round of a long-running maintain: building the index from the table")
    with use_conf(spark, ROUND_CONF):
        _, build_heap, built = timed_with_peak(spark, lambda: maintain_round(spark, table, keep_index=True))
    say(f"built in {built.seconds:.1f} s: {built.live_index_entries:,} entries, "
        f"{built.live_index_bytes_per_key or 0:.1f} bytes each")
    result = MaintainScaleResult(point.key, point.data_rows, data_files, built.seconds, built.rows_resolved,
                                 built.live_index_entries, built.live_index_bytes, build_heap, keys=point.keys)
    truth: tuple[int, int] | None = None
    batch = 0
    try:
        for size in point.rounds:
            today: list[MaintainRound] = []
            kept: list[MaintainRound] = []
            kept_heap: list[float] = []
            picks: list[str] = []
            for run in range(runs):
                batch += 1
                _commit_deletes(spark, point, size, batch)
                start = _jvm.current_snapshot_id(spark, table)
                picks.append(_jvm.auto_choice(spark, table)[0])  # the index is held: auto's choice from metadata
                last = size == point.rounds[-1] and run == runs - 1
                if last:
                    with use_strategy(spark, "auto"):
                        truth = fingerprint(spark.table(table))
                with use_conf(spark, ROUND_CONF):
                    today.append(maintain_round(spark, table))
                    call_procedure(spark, "rollback_to_snapshot", table, f"snapshot_id => {start}")
                    _, heap, round_ = timed_with_peak(spark, lambda: maintain_round(spark, table, keep_index=True))
                    kept.append(round_)
                    kept_heap.append(heap)
                _checked(today[-1], kept[-1], f"{point.key}, {size:,} delete rows, run {run + 1}")
                if kept[-1].live_index_note:
                    raise ResultsDifferError(f"{point.key}: the kept index was not brought forward: {kept[-1].live_index_note}")
                say(f"{size:,} delete rows, run {run + 1}/{runs}: today's plan {today[-1].seconds:.2f} s "
                    f"({today[-1].data_files_read:,} files read), kept index {kept[-1].seconds:.2f} s "
                    f"({kept[-1].data_files_read:,} files read), {kept[-1].rows_resolved:,} rows")
            result.rounds.append(RoundSize(size, kept[-1].rows_resolved,
                                           statistics.median(r.seconds for r in today),
                                           statistics.median(r.seconds for r in kept),
                                           today[-1].data_files_read, kept[-1].data_files_read, max(kept_heap),
                                           "/".join(sorted(set(picks))),
                                           int(statistics.median(r.live_index_checkpoint_bytes for r in kept))))
        with use_strategy(spark, "native"):
            if fingerprint(spark.table(table)) != truth:
                raise ResultsDifferError(f"{point.key}: the native read after the rounds differs from eqdelete's before")
        result.index_entries, result.index_bytes = kept[-1].live_index_entries, kept[-1].live_index_bytes
        # A restart: the driver's index forgotten, its checkpoints kept; the next round restores it.
        size = point.rounds[len(point.rounds) // 2]
        _jvm.forget_kept_indexes(spark, table)
        batch += 1
        _commit_deletes(spark, point, size, batch)
        with use_conf(spark, ROUND_CONF):
            restarted = maintain_round(spark, table, keep_index=True)
        if "restored from version" not in (restarted.live_index_note or ""):
            raise ResultsDifferError(f"{point.key}: the round after a restart did not restore the index: {restarted.live_index_note}")
        say(f"after a restart: {restarted.seconds:.2f} s for {size:,} delete rows ({restarted.data_files_read:,} files read; "
            f"the build took {result.build_seconds:.1f} s)")
        result.restart_delete_rows, result.restart_seconds = size, restarted.seconds
        result.restart_files_read, result.stored_bytes = restarted.data_files_read, restarted.live_index_stored_bytes
        # And as a real restart: one more commit, then the first round of a new application.
        batch += 1
        _commit_deletes(spark, point, size, batch)
        with use_strategy(spark, "auto"):
            truth = fingerprint(spark.table(table))
        # Today's plan as a first round too, for its time: where there is one to compare (not the quick
        # profile's tiny table, whose rows the restored round's own checks cover).
        today_fresh = None
        if point.data_rows >= SIZES[0]:
            start = _jvm.current_snapshot_id(spark, table)
            say("a new application's first round of today's plan (no index), then rolled back")
            today_fresh = in_a_new_application(spark, {"kind": "maintain", "table": table, "round_conf": ROUND_CONF,
                                                       "keep_index": False})
            call_procedure(spark, "rollback_to_snapshot", table, f"snapshot_id => {start}")
        say("a restart in a new application (new driver and executor JVMs): its first round")
        fresh = in_a_new_application(spark, {"kind": "maintain", "table": table, "round_conf": ROUND_CONF})
        if today_fresh is not None and fresh["rows_resolved"] != today_fresh["rows_resolved"]:
            raise ResultsDifferError(f"{point.key}: in new applications, today's plan resolved {today_fresh['rows_resolved']:,} "
                                     f"rows, the restored index {fresh['rows_resolved']:,}")
        if "restored from version" not in fresh["note"]:
            raise ResultsDifferError(f"{point.key}: the new application's first round did not restore the index: {fresh['note']}")
        spark.sql(f"REFRESH TABLE {table}")
        with use_strategy(spark, "native"):
            if fingerprint(spark.table(table)) != truth:
                raise ResultsDifferError(f"{point.key}: the native read after the new application's round differs")
        say(f"in a new application: {fresh['seconds']:.2f} s for {size:,} delete rows ({fresh['data_files_read']:,} files "
            f"read), after {fresh['session_seconds']:.1f} s starting its session" +
            (f"; today's plan there {today_fresh['seconds']:.2f} s" if today_fresh else ""))
        result.new_process_seconds, result.new_process_session_seconds = fresh["seconds"], fresh["session_seconds"]
        result.new_process_today_seconds = today_fresh["seconds"] if today_fresh else 0.0
    finally:
        _jvm.forget_kept_indexes(spark, table, checkpoints=True)
    return result


def markdown(results: list[MaintainScaleResult]) -> str:
    lines = ["| key | data rows | data files | index build s | index entries after | bytes a key | new delete rows "
             "| rows resolved | today's plan s (files read) | kept index s (files read) | kept x today | auto picks "
             "| driver peak heap MB, kept |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    ordered = sorted(results, key=lambda r: (KEY_ORDER.get(r.keys, len(KEY_ORDER)), r.keys, r.data_rows))
    for r in ordered:
        for i, s in enumerate(r.rounds):
            head = (f"| {r.keys} | {r.data_rows:,} | {r.data_files:,} | {r.build_seconds:.1f} | {r.index_entries:,} | {r.bytes_per_key:.1f} "
                    if i == 0 else "| | | | | | ")
            lines.append(f"{head}| {s.delete_rows:,} | {s.rows_resolved:,} | {s.today_seconds:.2f} ({s.today_files_read:,}) "
                         f"| {s.kept_seconds:.2f} ({s.kept_files_read:,}) | {s.kept_to_today:.2f} | {s.auto_picks or '-'} "
                         f"| {s.kept_driver_peak_heap_mb:,.0f} |")
    lines += ["", "| key | data rows | index build s | steady round s (delete rows) | checkpoint bytes a steady round "
              "| round after a restart s (files read) | restart / build | first round of a new application s "
              "| new application / build | today's plan as a new application's first round s | on durable storage, bytes a key |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in ordered:
        steady = next((s for s in r.rounds if s.delete_rows == r.restart_delete_rows), None)
        if steady is None or not r.restart_seconds:
            continue
        lines.append(f"| {r.keys} | {r.data_rows:,} | {r.build_seconds:.1f} | {steady.kept_seconds:.2f} ({steady.delete_rows:,}) "
                     f"| {steady.kept_checkpoint_bytes:,} | {r.restart_seconds:.2f} ({r.restart_files_read:,}) "
                     f"| {r.restart_seconds / r.build_seconds:.2f} "
                     + (f"| {r.new_process_seconds:.2f} (session {r.new_process_session_seconds:.1f}) "
                        f"| {r.new_process_seconds / r.build_seconds:.2f} "
                        + (f"| {r.new_process_today_seconds:.2f} " if r.new_process_today_seconds else "| - ")
                        if r.new_process_seconds else "| - | - | - ")
                     + f"| {r.stored_bytes / r.index_entries if r.index_entries else 0:.1f} |")
    return "\n".join(lines) + "\n"


def chart(results: list[MaintainScaleResult], path: Path) -> None:
    """Log-log: a round's seconds against data rows, a line per round size, today's plan solid and
    the kept index dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.4))
    ordered = sorted(results, key=lambda r: r.data_rows)
    sizes = sorted({s.delete_rows for r in results for s in r.rounds})
    shapes = sorted({r.keys for r in results}, key=lambda k: KEY_ORDER.get(k, len(KEY_ORDER)))
    colors = iter(("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
                   "tab:gray", "tab:olive", "tab:cyan") * 3)
    for shape in shapes:
        keyed = "" if len(shapes) == 1 else f", {shape} key"
        for size, color in zip(sizes, colors):
            points = [(r.data_rows, s) for r in ordered if r.keys == shape for s in r.rounds if s.delete_rows == size]
            if points:
                ax.plot([x for x, _ in points], [s.today_seconds for _, s in points], marker="o", color=color,
                        label=f"today's plan, {size:,} new delete rows{keyed}")
                ax.plot([x for x, _ in points], [s.kept_seconds for _, s in points], marker="s", linestyle="--",
                        color=color, label=f"kept index, {size:,} new delete rows{keyed}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("data rows (keys scattered over every data file)")
    ax.set_ylabel("seconds a round")
    ax.set_title("a round of maintain: today's plan against the kept index of the live rows", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(spark: SparkSession, points: list[MaintainScalePoint], out: Path, runs: int,
        progress: Callable[[str], None] | None = None) -> list[MaintainScaleResult]:
    """Measure ``points``; results already in ``out`` for other points are kept beside them."""
    report = progress or stderr_reporter("eqdelete bench --maintain-scale")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NAMESPACE}")
    return run_merged(points, lambda p: run_point(spark, p, runs, report), {p.key for p in points},
                      out, "maintain-scale", MaintainScaleResult, markdown, chart, report)


def load(out: Path) -> list[MaintainScaleResult]:
    """The results saved in ``out``, if any."""
    return load_results(out, "maintain-scale", MaintainScaleResult)
