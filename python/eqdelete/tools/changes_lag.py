"""The changes stream's lag beside a Flink writer (``bench --lakehouse --changes-lag-ms``).

For each commit interval, twice (the table left alone, and with ``maintain`` resolving it a
round every cadence): a checkpointed Flink upsert job writes a new table on the store, through
the REST catalog, for ``seconds`` at the benchmark's stream rate, while a Structured Streaming
query reads the table's changes (``eqdelete.changes_stream``, from its first snapshot, the
default trigger: a micro-batch as soon as the last one is done). Each micro-batch is consumed
whole (its rows counted by snapshot and change type, every row read) and the moment that ends
is recorded. A snapshot's **lag** is that moment less the snapshot's commit time (Iceberg's
``committed_at``, from the same machine's clock): how long after Flink committed a row a
consumer has processed it.

The rows are checked, not only timed: the inserts less the deletes the stream delivered must
equal the table's rows at the end, and every Flink snapshot that changed rows must have reached
the consumer.
"""

from __future__ import annotations

import shutil
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession

from eqdelete.changes import changes_stream
from eqdelete.maintain import maintain_round
from eqdelete.tools import flink
from eqdelete.tools.lakehouse import Lakehouse, committed_to

NAMESPACE = "bench"


@dataclass
class ChangesLag:
    interval_ms: int
    maintained: bool
    seconds: int               # how long the writer wrote
    commits: int = 0           # Flink's snapshots
    rounds: int = 0            # maintain's rounds while it wrote
    batches: int = 0           # micro-batches with rows
    rows: dict[str, int] = field(default_factory=dict)  # INSERT / DELETE rows delivered
    lags: list[float] = field(default_factory=list)      # one a Flink snapshot, in commit order
    batch_seconds: list[float] = field(default_factory=list)  # how long each micro-batch with rows took

    def summary(self) -> dict[str, float]:
        lags = sorted(self.lags) or [0.0]
        return {"median": statistics.median(lags), "p90": lags[min(len(lags) - 1, int(0.9 * len(lags)))],
                "max": lags[-1], "batch_median": statistics.median(self.batch_seconds or [0.0])}


class _Consumer:
    """foreachBatch's function: each micro-batch's rows counted by snapshot and change type."""

    def __init__(self) -> None:
        self.done_at: dict[int, float] = {}  # snapshot -> when the batch holding its rows was done
        self.rows: dict[str, int] = {}
        self.batch_seconds: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, batch: DataFrame, _batch_id: int) -> None:
        began = time.time()
        counts = batch.groupBy("_commit_snapshot_id", "_change_type").count().collect()
        done = time.time()
        with self.lock:
            for snapshot, kind, n in counts:
                self.done_at[snapshot] = done
                self.rows[kind] = self.rows.get(kind, 0) + n
            if counts:
                self.batch_seconds.append(done - began)


def run_one(spark: SparkSession, lake: Lakehouse, interval_ms: int, maintained: bool, *, rows_per_second: float,
            keys: int, seconds: int, cadence: float, workdir: Path, say: Callable[[str], None]) -> ChangesLag:
    name = f"changes_lag_{interval_ms}ms_{'maintained' if maintained else 'alone'}"
    table = f"lake.{NAMESPACE}.{name}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{NAMESPACE}")
    spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
    spec = flink.streaming_upsert_spec(name, rows=max(1, int(rows_per_second * seconds)), keys=keys,
                                       checkpoints=max(1, seconds * 1000 // interval_ms), checkpoint_interval_ms=interval_ms)
    flink.create_in_spark(spark, table, spec)  # empty: the stream starts before Flink's first commit
    spec["if_not_exists"] = True
    result = ChangesLag(interval_ms, maintained, seconds)
    consumer = _Consumer()
    checkpoint = workdir / f"{name}-checkpoint"
    shutil.rmtree(checkpoint, ignore_errors=True)  # an earlier run's, of the table dropped above
    query = (changes_stream(spark, table).writeStream.foreachBatch(consumer)
             .option("checkpointLocation", str(checkpoint)).start())
    say(f"{name}: Flink writes {spec['rows']:,} upserts of {keys:,} keys, a commit every {interval_ms / 1000:g} s, "
        f"while the changes stream reads{' and maintain runs every %.0f s' % cadence if maintained else ''}")
    run = flink.start({"catalog": lake.flink_properties(), "namespace": NAMESPACE, "tables": [spec]}, workdir / name)
    try:
        while run.running():
            if query.exception() is not None:
                raise RuntimeError(f"the changes stream of {table} failed: {query.exception()}")
            began = time.monotonic()
            if maintained and committed_to(spark, table):
                maintain_round(spark, table, keep_index=True)
                result.rounds += 1
            time.sleep(max(0.0, (cadence if maintained else 1.0) - (time.monotonic() - began)))
        written = run.wait(timeout=600)
        query.processAllAvailable()  # the source reloads the table: everything committed, Flink's last too
    finally:
        run.stop()
        query.stop()
    snapshots = written["tables"][name]["snapshots"]
    flink_snapshots = [s for s in snapshots if "flink.job-id" in s["summary"]]
    result.commits = len(flink_snapshots)
    changed = [s for s in flink_snapshots if int(s["summary"].get("added-records", "0")) > 0]
    missing = [s["snapshot_id"] for s in changed if s["snapshot_id"] not in consumer.done_at]
    if missing:
        raise AssertionError(f"{table}: Flink's snapshots {missing} never reached the changes stream")
    spark.sql(f"REFRESH TABLE {table}")
    live = spark.sql(f"SELECT count(*) FROM {table}").first()[0]
    net = consumer.rows.get("INSERT", 0) - consumer.rows.get("DELETE", 0)
    if net != live:
        raise AssertionError(f"{table}: the stream delivered {net:,} rows net (inserts less deletes), the table holds {live:,}")
    result.lags = [consumer.done_at[s["snapshot_id"]] - s["timestamp_ms"] / 1000 for s in changed]
    result.batches, result.rows, result.batch_seconds = len(consumer.batch_seconds), dict(consumer.rows), consumer.batch_seconds
    s = result.summary()
    say(f"{name}: {result.commits} commits, {result.batches} micro-batches, lag median {s['median']:.1f} s, "
        f"p90 {s['p90']:.1f} s, max {s['max']:.1f} s")
    return result


def markdown(results: list[dict[str, Any]], cadence: float) -> str:
    if not results:
        return ""
    lines = [f"The changes stream beside a Flink writer (lag: from a snapshot's commit to the end of the micro-batch "
             f"that delivered it; maintain every {cadence:.0f} s where on):", "",
             "| writer commits every | maintain | seconds written | commits | micro-batches | rows delivered (inserts, deletes) "
             "| micro-batch s, median | lag s, median | p90 | max |",
             "| ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in results:
        s = ChangesLag(**{k: r[k] for k in ("interval_ms", "maintained", "seconds", "lags", "batch_seconds")}).summary()
        rows = r["rows"]
        lines.append(f"| {r['interval_ms'] / 1000:g} s | {'on' if r['maintained'] else 'off'} | {r['seconds']} | {r['commits']} | "
                     f"{r['batches']} | {rows.get('INSERT', 0):,}, {rows.get('DELETE', 0):,} | {s['batch_median']:.1f} | "
                     f"{s['median']:.1f} | {s['p90']:.1f} | {s['max']:.1f} |")
    return "\n".join(lines) + "\n"
