"""The object store benchmark (``python -m eqdelete bench --lakehouse``): Flink-written tables in
s3proxy behind Iceberg's REST catalog (``eqdelete.tools.lakehouse``), as users have them.

**Reads.** A checkpointed Flink streaming upsert job writes the table (a commit per checkpoint,
equality deletes for every upserted key). The query is timed under every strategy, interleaved,
beside the references of PERFORMANCE.md:
- the **floor**: the live rows compacted, on the same store;
- **floor_keys**: the floor's query also reading the key;
- **deletes_read**: reading the key column of the table's live equality delete files once: the
  same files, copied off the store to a local directory first (Spark's own Parquet reader has no
  way onto the store but a table's FileIO, and the catalog gives it no key), so it leaves out
  the store's HTTP round trips eqdelete pays.
- the **limit**: floor_keys + deletes_read.

s3proxy logs every request: the benchmark counts the GETs of equality delete files each strategy
makes for one more query, twice: warm, as the timed runs left the caches (Iceberg's executor
cache of delete files, eqdelete's filter indexes), and with neither cache, as a query on a fresh
executor reads. Natively each task reads the delete files that apply to its data file, unless
its executor already holds them; eqdelete reads each once a query, or not at all from its cache.

**maintain against the stream.** A second job of the same shape, longer, runs while ``maintain``
resolves it a round every ``cadence`` seconds. Each round records its cost, what it resolved,
the lag (the oldest live equality delete's age) before and after it, and the rows written by
then. A third job runs the same while ``maintain`` also compacts the data files deletes have
emptied past ``compaction_dead_ratio``, within ``compaction_budget_bytes`` an hour, compacting
position delete files at 2 a data file so their share counts on format v2 (the
"maintain+compaction" stream), and a fourth while Iceberg's ``rewrite_data_files`` compacts at
the same cadence instead. The "maintain-once" stream runs maintain's rounds without the kept
index, as ``--once``, the procedure and each round of a restarted service plan them (today's
plan: every data file the new deletes may touch read again); "maintain-index" runs every round
through the kept index (``spark.eqdelete.maintain.liveIndex=always``), where "maintain" lets
each round choose (auto).

With ``seed_rows``, each stream's table starts as a scattered table of that many rows (keys
0 .. seed_rows-1, every data file of ``seed_rows_per_file`` spanning all of them, as a streaming
sink leaves a table after a year) that Spark writes before Flink's job starts, so the job's
upserts delete rows in every data file: what a round costs on a large table, not a fresh one.
Equality deletes of 1% of the seed's keys (at most 1,000, none the job upserts) are committed
then, and a round (or compaction) runs on them before the job starts: a service already running
on the table, whose kept index that round builds (reported apart from the stream's rounds).

Results: ``lakehouse.json`` and ``lakehouse.md`` in the output directory, and a chart,
``lakehouse.png``: seconds a round against the rows Flink had committed, and the lag over time,
both ways.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import SparkSession

from eqdelete.compare import Variant, measure
from eqdelete.config import STRATEGIES
from eqdelete.maintain import maintain_round
from eqdelete.toggles import use_conf, use_strategy
from eqdelete.tools import changes_lag, flink
from eqdelete.tools.bench import FLINK_QUERY, reading_keys
from eqdelete.tools.lakehouse import Lakehouse, committed_to

NAMESPACE = "bench"
REFERENCES = ("floor", "floor_keys", "deletes_read")
#: No cache across queries: Iceberg's executor cache of delete files, eqdelete's filter indexes.
UNCACHED = [("spark.sql.iceberg.executor-cache.delete-files.enabled", "false"),
            ("spark.eqdelete.filter.cacheMaxKeys", "0")]
_GET = re.compile(r"\{GET@\w+ http://[^/]+/(\S+) HTTP")


@dataclass(frozen=True)
class Sizes:
    """The jobs' shapes: rows upserted over keys, a commit every checkpoint."""

    read_rows: int = 2_000_000
    read_keys: int = 500_000
    read_checkpoints: int = 20
    stream_rows: int = 4_000_000
    stream_keys: int = 1_000_000
    stream_checkpoints: int = 60
    checkpoint_ms: int = 3000
    cadence: float = 20.0
    compaction_dead_ratio: float = 0.3
    compaction_budget_bytes: int = 64 << 20   # an hour, for the maintain+compaction stream
    seed_rows: int = 0          # a scattered table of this many rows under each stream's job
    seed_rows_per_file: int = 1_000_000
    changes_lag_seconds: int = 120   # how long the writer writes beside the changes stream (--changes-lag-ms)

    @staticmethod
    def quick() -> Sizes:
        # Both jobs paced over 10 checkpoints: a machine busy with other work completed one
        # checkpoint in the 4 s of a job paced over 4, and one in the 8 s of a job over 8.
        return Sizes(read_rows=20_000, read_keys=5_000, read_checkpoints=10, stream_rows=20_000, stream_keys=5_000,
                     stream_checkpoints=10, checkpoint_ms=1000, cadence=3.0, compaction_budget_bytes=-1,
                     changes_lag_seconds=20)

    @property
    def stream_rows_per_second(self) -> float:
        return self.stream_rows / (self.stream_checkpoints * self.checkpoint_ms / 1000)


@dataclass
class Reads:
    table: str
    data_files: int
    equality_delete_files: int
    equality_delete_rows: int
    medians: dict[str, float]
    limit: float
    x_limit: dict[str, float]
    x_native: dict[str, float]
    delete_file_gets: dict[str, dict[str, int]]  # warm / uncached: strategy -> GETs
    auto_chose: str
    identical: bool


@dataclass
class Tick:
    """One round of maintain, or one compaction, while the job ran."""

    committed: bool
    at: float = 0.0            # seconds since the job's first commit
    seconds: float = 0.0
    rows_written: int = 0      # rows Flink had committed when it started
    table_rows: int = 0        # records in the data files then
    rows_resolved: int = 0
    data_files_read: int = 0
    files_rewritten: int = 0   # data files (rewrite_data_files), position delete files (maintain)
    data_files_compacted: int = 0  # data files maintain rewrote past the dead-row share
    conflicts: int = 0
    lag_before: float = 0.0    # the oldest live equality delete's age when it started
    lag_seconds: float = 0.0   # the same after it
    bytes_written: int = 0     # the files its commits added (position deletes, or data rewritten)
    failure: str = ""          # why a compaction committed nothing


@dataclass
class Stream:
    how: str                   # one of STREAMS
    commits: int
    rows: int
    ticks: list[Tick] = field(default_factory=list)
    files_after: dict[str, int] = field(default_factory=dict)  # live files at the end, by content
    before_job: Tick | None = None  # on a seeded table: the round before the job (builds the kept index)


def _spec(name: str, rows: int, keys: int, checkpoints: int, checkpoint_ms: int) -> dict[str, Any]:
    return flink.streaming_upsert_spec(name, rows=rows, keys=keys, checkpoints=checkpoints,
                                       checkpoint_interval_ms=checkpoint_ms)


def _write(lake: Lakehouse, spec: dict[str, Any], workdir: Path) -> flink.FlinkRun:
    return flink.start({"catalog": lake.flink_properties(), "namespace": NAMESPACE, "tables": [spec]}, workdir)


def _gets(lake: Lakehouse, offset: int, keys: set[str]) -> tuple[int, int]:
    """GETs of ``keys`` logged since ``offset``, and the log's new end."""
    with lake.requests_log.open("rb") as log:
        log.seek(offset)
        new = log.read()
    found = sum(1 for m in _GET.finditer(new.decode(errors="replace")) if m.group(1) in keys)
    return found, offset + len(new)


def reads(spark: SparkSession, lake: Lakehouse, sizes: Sizes, workdir: Path, runs: int,
          say: Callable[[str], None]) -> Reads:
    spec = _spec("reads", sizes.read_rows, sizes.read_keys, sizes.read_checkpoints, sizes.checkpoint_ms)
    table = f"lake.{NAMESPACE}.reads"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{NAMESPACE}")
    for suffix in ("", "_floor"):
        spark.sql(f"DROP TABLE IF EXISTS {table}{suffix} PURGE")
    say(f"Flink writing {spec['rows']:,} upserts of {spec['keys']:,} keys in ~{sizes.read_checkpoints} commits")
    _write(lake, spec, workdir / "flink-reads").wait(timeout=3600)
    spark.sql(f"REFRESH TABLE {table}")
    deletes = spark.sql(f"SELECT file_path, record_count FROM {table}.delete_files WHERE content = 2").collect()
    say(f"{len(deletes)} equality delete files, {sum(d.record_count for d in deletes):,} rows: the floor and a "
        "local copy of the delete files")
    with use_strategy(spark, "native"):
        spark.sql(f"CREATE TABLE {table}_floor USING iceberg AS SELECT * FROM {table}")
    copies = _copy_off_the_store(lake, [d.file_path for d in deletes], workdir / "delete-files")
    sql, floor_sql = FLINK_QUERY.format(t=table), FLINK_QUERY.format(t=f"{table}_floor")
    variants = [Variant(s, s, sql) for s in STRATEGIES] + [
        Variant("floor", "native", floor_sql),
        Variant("floor_keys", "native", reading_keys(floor_sql, ["k"])),
        Variant("deletes_read", "native", f"SELECT count(k) AS k_read FROM parquet.`{copies}`"),
    ]
    timings = measure(spark, variants, runs=runs, warmup=1, progress=say, keep_rows=True)
    medians = {n: statistics.median(t.seconds) for n, t in timings.items()}
    limit = medians["floor_keys"] + medians["deletes_read"]
    # One more query under each strategy, its GETs of equality delete files counted: warm, as the
    # timed runs left it (Iceberg's executor cache and eqdelete's index cache kept), and with
    # neither cache, as a query on a fresh executor reads.
    delete_keys = {lake.object_key(d.file_path) for d in deletes}
    offset = lake.requests_log.stat().st_size
    gets: dict[str, dict[str, int]] = {"warm": {}, "uncached": {}}
    for kind, conf in (("warm", []), ("uncached", UNCACHED)):
        for strategy in STRATEGIES:
            with use_strategy(spark, strategy), use_conf(spark, conf):
                spark.sql(sql).collect()
            gets[kind][strategy], offset = _gets(lake, offset, delete_keys)
    from eqdelete.decisions import decisions

    with use_strategy(spark, "auto"):
        auto = decisions(spark.sql(sql))
    data_files = spark.sql(f"SELECT count(*) FROM {table}.data_files").first()[0]
    rows = {n: timings[n].rows for n in (*STRATEGIES, "floor")}
    return Reads(table=table, data_files=data_files, equality_delete_files=len(deletes),
                 equality_delete_rows=sum(d.record_count for d in deletes), medians=medians, limit=limit,
                 x_limit={n: m / limit for n, m in medians.items()},
                 x_native={n: m / medians["native"] for n, m in medians.items()}, delete_file_gets=gets,
                 auto_chose=",".join(sorted({d.strategy for d in auto})) or "native",
                 identical=all(r == rows["floor"] for r in rows.values()))


@dataclass
class AtLatency:
    """Reads and a round of maintain with ``latency_ms`` to the first byte of every request to the store."""

    latency_ms: int
    medians: dict[str, float]          # native, auto, floor_keys, deletes_read, all through the delay and uncached
    limit: float
    x_limit: dict[str, float]
    delete_file_gets: dict[str, int]   # strategy -> GETs of equality delete files, one query, no cache
    requests: dict[str, int]           # strategy -> every request to the store, the same query
    round_seconds: float               # a round of maintain resolving ``round_deletes`` new delete rows
    round_requests: int                # its requests to the store
    round_data_files_read: int
    round_deletes: int


def at_latency(spark: SparkSession, lake: Lakehouse, latency_ms: int, base: Reads, copies: Path, runs: int,
               say: Callable[[str], None], round_deletes: int = 10_000) -> AtLatency:
    """The reads' query natively, under auto and as floor_keys through a proxy that holds every
    request to the store ``latency_ms`` before forwarding it (a catalog of its own, ``lake_<ms>ms``,
    whose FileIO goes through it), timed and counted with no cache across queries (Iceberg's
    executor cache and eqdelete's index cache off: each query pays its reads of delete files, as
    on a fresh executor); deletes_read is the delete keys read once through the same delay, from a
    table of as many files. Then a round of maintain on a copy of the floor whose data files each
    hold a random share of the keys (the scattered case: the round reads every one), given
    ``round_deletes`` new delete rows."""
    from eqdelete.tools.forwarding_proxy import ForwardingProxy
    from eqdelete.deletes import write_equality_deletes

    # The delete keys in a table of their own on the store, one data file per equality delete file.
    keys_table = f"{base.table}_delete_keys"
    spark.sql(f"DROP TABLE IF EXISTS {keys_table} PURGE")
    spark.sql(f"CREATE TABLE {keys_table} USING iceberg AS SELECT k FROM parquet.`{copies}` LIMIT 0")
    for copy in sorted(p for p in copies.iterdir() if p.suffix == ".parquet"):
        spark.sql(f"INSERT INTO {keys_table} SELECT k FROM parquet.`{copy}`")
    with ForwardingProxy(lake.s3_port, latency=latency_ms / 1000.0) as proxy:
        catalog = f"lake_{latency_ms}ms"
        for key, value in {**lake.spark_options(catalog), f"spark.sql.catalog.{catalog}.s3.endpoint": proxy.url}.items():
            spark.conf.set(key, value)
        table = base.table.replace("lake.", f"{catalog}.", 1)
        delayed_keys = keys_table.replace("lake.", f"{catalog}.", 1)
        sql, floor_sql = FLINK_QUERY.format(t=table), FLINK_QUERY.format(t=f"{table}_floor")
        say(f"{latency_ms} ms to the first byte of each request to the store")
        variants = [Variant("native", "native", sql), Variant("auto", "auto", sql),
                    Variant("floor_keys", "native", reading_keys(floor_sql, ["k"])),
                    Variant("deletes_read", "native", f"SELECT count(k) AS k_read FROM {delayed_keys}")]
        with use_conf(spark, UNCACHED):
            timings = measure(spark, variants, runs=runs, warmup=1, progress=say, keep_rows=False)
        medians = {n: statistics.median(t.seconds) for n, t in timings.items()}
        limit = medians["floor_keys"] + medians["deletes_read"]
        deletes = {lake.object_key(r[0]) for r in spark.sql(f"SELECT file_path FROM {table}.delete_files "
                                                             "WHERE content = 2").collect()}

        def counted(run: Callable[[], Any]) -> tuple[int, int]:
            before = len(proxy.seen)
            run()
            seen = proxy.seen[before:]
            keys = [r.path.split("?", 1)[0].lstrip("/") for r in seen if r.method == "GET"]
            return sum(k in deletes for k in keys), len(seen)

        gets, requests = {}, {}
        for strategy in ("native", "auto"):
            with use_strategy(spark, strategy), use_conf(spark, UNCACHED):
                gets[strategy], requests[strategy] = counted(lambda: spark.sql(sql).collect())
        # A round: new deletes on a copy of the floor (keys scattered over every data file), resolved through the delay.
        copy = f"{catalog}.{NAMESPACE}.round_{latency_ms}ms"
        spark.sql(f"DROP TABLE IF EXISTS {copy} PURGE")
        spark.sql(f"CREATE TABLE {copy} USING iceberg AS SELECT /*+ REPARTITION({base.data_files}) */ * "
                  f"FROM {table}_floor")
        keys = spark.sql(f"SELECT k FROM {copy} ORDER BY hash(k) LIMIT {round_deletes}")
        write_equality_deletes(spark, copy, ["k"], keys)
        holder: dict[str, Any] = {}
        _, round_requests = counted(lambda: holder.update(r=maintain_round(spark, copy)))
        spark.sql(f"DROP TABLE IF EXISTS {copy} PURGE")
    spark.sql(f"DROP TABLE IF EXISTS {keys_table} PURGE")
    r = holder["r"]
    say(f"{latency_ms} ms: native {medians['native']:.2f} s, auto {medians['auto']:.2f} s, limit {limit:.2f} s; "
        f"a round {r.seconds:.1f} s with {round_requests} requests")
    return AtLatency(latency_ms=latency_ms, medians=medians, limit=limit, x_limit={n: m / limit for n, m in medians.items()},
                     delete_file_gets=gets, requests=requests, round_seconds=r.seconds, round_requests=round_requests,
                     round_data_files_read=r.data_files_read, round_deletes=round_deletes)


def _copy_off_the_store(lake: Lakehouse, locations: list[str], directory: Path) -> Path:
    """The files at ``locations`` copied, byte for byte, into ``directory`` (emptied first)."""
    import shutil

    from pyarrow import fs

    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    store = lake.s3_filesystem()
    for location in locations:
        key = lake.object_key(location)
        fs.copy_files(key, str(directory / key.rsplit("/", 1)[1]), source_filesystem=store,
                      destination_filesystem=fs.LocalFileSystem())
    return directory


def _table_rows(spark: SparkSession, table: str) -> tuple[int, int]:
    """Rows Flink has committed so far (its commits' added records), and the records in the
    table's data files now (which compaction brings down to the live rows)."""
    flink_rows, total = spark.sql(
        f"SELECT sum(IF(summary['flink.job-id'] IS NOT NULL, CAST(summary['added-records'] AS BIGINT), 0)), "
        f"max_by(summary['total-records'], committed_at) FROM {table}.snapshots").first()
    return int(flink_rows or 0), int(total or 0)


def _lag(spark: SparkSession, table: str) -> float:
    """The age of the oldest live equality delete, from the commit that added it (0: none)."""
    oldest = spark.sql(f"SELECT min(s.committed_at) FROM {table}.entries e JOIN {table}.snapshots s "
                       "ON e.snapshot_id = s.snapshot_id WHERE e.status < 2 AND e.data_file.content = 2").first()[0]
    return 0.0 if oldest is None else max(0.0, time.time() - oldest.timestamp())


#: The ways of keeping the stream's table, each on a table of its own.
STREAMS = {"maintain": "maintained", "maintain+compaction": "maintained_compacting", "rewrite_data_files": "compacted",
           "maintain-once": "maintained_once", "maintain-index": "maintained_index"}
#: What the round before a seeded table's job does beside resolving, by stream.
KEEPER_BEFORE_JOB = {"maintain": " (auto: builds the kept index where it pays)",
                     "maintain+compaction": " (auto: builds the kept index where it pays)",
                     "maintain-once": " (today's plan: no state)", "maintain-index": " (builds the kept index)",
                     "rewrite_data_files": " (a compaction)"}
#: Each maintain stream's choice of a kept index: auto unless named (spark.eqdelete.maintain.liveIndex).
LIVE_INDEX = {"maintain-once": [], "maintain-index": [("spark.eqdelete.maintain.liveIndex", "always")]}
#: What runs unless the streams are named (maintain-once and maintain-index are references for large seeded tables).
DEFAULT_STREAMS = ("maintain", "maintain+compaction", "rewrite_data_files")


def _stream_table(how: str) -> str:
    return f"lake.{NAMESPACE}.{STREAMS[how]}"


def stream(spark: SparkSession, lake: Lakehouse, sizes: Sizes, how: str, workdir: Path,
           say: Callable[[str], None], table: str | None = None) -> Stream:
    """A job of the stream's shape while ``how`` (one of STREAMS) runs every cadence, on ``table``
    (default: the stream's own)."""
    table = table or _stream_table(how)
    name = table.rsplit(".", 1)[1]
    spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
    spec = _spec(name, sizes.stream_rows, sizes.stream_keys, sizes.stream_checkpoints, sizes.checkpoint_ms)
    result, started = Stream(how, 0, spec["rows"]), None
    if sizes.seed_rows:
        say(f"seeding {table} with {sizes.seed_rows:,} scattered rows")
        seeded = seed(spark, table, spec, sizes.seed_rows, sizes.seed_rows_per_file)
        spec["if_not_exists"] = True
        result.before_job = _before_job(spark, table, how, sizes, seeded)
        say(f"{how} before the job: {result.before_job.seconds:.1f} s, {result.before_job.rows_resolved:,} rows resolved")
    say(f"{how} every {sizes.cadence:.0f} s while Flink writes {spec['rows']:,} upserts of {spec['keys']:,} keys")
    run = _write(lake, spec, workdir / f"flink-{name}")
    try:
        while True:
            running = run.running()
            # Rounds start with the job's first commit (a seeded table has the seed's before).
            if not committed_to(spark, table) or (sizes.seed_rows and not _table_rows(spark, table)[0]):
                if not running:
                    break
                time.sleep(1)
                continue
            started = started or time.monotonic()
            began, began_ms = time.monotonic(), int(time.time() * 1000)  # committed_to refreshed the table
            written, records, lag_before = *_table_rows(spark, table), _lag(spark, table)
            tick = _rewrite_tick(spark, table) if how == "rewrite_data_files" else _maintain_tick(spark, table, how, sizes)
            tick.at, tick.bytes_written = round(began - started, 1), _bytes_committed_since(spark, table, began_ms)
            tick.rows_written, tick.table_rows, tick.lag_before = written, records, lag_before
            result.ticks.append(tick)
            say(f"{how} at {tick.at:.0f} s: {tick.seconds:.1f} s with {written:,} rows written ({records:,} in data "
                f"files), lag {lag_before:.1f} s before, {tick.lag_seconds:.1f} s after")
            if not running:
                break
            time.sleep(max(0.0, sizes.cadence - (time.monotonic() - began)))
    finally:
        written = run.wait(timeout=3600)
    result.commits = sum("flink.job-id" in s["summary"] for s in written["tables"][name]["snapshots"])
    spark.sql(f"REFRESH TABLE {table}")
    result.files_after = {CONTENT[c]: n for c, n in spark.sql(
        f"SELECT content, count(*) FROM {table}.files GROUP BY content ORDER BY content").collect()}
    return result


CONTENT = {0: "data", 1: "position deletes", 2: "equality deletes"}


def seed(spark: SparkSession, table: str, spec: dict[str, Any], rows: int, rows_per_file: int) -> int:
    """``table`` created as the job of ``spec`` (unpartitioned: k, seq, v) would create it,
    holding keys 0 .. n-1 (n: ``rows`` rounded down to whole files) scattered: data file i holds
    the keys k with k % files == i, so every file spans every key. Returns n."""
    from pyspark.sql import functions as F

    files = max(1, rows // rows_per_file)
    per_file = rows // files
    flink.create_in_spark(spark, table, spec)
    ids = spark.range(0, files * per_file, 1, files)  # partition i: ids i*per_file .. (i+1)*per_file-1
    (ids.select(((F.col("id") % per_file) * files + F.floor(F.col("id") / per_file)).cast("bigint").alias("k"),
                F.lit(-1).cast("bigint").alias("seq"), F.concat(F.lit("s"), F.col("id").cast("string")).alias("v"))
        .writeTo(table).option("distribution-mode", "none").append())
    return files * per_file


def _bytes_committed_since(spark: SparkSession, table: str, since_ms: int) -> int:
    """Bytes of the files added by commits since ``since_ms`` other than Flink's."""
    row = spark.sql(f"SELECT sum(CAST(summary['added-files-size'] AS BIGINT)) FROM {table}.snapshots "
                    f"WHERE committed_at >= timestamp_millis({since_ms}) AND summary['flink.job-id'] IS NULL").first()
    return int(row[0] or 0)


def seed_deletes(seeded: int) -> int:
    """The equality delete rows committed on a seeded table before its job: its last keys."""
    return min(1000, max(1, seeded // 100))


def _before_job(spark: SparkSession, table: str, how: str, sizes: Sizes, seeded: int) -> Tick:
    """Equality deletes of the seed's last keys (the job upserts the first ones), then ``how``'s
    round on them: a service already running on the table."""
    from eqdelete.deletes import write_equality_deletes

    deleted = spark.range(seeded - seed_deletes(seeded), seeded).withColumnRenamed("id", "k")
    write_equality_deletes(spark, table, ["k"], deleted)
    tick = _rewrite_tick(spark, table) if how == "rewrite_data_files" else _maintain_tick(spark, table, how, sizes)
    tick.table_rows = seeded
    return tick


def _maintain_tick(spark: SparkSession, table: str, how: str, sizes: Sizes) -> Tick:
    # On format v2 a data file's dead share counts once its position deletes are its own, which the
    # position delete compaction makes them: at 2 files a reader opens, so the share shows soon.
    compacting = [("spark.eqdelete.maintain.compactDataBytesPerHour", str(sizes.compaction_budget_bytes)),
                  ("spark.eqdelete.maintain.compactDataDeadRatio", str(sizes.compaction_dead_ratio)),
                  ("spark.eqdelete.maintain.compactPositionDeleteFiles", "2")]
    with use_conf(spark, (compacting if how == "maintain+compaction" else []) + LIVE_INDEX.get(how, [])):
        # A long-running maintain (each round through the kept index or reading, as auto chooses;
        # maintain-index: always the index), or (maintain-once) today's plan, each round as --once runs it.
        r = maintain_round(spark, table, keep_index=how != "maintain-once")
    return Tick(committed=r.committed, seconds=r.seconds, rows_resolved=r.rows_resolved,
                data_files_read=r.data_files_read, files_rewritten=r.position_delete_files_compacted,
                data_files_compacted=r.data_files_compacted, conflicts=r.conflicts + r.compaction_conflicted,
                lag_seconds=r.lag_seconds)


def _rewrite_tick(spark: SparkSession, table: str) -> Tick:
    """Iceberg's compaction at its best for readers: every file with deletes rewritten, and delete
    files no data file needs any more dropped."""
    catalog, rest = table.split(".", 1)
    began = time.monotonic()
    try:
        row = spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => '{rest}', options => "
                        "map('delete-file-threshold', '1', 'remove-dangling-deletes', 'true'))").first()
        tick = Tick(committed=row.rewritten_data_files_count > 0, files_rewritten=row.rewritten_data_files_count)
    except Exception as e:  # noqa: BLE001 - a conflict with the writer: the next one, as maintain would
        tick = Tick(committed=False, conflicts=1, failure=_cause(e))
    tick.seconds = time.monotonic() - began
    spark.sql(f"REFRESH TABLE {table}")
    tick.lag_seconds = _lag(spark, table)
    return tick


def _cause(e: Exception) -> str:
    """The JVM exception's own line out of py4j's message (which starts 'An error occurred')."""
    lines = [line.strip().lstrip(": ") for line in str(e).splitlines() if line.strip()]
    cause = next((line for line in lines if re.match(r"^[\w.$]+(Exception|Error): ", line)), lines[0] if lines else repr(e))
    return cause[:300]


#: How long each writer of the commit-interval sweep writes, at the main stream's rows a second.
WRITER_SWEEP_SECONDS = 120


def writer_interval(spark: SparkSession, lake: Lakehouse, sizes: Sizes, interval_ms: int, workdir: Path,
                    say: Callable[[str], None]) -> Stream:
    """maintain every cadence beside a writer committing every ``interval_ms``, for
    WRITER_SWEEP_SECONDS at the main stream's rate of rows."""
    swept = replace(sizes, checkpoint_ms=interval_ms, stream_rows=int(sizes.stream_rows_per_second * WRITER_SWEEP_SECONDS),
                    stream_checkpoints=max(2, WRITER_SWEEP_SECONDS * 1000 // interval_ms))
    return stream(spark, lake, swept, "maintain", workdir, say,
                  table=f"lake.{NAMESPACE}.maintain_beside_{interval_ms}ms_commits")


def run(spark: SparkSession, lake: Lakehouse, out: Path, *, sizes: Sizes, runs: int,
        progress: Callable[[str], None], streams_of: tuple[str, ...] = DEFAULT_STREAMS,
        with_reads: bool = True, latencies_ms: tuple[int, ...] = (),
        writer_intervals_ms: tuple[int, ...] = (), changes_lag_ms: tuple[int, ...] = (),
        apply_changes_lag: bool = False) -> dict[str, Any]:
    """The reads (unless ``with_reads`` is False), each of ``latencies_ms`` (with the reads), then
    each stream of ``streams_of``, then maintain beside a writer committing every one of
    ``writer_intervals_ms``, then the changes stream's lag beside a writer committing every one of
    ``changes_lag_ms``, without and with maintain (``changes_lag``; ``apply_changes_lag``: each
    micro-batch applied to a copy, the lag until the copy holds it)."""
    unknown = set(streams_of) - set(STREAMS)
    if unknown:
        raise ValueError(f"no stream {', '.join(sorted(unknown))}: choose from {', '.join(STREAMS)}")
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    results: dict[str, Any] = {"sizes": asdict(sizes), "master": spark.sparkContext.master}
    if with_reads:
        base = reads(spark, lake, sizes, work, runs, progress)
        results["reads"] = asdict(base)
        _save(out, results)
        results["latency"] = [asdict(at_latency(spark, lake, ms, base, work / "delete-files", runs, progress))
                              for ms in latencies_ms]
        _save(out, results)
    streams = [stream(spark, lake, sizes, how, work, progress) for how in streams_of]
    results["streams"] = [asdict(s) for s in streams]
    if streams:  # a reader's query on each table once its writer is done and the last round is in
        after = measure(spark, [Variant(f"after {s.how}", "native", FLINK_QUERY.format(t=_stream_table(s.how)))
                                for s in streams], runs=runs, warmup=1, progress=progress, keep_rows=True)
        results["reads_after"] = {n: statistics.median(t.seconds) for n, t in after.items()}
        _save(out, results)
    results["writer_intervals"] = []
    for ms in writer_intervals_ms:
        results["writer_intervals"].append({"interval_ms": ms, **asdict(writer_interval(spark, lake, sizes, ms, work, progress))})
        _save(out, results)
    results["changes_lag"] = []
    for ms in changes_lag_ms:
        for maintained in (False, True):
            lag = changes_lag.run_one(spark, lake, ms, maintained, rows_per_second=sizes.stream_rows_per_second,
                                      keys=sizes.stream_keys, seconds=sizes.changes_lag_seconds, cadence=sizes.cadence,
                                      workdir=work, say=progress, apply=apply_changes_lag)
            results["changes_lag"].append(asdict(lag))
            _save(out, results)
    _chart(out, results)
    return results


def _save(out: Path, results: dict[str, Any]) -> None:
    (out / "lakehouse.json").write_text(json.dumps(results, indent=2))
    (out / "lakehouse.md").write_text(markdown(results))


def markdown(results: dict[str, Any]) -> str:
    lines = []
    r = results.get("reads")
    if r:
        columns = (*STRATEGIES, *REFERENCES)
        lines += [f"Reads of {r['table']}: {r['data_files']} data files, {r['equality_delete_files']} equality delete "
                  f"files of {r['equality_delete_rows']:,} rows; rows {'identical' if r['identical'] else 'DIFFER'}; "
                  f"auto chose {r['auto_chose']}", "",
                  "| | " + " | ".join(columns) + " | limit |", "| --- |" + " ---: |" * (len(columns) + 1),
                  "| median s | " + " | ".join(f"{r['medians'][c]:.2f}" for c in columns) + f" | {r['limit']:.2f} |",
                  "| x limit | " + " | ".join(f"{r['x_limit'][c]:.2f}" for c in columns) + " | 1.00 |",
                  *(f"| GETs of equality delete files, one query, {kind} | "
                    + " | ".join(str(gets.get(c, "")) for c in columns) + " | |"
                    for kind, gets in r["delete_file_gets"].items()), ""]
    if results.get("latency"):
        lines += ["Reads and a round at an object store's latency (to the first byte of each request; "
                  "requests and GETs of equality delete files for one query without caches):", "",
                  "| latency | native s | auto s | floor_keys s | deletes_read s | limit s | native x limit | auto x limit | native requests (delete-file GETs) "
                  "| auto requests (delete-file GETs) | a round: s, requests, data files read |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for a in results["latency"]:
            m = a["medians"]
            lines.append(f"| {a['latency_ms']} ms | {m['native']:.2f} | {m['auto']:.2f} | {m['floor_keys']:.2f} | "
                         f"{m['deletes_read']:.2f} | {a['limit']:.2f} | "
                         f"{a['x_limit']['native']:.2f} | {a['x_limit']['auto']:.2f} | {a['requests']['native']} "
                         f"({a['delete_file_gets']['native']}) | {a['requests']['auto']} ({a['delete_file_gets']['auto']}) | "
                         f"{a['round_seconds']:.1f}, {a['round_requests']}, {a['round_data_files_read']} "
                         f"({a['round_deletes']:,} new delete rows) |")
        lines.append("")
    for s in results.get("streams", []):
        ticks = s["ticks"]
        before = s.get("before_job")
        if before:
            lines += [f"{s['how']} on a table seeded with {before['table_rows']:,} scattered rows, before the job: "
                      f"{before['seconds']:.1f} s, {before['rows_resolved']:,} rows resolved, {before['data_files_read']} "
                      f"data files read{KEEPER_BEFORE_JOB.get(s['how'], '')}", ""]
        lines += [f"{s['how']} every cadence while Flink committed {s['commits']} snapshots of {s['rows']:,} upserts:", "",
                  "| at s | rows written | records in data files | seconds | committed | rows resolved | data files read | "
                  "files rewritten | data files compacted | MB written | conflicts | lag before s | lag after s |",
                  "| ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        lines += [f"| {t['at']:.0f} | {t['rows_written']:,} | {t['table_rows']:,} | {t['seconds']:.1f} | {t['committed']} | {t['rows_resolved']:,} | "
                  f"{t['data_files_read']} | {t['files_rewritten']} | {t.get('data_files_compacted', 0)} | {t.get('bytes_written', 0) / 1e6:.1f} | "
                  f"{t['conflicts']} | {t.get('lag_before', 0):.1f} | {t['lag_seconds']:.1f} |" for t in ticks]
        failures = sorted({t.get("failure", "") for t in ticks} - {""})
        total = sum(t.get("bytes_written", 0) for t in ticks) / 1e6
        files = ", ".join(f"{n} {c}" for c, n in s.get("files_after", {}).items())
        lines += ["", f"- in all: {sum(t['seconds'] for t in ticks):.1f} s, {total:.1f} MB written; live files at the "
                      f"end: {files}", *(f"- committed nothing: {f}" for f in failures), ""]
    if results.get("reads_after"):
        lines += ["A reader's query at the end (native, median s): " + ", ".join(
            f"{n} {v:.2f}" for n, v in results["reads_after"].items()), ""]
    if results.get("writer_intervals"):
        cadence = results["sizes"]["cadence"]
        lines += [f"maintain every {cadence:.0f} s beside a writer committing every interval for {WRITER_SWEEP_SECONDS} s:", "",
                  "| writer commits every | its commits | rounds | rounds committed | conflicts | round s, median and max "
                  "| lag before a round s, max | lag after s, max | most lag x maintain's interval |",
                  "| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
        for w in results["writer_intervals"]:
            ticks = w["ticks"] or [{"seconds": 0.0, "lag_before": 0.0, "lag_seconds": 0.0, "committed": False, "conflicts": 0}]
            worst = max(max(t.get("lag_before", 0.0), t["lag_seconds"]) for t in ticks)
            lines.append(f"| {w['interval_ms'] / 1000:g} s | {w['commits']} | {len(w['ticks'])} | "
                         f"{sum(t['committed'] for t in w['ticks'])} | {sum(t['conflicts'] for t in w['ticks'])} | "
                         f"{statistics.median(t['seconds'] for t in ticks):.1f}, {max(t['seconds'] for t in ticks):.1f} | "
                         f"{max(t.get('lag_before', 0.0) for t in ticks):.1f} | {max(t['lag_seconds'] for t in ticks):.1f} | "
                         f"{worst / cadence:.2f} |")
        lines.append("")
    if results.get("changes_lag"):
        lines += [changes_lag.markdown(results["changes_lag"], results["sizes"]["cadence"])]
    return "\n".join(lines) + "\n"


def _chart(out: Path, results: dict[str, Any]) -> None:
    if not results.get("streams"):
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    figure, (cost, lag) = plt.subplots(1, 2, figsize=(11, 4))
    for s in results["streams"]:
        rows = [t["rows_written"] for t in s["ticks"]]
        cost.plot(rows, [t["seconds"] for t in s["ticks"]], marker="o", label=s["how"])
        # The lag as a reader sees it: up to its value before a round, down to its value after.
        times = [x for t in s["ticks"] for x in (t["at"], t["at"] + t["seconds"])]
        lags = [x for t in s["ticks"] for x in (t.get("lag_before", 0), t["lag_seconds"])]
        lag.plot(times, lags, marker=".", label=s["how"])
    cost.set(xlabel="rows Flink had committed", ylabel="seconds a round", title="cost as the table grows")
    lag.set(xlabel="seconds since the job's first commit", ylabel="s", title="lag: the oldest live equality delete's age")
    for axis in (cost, lag):
        axis.legend()
    figure.tight_layout()
    figure.savefig(out / "lakehouse.png", dpi=110)
    plt.close(figure)
