"""A live table: a checkpointed Flink streaming upsert job commits into the lakehouse every
checkpoint while ``maintain`` keeps it resolved and queries under every strategy read it.

The job's rows are fixed by its spec (``seq`` = 0, 1, ... in order, ``k = seq % keys``, parallelism
1), so the rows any snapshot must hold follow from how many rows Flink had committed by then:
each key's last ``seq`` among them. That count comes from the snapshots' own summaries (Flink's
``added-records``), never from reading rows; a read that is not a snapshot's exact rows (a key
twice, a row deleted too early or resurrected) fails.

``maintain`` runs as users run it, the command in a process of its own stopped by SIGTERM, beside a
writer that compacts (``rewrite_data_files``) over and over, so their commits conflict and are retried.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

import eqdelete
from eqdelete import MaintainRound
from eqdelete.tools import flink as fw
from eqdelete.tools.lakehouse import Lakehouse, committed_to, spark_jars
from lakehouse.conftest import iceberg_release

NAMESPACE = "live"
STRATEGIES = ("native", "filter", "join", "auto")


def rows_after(spec: dict[str, Any], committed: int) -> list[tuple]:
    """The rows of the streaming upsert job once its first ``committed`` rows are committed."""
    keys, last = spec["keys"], committed - 1
    return sorted((k, s, f"v{s}") for k in range(min(keys, committed)) for s in [k + keys * ((last - k) // keys)])


def read(spark: SparkSession, source: str, strategy: str) -> list[tuple]:
    settings = [("spark.eqdelete.strategy", strategy), ("spark.eqdelete.auto.minDataRows", "0")]
    with eqdelete.use_conf(spark, settings):
        return sorted(tuple(r) for r in spark.sql(f"SELECT k, seq, v FROM {source}").collect())


def check_consistent(spec: dict[str, Any], rows: list[tuple], what: str) -> None:
    """``rows`` are exactly the job's rows after some prefix of its input: the one its newest row ends."""
    committed = max((seq for _, seq, _ in rows), default=-1) + 1
    assert rows == rows_after(spec, committed), f"{what}: not the rows of the first {committed} rows Flink sent"


@dataclass
class History:
    """Every snapshot of the table, oldest first, with the rows Flink had committed by then."""

    snapshots: list[tuple[int, str, str, int]] = field(default_factory=list)  # id, operation, engine, committed

    @classmethod
    def of(cls, spark: SparkSession, table: str) -> History:
        rows = spark.sql(f"SELECT snapshot_id, parent_id, operation, summary FROM {table}.snapshots").collect()
        lineage = {r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {table}.history "
                                                    "WHERE is_current_ancestor").collect()}
        by_parent = {r.parent_id: r for r in rows if r.snapshot_id in lineage}
        history, committed, parent = cls(), 0, None  # from the first snapshot, child by child
        while parent in by_parent:
            r = by_parent[parent]
            flink = "flink.job-id" in r.summary
            committed += int(r.summary.get("added-records", "0")) if flink else 0
            history.snapshots.append((r.snapshot_id, r.operation, "flink" if flink else r.summary.get("engine-name", "?"),
                                      committed))
            parent = r.snapshot_id
        assert len(history.snapshots) == len(lineage), "the lineage is not one chain"
        return history

    def check_every_snapshot(self, spark: SparkSession, spec: dict[str, Any], table: str) -> None:
        """Each snapshot read by time travel (the strategies in turn) holds exactly its rows."""
        for i, (snapshot_id, operation, engine, committed) in enumerate(self.snapshots):
            strategy = STRATEGIES[i % len(STRATEGIES)]
            rows = read(spark, f"{table} VERSION AS OF {snapshot_id}", strategy)
            assert rows == rows_after(spec, committed), (
                f"snapshot {snapshot_id} ({operation} by {engine}, {committed} rows committed) read under {strategy}")


def wait_for_table(spark: SparkSession, table: str, run: fw.FlinkRun, timeout: float = 180) -> None:
    """Until Flink's first commit to ``table``; the writer's failure if it ends first."""
    deadline = time.monotonic() + timeout
    while not committed_to(spark, table):
        if not run.running():
            run.wait()
        assert time.monotonic() < deadline, f"Flink made no commit to {table} in {timeout:.0f} s"
        time.sleep(1)


def read_while_running(spark: SparkSession, spec: dict[str, Any], table: str, run: fw.FlinkRun) -> dict[str, int]:
    """Queries under every strategy in turn until the job ends, each checked; how many of each."""
    done = {s: 0 for s in STRATEGIES}
    while run.running():
        for strategy in STRATEGIES:
            spark.sql(f"REFRESH TABLE {table}")
            check_consistent(spec, read(spark, table, strategy), f"a read of {table} under {strategy} while Flink ran")
            done[strategy] += 1
        time.sleep(2)  # a reader's pace, leaving the two cores to Flink and maintain too
    return done


def live_spec(name: str, *, format_version: int, partitions: int) -> dict[str, Any]:
    # About 45 checkpoints of 1.5 s: tens of commits, each upserting ~150 keys of 1,500, for 67 s,
    # beside maintain's rounds (its JVM is up and has run a round before the job starts).
    return fw.streaming_upsert_spec(name, rows=6750, keys=1500, checkpoints=45, partitions=partitions,
                                    checkpoint_interval_ms=1500, format_version=format_version)


class ChangesConsumer:
    """A Structured Streaming query of the table's changes (``eqdelete.changes_stream``) that MERGEs
    each micro-batch into a copy, a key's last change in the batch (its row, or its deletion), and
    keeps the copy's rows after each batch with the snapshot the batch ended at."""

    def __init__(self, spark: SparkSession, table: str, copy: str, checkpoint: Path) -> None:
        self.spark, self.table, self.copy, self.checkpoint = spark, table, copy, checkpoint
        self.columns = spark.table(table).columns
        self.batches: list[tuple[int, list[tuple]]] = []  # (the batch's last snapshot, the copy after it)
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {copy.rsplit('.', 1)[0]}")
        spark.sql(f"CREATE TABLE {copy} USING iceberg TBLPROPERTIES ('format-version'='2') "
                  f"AS SELECT * FROM {table} WHERE false")
        self.query = None

    def start(self) -> None:
        self.query = (eqdelete.changes_stream(self.spark, self.table).writeStream.foreachBatch(self._merge)
                      .option("checkpointLocation", str(self.checkpoint)).trigger(processingTime="4 seconds").start())

    def _merge(self, batch: Any, batch_id: int) -> None:  # noqa: ANN401 - a DataFrame of the stream's session
        last = batch.orderBy("_change_ordinal", ascending=False).select("_commit_snapshot_id").first()
        if last is None:
            return  # only snapshots that change no row
        batch.createOrReplaceTempView("live_changes")
        data = ", ".join(self.columns)
        batch.sparkSession.sql(f"""
            MERGE INTO {self.copy} t USING (
              SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY _change_ordinal DESC,
                CASE _change_type WHEN 'DELETE' THEN 1 ELSE 0 END) AS last FROM live_changes) WHERE last = 1) s
            ON t.k = s.k
            WHEN MATCHED AND s._change_type = 'DELETE' THEN DELETE
            WHEN MATCHED THEN UPDATE SET {", ".join(f"{c} = s.{c}" for c in self.columns)}
            WHEN NOT MATCHED AND s._change_type = 'INSERT' THEN INSERT ({data}) VALUES ({", ".join(f"s.{c}" for c in self.columns)})""")
        rows = sorted(tuple(r) for r in batch.sparkSession.sql(f"SELECT k, seq, v FROM {self.copy}").collect())
        self.batches.append((last[0], rows))

    def finish(self) -> None:
        """Everything committed, into the copy, and the query stopped."""
        self.query.processAllAvailable()
        self.query.stop()
        assert self.query.exception() is None, self.query.exception()


def equality_delete_files(spark: SparkSession, table: str) -> int:
    return spark.sql(f"SELECT count(*) FROM {table}.delete_files WHERE content = 2").first()[0]


def test_maintain_beside_a_live_flink_job_and_a_compacting_writer(spark: SparkSession, lake: str, lakehouse: Lakehouse,
                                                                  tmp_path: Path) -> None:
    """The job commits every checkpoint; ``python -m eqdelete maintain`` runs beside it in a process of
    its own, as users run it, stopped by SIGTERM at the end; a writer rewrites the data files
    (``rewrite_data_files``) again and again, so its commits and maintain's conflict and are retried;
    readers query under every strategy; a streaming query MERGEs the table's changes into a copy,
    which must hold the table's rows at the snapshot each of its batches ended at. Format v3: each
    round merges into the deletion vectors live at its commit."""
    spec = {**live_spec("upserts", format_version=3, partitions=3), "if_not_exists": True}
    table = f"{lake}.{NAMESPACE}.upserts"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {lake}.{NAMESPACE}")
    fw.create_in_spark(spark, table, spec)  # the job writes into it: maintain can run before the job
    run = None
    stop = threading.Event()
    compactions: dict[str, Any] = {"committed": 0, "failed": 0, "errors": []}

    def compact_again_and_again() -> None:
        rest = table.split(".", 1)[1]
        while not stop.is_set():
            # Paced by maintain's rounds, one compaction every second round: a compaction resolves
            # every equality delete older than its start, so at a fixed pace faster than the rounds
            # (3 s against ~17 s a round on two slow, busy cores) maintain found nothing left to do.
            seen = len(_reported(out))
            while len(_reported(out)) < seen + 2 and not stop.wait(0.5):
                pass
            if stop.is_set():
                break
            try:
                spark.sql(f"CALL {lake}.system.rewrite_data_files(table => '{rest}', "
                          "options => map('min-input-files', '2'))").collect()
                compactions["committed"] += 1
            except Exception as error:  # noqa: BLE001 - a conflict with the writer or maintain: next time
                compactions["failed"] += 1
                compactions["errors"].append(_java_message(error))

    maintainer, compactor = None, threading.Thread(target=compact_again_and_again)
    consumer = ChangesConsumer(spark, table, f"local.{NAMESPACE}_copy.upserts", tmp_path / "changes-checkpoint")
    out, err = tmp_path / "maintain.out", tmp_path / "maintain.err"  # files: a pipe nobody reads fills up
    try:
        # maintain first, as a service already running on the table when the job starts: its JVM's
        # start and first rounds (~40-50 s on two busy cores) would otherwise eat the job's 67 s.
        # The catalog by --conf, as in spark-defaults.conf; a short wait between attempts.
        conf = {**lakehouse.spark_options(lake), "spark.jars": ",".join(spark_jars(iceberg_release(spark))),
                "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                "spark.eqdelete.maintain.retryWaitMillis": "200", "spark.eqdelete.maintain.maxAttempts": "8",
                # Its rounds through the kept index: auto would read this small table's files instead.
                "spark.eqdelete.maintain.liveIndex": "always"}
        command = [sys.executable, "-m", "eqdelete", "maintain", "--table", table, "--interval", "2",
                   "--master", "local[1]", "--driver-memory", "1g", "--progress-seconds", "600"]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            maintainer = subprocess.Popen(command, stdout=stdout, stderr=stderr, cwd=tmp_path)
        _wait_for_rounds_after(maintainer, out, err, 0, rounds=1)  # on the table with no snapshot yet
        run = fw.start({"catalog": lakehouse.flink_properties(), "namespace": NAMESPACE, "tables": [spec]}, tmp_path / "flink")
        wait_for_table(spark, table, run)
        consumer.start()
        compactor.start()
        reads = read_while_running(spark, spec, table, run)
        written = run.wait()["tables"]["upserts"]
        # Rounds begun after the job's last commit, then SIGTERM: the round under way stops at its next step.
        _wait_for_rounds_after(maintainer, out, err, written["snapshots"][-1]["timestamp_ms"])
        deadline = time.monotonic() + 180  # a compaction beside the writer may lose every race: one after it
        while compactions["committed"] == 0 and time.monotonic() < deadline and compactor.is_alive():
            time.sleep(0.5)
        stop.set()
        compactor.join(timeout=300)
        _wait_for_rounds_after(maintainer, out, err, int(time.time() * 1000), rounds=1)  # after the last compaction
        consumer.finish()
        maintainer.send_signal(signal.SIGTERM)
        maintainer.wait(timeout=120)
        errors = err.read_text(errors="replace")
        assert maintainer.returncode == 0, errors[-3000:]
        assert "SIGTERM: stopping; a round under way ends at its next step" in errors and "maintained " in errors
    finally:
        stop.set()
        if consumer.query is not None and consumer.query.isActive:
            consumer.query.stop()
        if run is not None:
            run.stop()
        if maintainer is not None and maintainer.poll() is None:
            maintainer.kill()
    rounds = _rounds(out)

    flink_commits = [s for s in written["snapshots"] if "flink.job-id" in s["summary"]]
    assert len(flink_commits) >= 10, "tens of commits"
    # The job ran to its end (it has no restart strategy, so any failure would have ended it) and
    # never went through a restart.
    flink_log = "".join(f.read_text(errors="replace") for f in run.log_dir.glob("*.log"))
    assert "switched from RUNNING to FINISHED" in flink_log, f"no task state changes in {run.log_dir}"
    assert "RESTARTING" not in flink_log and "to FAILED" not in flink_log
    assert all(n > 0 for n in reads.values()), reads
    assert len([r for r in rounds if r.committed]) >= 3, [r.render() for r in rounds]
    # The rounds went through the kept index of the live rows, built by the first round with
    # deletes to resolve (a round before the job's first deletes builds none) and brought forward
    # past the writer's commits and the compactions since.
    noted = [i for i, r in enumerate(rounds) if r.live_index_note]
    assert noted and "built from the table" in (rounds[noted[0]].live_index_note or ""), [r.render() for r in rounds]
    assert any(r.committed and r.live_index_note is None and r.live_index_entries > 0 for r in rounds[noted[0] + 1:]), \
        [r.render() for r in rounds]
    # Conflicts on both sides, each a validation of Iceberg's, none a failure of another kind.
    assert compactions["committed"] >= 1, compactions
    assert sum(r.conflicts for r in rounds) + compactions["failed"] >= 1, "maintain and the compaction never met"
    unexpected = [e for e in compactions["errors"] if not any(
        word in e for word in ("ValidationException", "CommitFailedException", "Cannot commit", "conflict"))]
    assert not unexpected, unexpected
    spark.sql(f"REFRESH TABLE {table}")
    assert equality_delete_files(spark, table) == 0, "an equality delete older than the last round is left"
    assert rounds[-1].equality_delete_files_live == 0 and rounds[-1].lag_seconds == 0.0
    # One deletion vector a data file at most, however the rounds and the writer interleaved.
    vectors = spark.sql(f"SELECT referenced_data_file, count(*) AS n FROM {table}.delete_files WHERE content = 1 "
                        "GROUP BY 1 HAVING n > 1").collect()
    assert vectors == []
    assert read(spark, table, "native") == rows_after(spec, spec["rows"]) == sorted(
        (r[0], r[-2], r[-1]) for r in fw.expected_rows(spec))
    history = History.of(spark, table)
    history.check_every_snapshot(spark, spec, table)
    # The changes' copy, after every batch: the table's rows at the snapshot the batch ended at.
    committed = {snapshot_id: n for snapshot_id, _, _, n in history.snapshots}
    assert len(consumer.batches) >= 3, "the stream kept up in a few batches"
    for last, rows in consumer.batches:
        assert rows == rows_after(spec, committed[last]), f"the copy after the batch that ended at snapshot {last}"
    assert consumer.batches[-1][1] == rows_after(spec, spec["rows"])
    _report(flink_commits, rounds, reads, compactions, len(consumer.batches))


def _java_message(error: Exception) -> str:
    """The JVM exception's own line, not py4j's wrapper."""
    java = getattr(error, "java_exception", None)
    return (str(java.toString()) if java is not None else str(error)).splitlines()[0][:400]


def _reported(out: Path) -> list[dict[str, Any]]:
    """The rounds the command reported so far: its stdout's JSON lines (a line being written excepted)."""
    text = out.read_text() if out.exists() else ""
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.startswith("{") and line.endswith("\n")]


def _rounds(out: Path) -> list[MaintainRound]:
    """The rounds the command reported."""
    names = {f.name for f in dataclasses.fields(MaintainRound)}
    return [MaintainRound(**{k: v for k, v in line.items() if k in names}) for line in _reported(out)]


def _wait_for_rounds_after(maintainer: subprocess.Popen, out: Path, err: Path, timestamp_ms: int, *,
                           rounds: int = 2, timeout: float = 180) -> None:
    """Until the command reported ``rounds`` rounds begun after ``timestamp_ms``."""
    deadline = time.monotonic() + timeout
    while True:
        assert maintainer.poll() is None, f"maintain ended early:\n{err.read_text(errors='replace')[-3000:]}"
        if sum(1 for r in _reported(out) if r["began_ms"] > timestamp_ms) >= rounds:
            return
        assert time.monotonic() < deadline, "maintain reported no round after the job's last commit"
        time.sleep(0.5)


def _report(flink_commits: list, rounds: list[MaintainRound], reads: dict, compactions: dict, batches: int) -> None:
    """The run's figures, on the terminal (pytest -s) and for the closing notes."""
    lags = sorted(r.lag_seconds for r in rounds)
    print(f"\n[live] Flink commits {len(flink_commits)}; maintain rounds {len(rounds)}, committed "
          f"{sum(r.committed for r in rounds)}, rows resolved {sum(r.rows_resolved for r in rounds)}, conflicts "
          f"retried {sum(r.conflicts for r in rounds)}, rounds given up {sum(r.gave_up for r in rounds)}; lag after a "
          f"round median {lags[len(lags) // 2]:.1f} s, max {lags[-1]:.1f} s; round seconds max "
          f"{max(r.seconds for r in rounds):.1f}; reads while running {reads}; rewrite_data_files committed "
          f"{compactions['committed']}, failed on conflicts {compactions['failed']}; the changes' stream's batches "
          f"merged into its copy {batches}")
