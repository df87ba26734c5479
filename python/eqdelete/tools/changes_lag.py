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

With ``apply`` (``--apply``) the consumer is the pipeline's last step instead: each micro-batch
applied to a copy of the table (``eqdelete.apply_changes``, by its writer id and batch id, keys
``k``), as a user's ``foreachBatch`` does. A snapshot's lag is then until the apply of the batch
that delivered it returned, its commit on the copy done: how long after Flink committed a row the
copy holds it. Which batch delivered a snapshot is read from the query's offsets log (each
batch's end in the table's history), so the changes are computed once, by the apply. The check:
the copy holds the table's rows at the end, whole rows with their counts.
"""

from __future__ import annotations

import json
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
from eqdelete.sink import apply_changes
from eqdelete.tools import flink
from eqdelete.tools.lakehouse import Lakehouse, committed_to

NAMESPACE = "bench"


@dataclass
class ChangesLag:
    interval_ms: int
    maintained: bool
    seconds: int               # how long the writer wrote
    applied: bool = False      # the consumer applied each batch to a copy (else counted its rows)
    commits: int = 0           # Flink's snapshots
    rounds: int = 0            # maintain's rounds while it wrote
    batches: int = 0           # micro-batches with rows
    rows: dict[str, int] = field(default_factory=dict)  # INSERT / DELETE rows delivered (applied: the copy's rows inserted / deleted)
    lags: list[float] = field(default_factory=list)      # one a Flink snapshot, in commit order
    batch_seconds: list[float] = field(default_factory=list)  # how long each micro-batch with rows took

    def summary(self) -> dict[str, float]:
        lags = sorted(self.lags) or [0.0]
        return {"median": statistics.median(lags), "p90": lags[min(len(lags) - 1, int(0.9 * len(lags)))],
                "max": lags[-1], "batch_median": statistics.median(self.batch_seconds or [0.0])}


class _Batches:
    """What a consumer records of the micro-batches it was given: when each was done (by ``key``),
    the rows by change type, and how long each that had rows took."""

    def __init__(self) -> None:
        self.done_at: dict[int, float] = {}
        self.rows: dict[str, int] = {}
        self.batch_seconds: list[float] = []
        self.lock = threading.Lock()

    def record(self, keys: list[int], rows: dict[str, int], began: float, done: float, had_rows: bool) -> None:
        with self.lock:
            for key in keys:
                self.done_at[key] = done
            for kind, n in rows.items():
                self.rows[kind] = self.rows.get(kind, 0) + n
            if had_rows:
                self.batch_seconds.append(done - began)


class _Consumer(_Batches):
    """foreachBatch's function: each micro-batch's rows counted by snapshot and change type,
    recorded by snapshot."""

    def __call__(self, batch: DataFrame, _batch_id: int) -> None:
        began = time.time()
        counts = batch.groupBy("_commit_snapshot_id", "_change_type").count().collect()
        rows: dict[str, int] = {}
        for _snapshot, kind, n in counts:
            rows[kind] = rows.get(kind, 0) + n
        self.record([snapshot for snapshot, _kind, _n in counts], rows, began, time.time(), bool(counts))


class _Applier(_Batches):
    """foreachBatch's function with ``apply``: each micro-batch applied to the copy, once, recorded
    by batch id when that returned."""

    def __init__(self, copy: str, writer_id: str) -> None:
        super().__init__()
        self.copy, self.writer_id = copy, writer_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        began = time.time()
        applied = apply_changes(batch, self.copy, keys=["k"], writer_id=self.writer_id, batch_id=batch_id)
        self.record([batch_id], {"INSERT": applied.rows_inserted, "DELETE": applied.rows_deleted}, began, time.time(),
                    applied.snapshot_id is not None)


def delivered_at(spark: SparkSession, table: str, checkpoint: Path, done_at: dict[int, float]) -> dict[int, float]:
    """Each snapshot of ``table``'s history -> when the first batch whose end is past it (or at it,
    all of it read) was done: the batches' ends from the query's offsets log (its source's offset,
    ChangesOffset's JSON, the line after the log's version and metadata), in the order of the
    table's history (its current snapshot back by parents)."""
    parents = dict(spark.sql(f"SELECT snapshot_id, parent_id FROM {table}.snapshots").collect())
    chain, at = [], spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").first()[0]
    while at is not None:
        chain.append(at)
        at = parents.get(at)
    place = {s: i for i, s in enumerate(reversed(chain))}
    when: dict[int, float] = {}
    for batch in sorted(done_at):
        end = json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[2])
        last = place.get(end["snapshot_id"], -1) - (0 if end["done"] else 1)
        for snapshot, i in place.items():
            if i <= last and snapshot not in when:
                when[snapshot] = done_at[batch]
    return when


def _same_rows(spark: SparkSession, table: str, copy: str) -> None:
    spark.sql(f"REFRESH TABLE {copy}")
    for a, b in ((table, copy), (copy, table)):
        extra = spark.sql(f"SELECT k, seq, v FROM {a} EXCEPT ALL SELECT k, seq, v FROM {b}").count()
        if extra:
            raise AssertionError(f"{a} holds {extra:,} rows {b} does not (whole rows, with their counts): the copy "
                                 f"apply_changes kept is not the table")


def run_one(spark: SparkSession, lake: Lakehouse, interval_ms: int, maintained: bool, *, rows_per_second: float,
            keys: int, seconds: int, cadence: float, workdir: Path, say: Callable[[str], None],
            apply: bool = False) -> ChangesLag:
    name = f"changes_lag_{interval_ms}ms_{'maintained' if maintained else 'alone'}{'_applied' if apply else ''}"
    table = f"lake.{NAMESPACE}.{name}"
    copy = f"{table}_copy"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{NAMESPACE}")
    for t in (table, copy):
        spark.sql(f"DROP TABLE IF EXISTS {t} PURGE")
    spec = flink.streaming_upsert_spec(name, rows=max(1, int(rows_per_second * seconds)), keys=keys,
                                       checkpoints=max(1, seconds * 1000 // interval_ms), checkpoint_interval_ms=interval_ms)
    flink.create_in_spark(spark, table, spec)  # empty: the stream starts before Flink's first commit
    spec["if_not_exists"] = True
    if apply:  # the table's columns, no key: apply_changes matches rows whole
        spark.sql(f"CREATE TABLE {copy} USING iceberg TBLPROPERTIES ('format-version'='{spec['format_version']}') "
                  f"AS SELECT * FROM {table} WHERE false")
    result = ChangesLag(interval_ms, maintained, seconds, applied=apply)
    consumer = _Applier(copy, writer_id=name) if apply else _Consumer()
    checkpoint = workdir / f"{name}-checkpoint"
    shutil.rmtree(checkpoint, ignore_errors=True)  # an earlier run's, of the table dropped above
    query = (changes_stream(spark, table).writeStream.foreachBatch(consumer)
             .option("checkpointLocation", str(checkpoint)).start())
    say(f"{name}: Flink writes {spec['rows']:,} upserts of {keys:,} keys, a commit every {interval_ms / 1000:g} s, "
        f"while the changes stream reads{' into a copy' if apply else ''}"
        f"{' and maintain runs every %.0f s' % cadence if maintained else ''}")
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
    spark.sql(f"REFRESH TABLE {table}")
    done_at = delivered_at(spark, table, checkpoint, consumer.done_at) if apply else consumer.done_at
    missing = [s["snapshot_id"] for s in changed if s["snapshot_id"] not in done_at]
    if missing:
        raise AssertionError(f"{table}: Flink's snapshots {missing} never reached the changes stream")
    if apply:
        _same_rows(spark, table, copy)
    else:
        live = spark.sql(f"SELECT count(*) FROM {table}").first()[0]
        net = consumer.rows.get("INSERT", 0) - consumer.rows.get("DELETE", 0)
        if net != live:
            raise AssertionError(f"{table}: the stream delivered {net:,} rows net (inserts less deletes), the table holds {live:,}")
    result.lags = [done_at[s["snapshot_id"]] - s["timestamp_ms"] / 1000 for s in changed]
    result.batches, result.rows, result.batch_seconds = len(consumer.batch_seconds), dict(consumer.rows), consumer.batch_seconds
    s = result.summary()
    say(f"{name}: {result.commits} commits, {result.batches} micro-batches, lag median {s['median']:.1f} s, "
        f"p90 {s['p90']:.1f} s, max {s['max']:.1f} s")
    return result


def markdown(results: list[dict[str, Any]], cadence: float) -> str:
    if not results:
        return ""
    lines = [f"The changes stream beside a Flink writer (lag: from a snapshot's commit to the end of the micro-batch "
             f"that delivered it, counted, or applied to a copy by apply_changes; maintain every {cadence:.0f} s where on):", "",
             "| writer commits every | maintain | consumer | seconds written | commits | micro-batches | rows (inserts, deletes) "
             "| micro-batch s, median | lag s, median | p90 | max |",
             "| ---: | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in results:
        s = ChangesLag(**{k: r[k] for k in ("interval_ms", "maintained", "seconds", "lags", "batch_seconds")}).summary()
        rows = r["rows"]
        lines.append(f"| {r['interval_ms'] / 1000:g} s | {'on' if r['maintained'] else 'off'} | "
                     f"{'apply_changes' if r.get('applied') else 'count'} | {r['seconds']} | {r['commits']} | "
                     f"{r['batches']} | {rows.get('INSERT', 0):,}, {rows.get('DELETE', 0):,} | {s['batch_median']:.1f} | "
                     f"{s['median']:.1f} | {s['p90']:.1f} | {s['max']:.1f} |")
    return "\n".join(lines) + "\n"
