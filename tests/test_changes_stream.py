"""The changes of a table as a Structured Streaming source (``format("eqdelete-changes")``,
``eqdelete.changes_stream``), against an oracle: a downstream copy that applies each micro-batch
(every DELETE must find its row, then the INSERTs) equals the table at every snapshot the stream
passes, on the differential tests' random histories, split by admission control; unsplit, the
stream gives exactly the rows of a batch read. Then where it starts, how it stops on expired
history, its options, and a query killed (kill -9) and restarted that MERGEs every batch into a
downstream table and ends with exactly the table's rows.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from collections import Counter
from pathlib import Path

import pytest
from fixtures import MOR
from processes import python_job
from pyspark.sql import Row, SparkSession
from test_changes import _table, lineage, rows_at
from test_differential import History

import eqdelete
from eqdelete import _jvm, use_strategy, write_equality_deletes
from eqdelete.changes import CHANGE_COLUMNS
from eqdelete.toggles import use_conf

FIGURES = {"streams": 0, "batches": 0, "snapshots": 0}


def stream_batches(spark: SparkSession, table: str, checkpoint: Path, **options) -> list[list[Row]]:
    """The rows of each micro-batch of one ``Trigger.AvailableNow`` run of the stream, in order."""
    batches: dict[int, list[Row]] = {}
    query = (eqdelete.changes_stream(spark, table, **options).writeStream
             .foreachBatch(lambda df, batch_id: batches.__setitem__(batch_id, df.collect()))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    FIGURES["streams"] += 1
    FIGURES["batches"] += len(batches)
    return [batches[b] for b in sorted(batches)]


def data(row: Row) -> tuple:
    return tuple(row[: len(row) - len(CHANGE_COLUMNS)])


def replay(spark: SparkSession, table: str, batches: list[list[Row]], state: Counter | None = None) -> Counter:
    """``state`` (empty: a stream from the table's start) with every batch applied, a snapshot's
    DELETEs before its INSERTs; after each snapshot's last row, it must be the snapshot's rows."""
    state = Counter() if state is None else state
    flat = [r for batch in batches for r in sorted(batch, key=lambda r: (r._change_ordinal, r._change_type != "DELETE"))]
    ordinals = [r._change_ordinal for r in flat]
    assert ordinals == sorted(ordinals), "a batch went back to an earlier snapshot"
    for i, row in enumerate(flat):
        if row._change_type == "DELETE":
            assert state[data(row)] > 0, f"snapshot {row._commit_snapshot_id} deletes {data(row)}, which is not there"
            state[data(row)] -= 1
        else:
            state[data(row)] += 1
        state = +state
        if i + 1 == len(flat) or flat[i + 1]._change_ordinal != row._change_ordinal:
            assert state == rows_at(spark, table, row._commit_snapshot_id), f"after snapshot {row._commit_snapshot_id}"
            FIGURES["snapshots"] += 1
    return state


# Admission control on each history: split snapshots (one file a batch), a snapshot a batch
# (which must give a batch read's rows), and both.
LIMITS = [{"max_files_per_trigger": 1}, {"max_snapshots_per_trigger": 1},
          {"max_files_per_trigger": 2, "max_snapshots_per_trigger": 2}]


@pytest.mark.parametrize("seed", range(3000, 3003))
def test_the_stream_replays_every_snapshot(spark: SparkSession, table_name: str, tmp_path: Path, seed: int) -> None:
    history = History(spark, table_name, seed)
    history.run(steps=history.rng.randint(5, 7))
    limits = LIMITS[seed % len(LIMITS)]
    strategy = ("join", "auto", "filter")[seed % 3]
    try:
        with use_strategy(spark, strategy):  # its batches run while the strategy is set
            batches = stream_batches(spark, table_name, tmp_path / "checkpoint", **limits)
            batch_read = Counter(tuple(r) for r in eqdelete.changes(spark, table_name).collect())
        final = replay(spark, table_name, batches)
        assert final == rows_at(spark, table_name, lineage(spark, table_name)[-1])
        if "max_files_per_trigger" not in limits:
            # Unsplit: the batch read's rows, ordinals and all.
            assert Counter(tuple(r) for batch in batches for r in batch) == batch_read
        if "max_snapshots_per_trigger" in limits:
            assert max(len({r._change_ordinal for r in batch}) for batch in batches) <= limits["max_snapshots_per_trigger"]
        if limits.get("max_files_per_trigger") == 1:
            assert len(batches) > len(lineage(spark, table_name)), "one file a batch splits the snapshots"
    except AssertionError as error:
        raise AssertionError(f"seed {seed} ({limits}, {strategy}), key types {history.types}, spec {history.spec!r}, "
                             f"v{history.version}: {error}") from None


def _upsert(spark: SparkSession, table: str, keys: list[int], tag: str) -> int:
    write_equality_deletes(spark, table, ["k"], [(k, k % 2) for k in keys],
                           inserts=[(k, f"{tag}{k}", k % 2) for k in keys], columns=["k", "p"])
    return _jvm.current_snapshot_id(spark, table)


def test_where_the_stream_starts(spark: SparkSession, table_name: str, tmp_path: Path) -> None:
    _table(spark, table_name)
    first = _jvm.current_snapshot_id(spark, table_name)
    second = _upsert(spark, table_name, [1, 2], "b")
    third = _upsert(spark, table_name, [2, 11], "c")
    from_second = Counter(tuple(r) for r in eqdelete.changes(spark, table_name, start_snapshot_id=first).collect())

    def streamed(name: str, **options) -> list[list[Row]]:
        return stream_batches(spark, table_name, tmp_path / name, **options)

    # A snapshot id, and a time: from that snapshot's changes on, ordinals counted from it.
    for name, starting in (("id", second), ("time", _committed(spark, table_name)[second])):
        batches = streamed(name, starting=starting)
        assert Counter(tuple(r) for b in batches for r in b) == from_second, name
    # Latest: nothing of what is there; what comes after, from ordinal 0.
    assert streamed("latest", starting="latest") == []
    fourth = _upsert(spark, table_name, [5], "d")
    batches = streamed("latest", starting="latest")  # the same checkpoint: "latest" was kept when first asked
    assert sorted((r.k, r.v, r._change_type, r._change_ordinal, r._commit_snapshot_id) for b in batches for r in b) == \
        [(5, "a5", "DELETE", 0, fourth), (5, "d5", "INSERT", 0, fourth)]
    # Earliest after the history was expired: the oldest snapshot's rows, whole, then its changes.
    spark.sql(f"CALL local.system.expire_snapshots(table => '{table_name.split('.', 1)[1]}', "
              "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 2)")
    batches = streamed("earliest", max_files_per_trigger=1)
    assert {r._commit_snapshot_id for r in batches[0]} == {third} and all(r._change_type == "INSERT" for r in batches[0])
    replay(spark, table_name, batches)
    # A time before the oldest snapshot that can still be read: the changes since may be gone.
    with pytest.raises(Exception, match=rf"startingTimestamp \d+ is before snapshot {third} .* the changes before it "
                                        "have expired: start later, or with startingOffsets earliest"):
        streamed("expired", starting=_committed(spark, table_name)[third] - dt.timedelta(seconds=1))
    del first


def test_a_stream_looks_deleted_rows_up_in_kept_row_images(spark: SparkSession, table_name: str, tmp_path: Path) -> None:
    # Upserts whose deletes are exact (an unpartitioned table), streamed a snapshot or two a batch with
    # kept row images: each batch's deleted rows are looked up in them, and replaying the batches
    # gives every snapshot's rows.
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING, p INT) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    spark.createDataFrame([(k, f"a{k}", k % 2) for k in range(20)], "k BIGINT, v STRING, p INT") \
        .repartition(2).writeTo(table_name).append()
    for tag, keys in (("b", [1, 2, 3]), ("c", [2, 3, 25]), ("d", [3, 25, 7]), ("e", [1, 7, 8])):
        write_equality_deletes(spark, table_name, ["k"], [(k,) for k in keys], inserts=[(k, f"{tag}{k}", k % 2) for k in keys])
    jvm = spark.sparkContext._jvm
    answered = jvm.eqdelete.changes.KeptRowImages.snapshotsAnswered()
    with use_conf(spark, [("spark.eqdelete.changes.rowImages", "true")]):
        batches = stream_batches(spark, table_name, tmp_path / "checkpoint", max_snapshots_per_trigger=2)
    assert replay(spark, table_name, batches) == rows_at(spark, table_name, lineage(spark, table_name)[-1])
    assert jvm.eqdelete.changes.KeptRowImages.snapshotsAnswered() - answered == 4


def test_a_restarted_stream_restores_its_row_images_from_its_checkpoint(spark: SparkSession, table_name: str,
                                                                      tmp_path: Path) -> None:
    # The stream's kept row images are checkpointed in its own checkpoint location: a restart (the
    # driver's images forgotten, as a new application has none) restores them there and brings them
    # forward over the commits since, instead of building them from a full read; the replay of every
    # batch, before and after, gives every snapshot's rows.
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    spark.createDataFrame([(k, f"a{k}") for k in range(40)], "k BIGINT, v STRING").repartition(2).writeTo(table_name).append()
    upserts = iter((("b", [1, 2, 3]), ("c", [2, 3, 25]), ("d", [3, 25, 7]), ("e", [1, 7, 8]), ("f", [8, 9]), ("g", [9, 1])))

    def upsert(n: int) -> None:
        for _, (tag, keys) in zip(range(n), upserts):
            write_equality_deletes(spark, table_name, ["k"], [(k,) for k in keys], inserts=[(k, f"{tag}{k}") for k in keys])
    images = spark.sparkContext._jvm.eqdelete.changes.KeptRowImages
    checkpoint = tmp_path / "checkpoint"
    upsert(3)
    built, restored, answered = images.built(), images.restored(), images.snapshotsAnswered()
    with use_conf(spark, [("spark.eqdelete.changes.rowImages", "true")]):
        batches = stream_batches(spark, table_name, checkpoint, max_snapshots_per_trigger=1)
        assert images.built() - built == 1 and images.snapshotsAnswered() - answered == 3
        assert any((checkpoint / "sources" / "0" / "eqdelete-state").rglob("v*.json")), "no saved version in the checkpoint"
        images.forgetAll(spark._jsparkSession)
        upsert(3)
        batches += stream_batches(spark, table_name, checkpoint, max_snapshots_per_trigger=1)
    assert images.restored() - restored == 1 and images.built() - built == 1, "built again instead of restored"
    assert images.snapshotsAnswered() - answered == 6
    assert replay(spark, table_name, batches) == rows_at(spark, table_name, lineage(spark, table_name)[-1])


@pytest.mark.parametrize("damage", ["overwritten", "truncated", "deleted", "newest delta overwritten"])
def test_a_restarted_stream_never_trusts_row_images_damaged_where_they_are_saved(
        spark: SparkSession, table_name: str, tmp_path: Path, damage: str) -> None:
    # The saved version's largest sorted file overwritten in the middle (same size), cut short, or
    # gone, while the stream is stopped: the restart cannot verify the images (every version shares
    # that file), so its batches read the data files, the saved versions are dropped and the next
    # read builds them again. The newest version's own delta overwritten: the version saved before
    # it verifies and is restored instead. Every batch's rows stay right (never a damaged block
    # read as "no row of this key").
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    spark.createDataFrame([(k, f"a{k}") for k in range(5000)], "k BIGINT, v STRING").repartition(2) \
        .writeTo(table_name).append()
    tags = iter("bcdefghijk")

    def upsert(n: int) -> None:
        for _ in range(n):
            tag, keys = next(tags), list(range(len(table_name) % 7, 5000, 97))
            write_equality_deletes(spark, table_name, ["k"], [(k,) for k in keys], inserts=[(k, f"{tag}{k}") for k in keys])
    images = spark.sparkContext._jvm.eqdelete.changes.KeptRowImages
    checkpoint = tmp_path / "checkpoint"
    upsert(2)
    with use_conf(spark, [("spark.eqdelete.changes.rowImages", "true")]):
        batches = stream_batches(spark, table_name, checkpoint, max_snapshots_per_trigger=1)
        upsert(1)
        batches += stream_batches(spark, table_name, checkpoint, max_snapshots_per_trigger=1)
        images.forgetAll(spark._jsparkSession)
        state = checkpoint / "sources" / "0" / "eqdelete-state"
        largest = max(state.rglob("*.sst"), key=lambda f: f.stat().st_size)
        size = largest.stat().st_size
        built, restored = images.built(), images.restored()
        if damage == "newest delta overwritten":
            newest = max(state.rglob("*.delta"), key=lambda f: int(f.name.split("-")[0]))
            manifest = max(state.rglob("v*.json"), key=lambda f: int(f.stem[1:]))
            assert newest.name in manifest.read_text(), "the newest version does not need its newest delta"
            newest.write_bytes(random.Random(6).randbytes(newest.stat().st_size))
        elif damage == "overwritten":
            with open(largest, "r+b") as f:
                f.seek(size // 4)
                f.write(random.Random(5).randbytes(size // 2))
        elif damage == "truncated":
            os.truncate(largest, size // 2)
        else:
            largest.unlink()
        upsert(2)
        batches += stream_batches(spark, table_name, checkpoint, max_snapshots_per_trigger=1)
        if damage == "newest delta overwritten":
            assert images.restored() - restored == 1 and images.built() == built, "the version before it was not restored"
        else:
            assert images.built() > built, "the damaged images were not built again"
    assert replay(spark, table_name, batches) == rows_at(spark, table_name, lineage(spark, table_name)[-1])


def _committed(spark: SparkSession, table: str) -> dict[int, dt.datetime]:
    return {s: c.astimezone(dt.timezone.utc) for s, c in
            spark.sql(f"SELECT snapshot_id, committed_at FROM {table}.snapshots").collect()}


def test_a_stream_whose_next_snapshot_expired_stops_with_the_reason(spark: SparkSession, table_name: str,
                                                                     tmp_path: Path) -> None:
    _table(spark, table_name)
    checkpoint = tmp_path / "checkpoint"
    assert len(stream_batches(spark, table_name, checkpoint)) == 1  # the stream is at the first snapshot
    _upsert(spark, table_name, [1], "b")
    _upsert(spark, table_name, [2], "c")
    last = _upsert(spark, table_name, [3], "d")
    spark.sql(f"CALL local.system.expire_snapshots(table => '{table_name.split('.', 1)[1]}', "
              "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)")
    with pytest.raises(Exception, match=rf"eqdelete-changes: the stream of .* is at snapshot \d+ and its next "
                                        rf"snapshots have expired \(snapshot \d+ is gone\); the oldest snapshot that can "
                                        rf"still be read is {last}: start a new stream"):
        stream_batches(spark, table_name, checkpoint)


def test_a_split_snapshot_is_read_from_the_same_files_after_a_restart(spark: SparkSession, table_name: str,
                                                                      tmp_path: Path) -> None:
    # Batch 0 ends with snapshot A whole; batch 1 splits the upsert B (2 files touched, 2 added, two
    # files a batch). Spark writes batch 1's offset, then commits batch 0's: B's files stay kept, and
    # the batch, failed in the sink, is replayed after a promotion and an expiry that drops the old
    # schemas from the table's metadata (clean_expired_metadata).
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, n INT, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    spark.sql(f"INSERT INTO {table_name} VALUES (100, 0, 'z')")
    spark.sql(f"ALTER TABLE {table_name} ADD COLUMN w STRING")
    spark.range(8).selectExpr("id AS k", "CAST(id AS INT) AS n", "CONCAT('a', id) AS v", "'w' AS w") \
        .repartition(2, "k").writeTo(table_name).append()
    a = _jvm.current_snapshot_id(spark, table_name)
    inserts = spark.createDataFrame([(k, k + 10, f"b{k}", "w") for k in (1, 2, 6, 7)], spark.table(table_name).schema)
    write_equality_deletes(spark, table_name, ["k"], [(1,), (2,), (6,), (7,)], inserts=inserts.repartition(2))
    b = _jvm.current_snapshot_id(spark, table_name)
    checkpoint, seen, failed = tmp_path / "checkpoint", [], []

    def sink(df, batch_id: int) -> None:
        if batch_id == 1 and not failed:
            failed.append(batch_id)
            raise RuntimeError("the sink fails batch 1 once")
        seen.append(df.collect())

    def run() -> None:
        (eqdelete.changes_stream(spark, table_name, starting=a, max_files_per_trigger=2).writeStream
         .foreachBatch(sink).option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
         .awaitTermination())

    with pytest.raises(Exception, match="the sink fails batch 1 once"):
        run()
    assert {r._commit_snapshot_id for r in seen[0]} == {a}
    assert (checkpoint / "sources" / "0" / f"eqdelete-changes-units-{b}-changes.json").exists()
    spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN n TYPE BIGINT")
    spark.sql(f"CALL local.system.expire_snapshots(table => '{table_name.split('.', 1)[1]}', "
              "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 2, clean_expired_metadata => true)")
    run()
    assert len(seen) == 3 and {r._commit_snapshot_id for r in seen[1] + seen[2]} == {b}
    rows = lambda snapshot: Counter(tuple(r) for r in spark.sql(f"SELECT * FROM {table_name} VERSION AS OF {snapshot}").collect())
    state = Counter(data(r) for r in seen[0])
    assert state == rows(a) - Counter({(100, 0, "z", None): 1})
    for r in sorted(seen[1] + seen[2], key=lambda r: r._change_type != "DELETE"):
        if r._change_type == "DELETE":
            assert state[data(r)] > 0, r
            state[data(r)] -= 1
        else:
            state[data(r)] += 1
    assert +state == rows(b) - Counter({(100, 0, "z", None): 1})


def test_available_now_from_latest_reads_a_commit_made_as_it_starts(spark: SparkSession, table_name: str,
                                                                   tmp_path: Path) -> None:
    # The source's own calls, in Spark's order, with a commit between fixing the end and the first
    # offset: the start is fixed first, so the commit is read by the next run, not refused.
    _table(spark, table_name)
    jvm = spark._jvm
    params = jvm.PythonUtils.toScalaMap({"path": table_name, "startingOffsets": "latest"})
    source = jvm.eqdelete.changes.ChangesSourceProvider().createSource(
        spark._jsparkSession.sqlContext(), str(tmp_path / "checkpoint" / "sources" / "0"), jvm.scala.Option.apply(None),
        "eqdelete-changes", params)
    source.prepareForTriggerAvailableNow()
    latest = _upsert(spark, table_name, [1], "b")
    assert source.latestOffset(None, source.getDefaultReadLimit()) is None
    batches = stream_batches(spark, table_name, tmp_path / "checkpoint", starting="latest")
    assert {r._commit_snapshot_id for b in batches for r in b} == {latest}


def test_updates_in_a_stream_and_the_options_errors(spark: SparkSession, table_name: str, tmp_path: Path) -> None:
    _table(spark, table_name, key="k BIGINT NOT NULL")
    spark.sql(f"ALTER TABLE {table_name} SET IDENTIFIER FIELDS k")
    upsert = _upsert(spark, table_name, [3, 42], "b")
    batches = stream_batches(spark, table_name, tmp_path / "updates", starting=upsert, compute_updates=True)
    assert sorted((r.k, r.v, r._change_type) for b in batches for r in b) == [
        (3, "a3", "UPDATE_BEFORE"), (3, "b3", "UPDATE_AFTER"), (42, "b42", "INSERT")]
    for options, message in (
            ({"startingSnapshot": "1"}, "eqdelete-changes: unknown option 'startingsnapshot'; the options are "
                                        "startingOffsets, startingSnapshotId"),
            ({"startingOffsets": "latest", "startingSnapshotId": "1"}, "give one of startingOffsets, startingSnapshotId "
                                                                       "and startingTimestamp, not 2"),
            ({"maxFilesPerTrigger": "0"}, "maxFilesPerTrigger must be a positive whole number, not '0'"),
            ({"startingTimestamp": "yesterday"}, "startingTimestamp must be milliseconds since the epoch or a timestamp")):
        with pytest.raises(Exception, match=message):
            spark.readStream.format("eqdelete-changes").options(**options).load(table_name)
    with pytest.raises(Exception, match="do not give a schema"):
        spark.readStream.format("eqdelete-changes").schema("k BIGINT").load(table_name)
    with pytest.raises(Exception, match=rf"snapshot 12345 is not the current snapshot of .* or one of its ancestors"):
        stream_batches(spark, table_name, tmp_path / "missing", starting=12345)
    with pytest.raises(ValueError, match="starting must be 'earliest', 'latest', a snapshot id or a datetime"):
        eqdelete.changes_stream(spark, table_name, starting="first")


@pytest.mark.parametrize("columns, row, message", [
    # Spark matches names case-insensitively: the table's column would be overwritten by the tag.
    ("k BIGINT, `_Change_Type` STRING", "1, 'x'", r"its column _Change_Type has the name of a column the changes add"),
], ids=["change column name"])
def test_a_table_the_changes_cannot_hold_fails_in_one_line(spark: SparkSession, table_name: str, tmp_path: Path,
                                                          columns: str, row: str, message: str) -> None:
    spark.sql(f"CREATE TABLE {table_name} ({columns}) USING iceberg")
    spark.sql(f"INSERT INTO {table_name} VALUES ({row})")
    message = r"cannot read the changes of .*: " + message
    with pytest.raises(Exception, match=message):
        eqdelete.changes(spark, table_name).collect()
    with pytest.raises(Exception, match=message):
        stream_batches(spark, table_name, tmp_path / "checkpoint")


# A foreachBatch eqdelete.apply_changes of each batch into a copy, marked with the batch's id, so a
# batch replayed after a crash leaves the copy as it was. The job kills its own process group
# (Python and the JVM) with SIGKILL right after batch KILL_AT's commit to the copy, before Spark's
# commit log. The source has NULL keys and a key live twice; between the two runs both tables gain
# a column and promote one (the copy migrated as its source), so the restarted stream reads the
# snapshots before the change in the new schema.
RESTART_JOB = """
    import hashlib, json, os, random, signal, sys
    import eqdelete
    from eqdelete import write_equality_deletes
    os.setpgid(0, 0)
    warehouse, checkpoint, phase, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    spark = eqdelete.session("changes-restart", master="local[2]", warehouse=warehouse, conf={
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    source, copy = "local.cdc.source", "local.cdc.copy"
    rng = random.Random(phase)

    def upserts(n):
        columns = spark.table(source).columns
        for _ in range(n):
            keys = rng.sample(range(300), 40) + [None]
            inserts = [{"id": k, "v": f"{phase}{rng.random():.6f}", "p": (k or 0) % 3, "n": (3_000_000_000 if "w" in columns else 0) + (k or 0),
                        "w": phase} for k in keys[5:]]
            write_equality_deletes(spark, source, ["id"], [(k, (k or 0) % 3) for k in keys],
                                   inserts=[tuple(r[c] for c in columns) for r in inserts], columns=["id", "p"])
        spark.sql(f"DELETE FROM {source} WHERE id % 17 = {rng.randint(0, 16)}")
        spark.sql(f"INSERT INTO {source} (id, v, p) VALUES (5, 'twice', 2), (NULL, 'null key', 0)")

    if phase == "first":
        spark.sql("CREATE NAMESPACE local.cdc")
        props = "'format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read'"
        spark.sql(f"CREATE TABLE {source} (id BIGINT, v STRING, p INT, n INT) USING iceberg PARTITIONED BY (p) "
                  f"TBLPROPERTIES ({props})")
        spark.sql(f"CREATE TABLE {copy} (id BIGINT, v STRING, p INT, n INT) USING iceberg")
        spark.range(200).selectExpr("id", "CONCAT('v', id) AS v", "CAST(id % 3 AS INT) AS p", "CAST(id AS INT) AS n") \
            .writeTo(source).append()
        upserts(3)
    else:
        upserts(1)
        for table in (source, copy):
            spark.sql(f"ALTER TABLE {table} ALTER COLUMN n TYPE BIGINT")
            spark.sql(f"ALTER TABLE {table} ADD COLUMN w STRING")
            spark.sql(f"REFRESH TABLE {table}")
        upserts(2)

    def merge(batch, batch_id):
        eqdelete.apply_changes(batch, copy, keys=["id"], writer_id="restart-test", batch_id=batch_id)
        # In the columns both schemas have: the batch replayed in the new one is the same rows.
        same = ("id", "v", "p", "n", "_change_type", "_change_ordinal", "_commit_snapshot_id")
        rows = sorted(repr(tuple(r[c] for c in same)) for r in batch.collect())
        print("MERGED", batch_id, hashlib.sha256("\\n".join(rows).encode()).hexdigest(), len(rows), flush=True)
        if batch_id == kill_at:
            os.killpg(0, signal.SIGKILL)

    (eqdelete.changes_stream(spark, source, max_files_per_trigger=16).writeStream.foreachBatch(merge)
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start().awaitTermination())
    spark.sql(f"REFRESH TABLE {copy}")
    rows = lambda t: sorted(map(list, spark.table(t).collect()), key=repr)
    print("RESULT", json.dumps({"source": rows(source), "copy": rows(copy)}), flush=True)
"""


def test_a_killed_query_restarts_exactly_once(tmp_path: Path) -> None:
    warehouse, checkpoint = str(tmp_path / "wh"), str(tmp_path / "checkpoint")
    killed = python_job(RESTART_JOB, tmp_path, warehouse, checkpoint, "first", "2", timeout=300)
    assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-3000:]
    assert "MERGED 2" in killed.stdout and "RESULT" not in killed.stdout
    # More commits while it was down; the restart replays batch 2 (its offsets were logged, its commit was not).
    restarted = python_job(RESTART_JOB, tmp_path, warehouse, checkpoint, "second", "-1", timeout=300)
    assert restarted.returncode == 0, restarted.stdout[-2000:] + restarted.stderr[-3000:]
    def batches(out: str) -> list[tuple[int, str]]:
        return [(int(line.split()[1]), line.split(None, 2)[2]) for line in out.splitlines() if line.startswith("MERGED")]

    merged = batches(restarted.stdout)
    assert [b for b, _ in merged] == list(range(2, 2 + len(merged))) and len(merged) > 1, merged
    # The batch replayed is the batch killed: the same rows.
    assert merged[0] == batches(killed.stdout)[-1], (merged[0], batches(killed.stdout)[-1])
    (result,) = [json.loads(line[len("RESULT "):]) for line in restarted.stdout.splitlines() if line.startswith("RESULT")]
    assert result["copy"] == result["source"] and len(result["source"]) > 150
