"""Keeping a table resolved round by round (``eqdelete.maintain``) while a writer commits between
rounds, on the embedded catalog: each round resolves what was committed since the last, rows
computed from what the test wrote (test_resolve's model). Conflicts with concurrent commits are
the Scala suite's (MaintainRoundSuite, deterministic) and the lakehouse tier's (a live Flink job).
"""

from __future__ import annotations

import dataclasses
import threading
import typing
from typing import Optional

import pytest
from pyspark.sql import SparkSession
from test_resolve import History, build, eq_delete_files, native_rows

import eqdelete
from eqdelete import MaintainRound


def resolvable(h: History) -> set[int]:
    """The v of every row an equality delete removes that no position delete has yet."""
    m = h.model
    return {r["v"] for r, s, sc in m.rows if r["v"] not in m.positions and m.eq_deleted(r, s, sc)}


def position_delete_files_per_partition(spark: SparkSession, table: str) -> list[int]:
    return [r[2] for r in spark.sql(f"SELECT spec_id, partition, count(*) FROM {table}.delete_files "
                                    "WHERE content = 1 GROUP BY 1, 2").collect()]


@pytest.mark.parametrize("version", [2, 3])
def test_each_round_resolves_what_was_committed_since_the_last(spark: SparkSession, table_name: str, version: int) -> None:
    h = build(spark, table_name, version)
    writes = iter([
        lambda: (h.insert([(40, "c40", 0, 300), (41, "c41", 1, 301)]),
                 h.equality(["k"], [(40, 0), (25, 1), (13, 1)])),                  # new rows, old rows
        lambda: h.equality(["k"], [(41, 1)], inserts=[(41, "c41b", 1, 302)]),      # an upsert
    ])
    rounds: list[MaintainRound] = []

    def writer_between_rounds(result: MaintainRound) -> None:
        rounds.append(result)
        assert result.rows_resolved == len(expected_resolved[-1]), (len(rounds), result)
        h.model.positions |= expected_resolved[-1]          # what the round turned into position deletes
        assert native_rows(spark, table_name) == h.model.live()
        write = next(writes, None)
        if write is not None:
            write()
        expected_resolved.append(resolvable(h))

    expected_resolved = [resolvable(h)]
    summary = eqdelete.maintain(spark, table_name, interval=0, rounds=3, on_round=writer_between_rounds)
    assert [r.committed for r in rounds] == [True, True, True]
    assert all(r.attempts == 1 and r.conflicts == 0 and not r.compaction_conflicted for r in rounds)
    assert [r.equality_delete_files_live for r in rounds] == [0, 0, 0] and rounds[-1].lag_seconds == 0.0
    assert eq_delete_files(spark, table_name) == 0
    written = [r.deletion_vectors_written if version >= 3 else r.position_delete_files_written for r in rounds]
    assert all(n > 0 for n in written), written
    assert (summary.rounds, summary.rounds_committed, summary.conflicts) == (3, 3, 0)
    assert summary.rows_resolved == sum(r.rows_resolved for r in rounds)
    for strategy in ("filter", "join"):
        with eqdelete.use_strategy(spark, strategy):
            assert native_rows(spark, table_name) == h.model.live()
    # Nothing new: a round commits nothing and reports no lag.
    idle = eqdelete.maintain_round(spark, table_name)
    assert (idle.committed, idle.rows_resolved, idle.lag_seconds) == (False, 0, 0.0)
    assert "nothing to resolve" in idle.render()


def test_position_delete_files_piling_up_are_compacted(spark: SparkSession, table_name: str) -> None:
    h = build(spark, table_name, 2)
    h.model.positions |= resolvable(h)
    with eqdelete.use_conf(spark, [("spark.eqdelete.maintain.compactPositionDeleteFiles", "0")]):  # never
        first = eqdelete.maintain_round(spark, table_name)
    assert first.committed and first.position_delete_files_compacted == 0
    most = max(position_delete_files_per_partition(spark, table_name))
    h.equality(["k"], [(24, 0), (27, 1)])
    h.model.positions |= resolvable(h)
    # The next round adds a position delete file to p=0 and p=1: the fullest reaches the setting.
    with eqdelete.use_conf(spark, [("spark.eqdelete.maintain.compactPositionDeleteFiles", str(most + 1))]):
        second = eqdelete.maintain_round(spark, table_name)
    assert second.committed and second.rows_resolved == 2
    assert second.position_delete_files_compacted >= most + 1 and second.compaction_files_written >= 1
    assert f"compacted {second.position_delete_files_compacted} position delete file(s)" in second.render()
    assert max(position_delete_files_per_partition(spark, table_name)) <= most
    assert native_rows(spark, table_name) == h.model.live()
    # What Iceberg's rewrite left is one file per data file: no reader opens more than the
    # setting, so nothing is compacted again until rounds add more.
    with eqdelete.use_conf(spark, [("spark.eqdelete.maintain.compactPositionDeleteFiles", str(most + 1))]):
        third = eqdelete.maintain_round(spark, table_name)
    assert (third.committed, third.position_delete_files_compacted) == (False, 0)


def test_stop_ends_the_loop_between_rounds(spark: SparkSession, table_name: str) -> None:
    build(spark, table_name, 3)
    stop = threading.Event()
    seen: list[MaintainRound] = []

    def stop_after_first(result: MaintainRound) -> None:
        seen.append(result)
        stop.set()

    summary = eqdelete.maintain(spark, table_name, interval=3600, stop=stop, on_round=stop_after_first)
    assert summary.rounds == 1 and len(seen) == 1 and seen[0].committed
    with pytest.raises(ValueError, match="interval"):
        eqdelete.maintain(spark, table_name, interval=-1)
    with pytest.raises(ValueError, match="table must name"):
        eqdelete.maintain_round(spark, " ")


def test_the_round_has_one_schema(spark: SparkSession, table_name: str) -> None:
    """The procedure's columns are the JVM's one list of a round's fields (``MaintainRound.Result.Fields``);
    Python's ``MaintainRound`` has the same fields, in order, with the matching types."""
    build(spark, table_name, 3)
    frame = spark.sql(f"CALL eqdelete.system.maintain(table => '{table_name}')")
    [row] = frame.collect()
    assert row.snapshot_id is not None and row.equality_delete_files_live == 0
    assert [f.name for f in dataclasses.fields(MaintainRound)] == frame.schema.names
    python_type = {"StringType": str, "LongType": int, "IntegerType": int, "BooleanType": bool, "DoubleType": float}
    hints = typing.get_type_hints(MaintainRound)
    for column in frame.schema.fields:
        expected = python_type[type(column.dataType).__name__]
        assert hints[column.name] == (Optional[expected] if column.nullable else expected), column.name


def _data_files(spark: SparkSession, table: str) -> list[tuple[int, int]]:
    """(records, bytes) of each live data file."""
    return sorted((r[0], r[1]) for r in spark.sql(f"SELECT record_count, file_size_in_bytes FROM {table}.files "
                                                  "WHERE content = 0").collect())


@pytest.mark.parametrize("version", [2, 3])
def test_data_files_emptied_enough_are_rewritten_within_the_budget(spark: SparkSession, table_name: str, version: int) -> None:
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING) USING iceberg TBLPROPERTIES "
              f"('format-version'='{version}', 'write.delete.mode'='merge-on-read')")
    for first in (0, 100):  # two data files of 100 rows
        spark.sql(f"INSERT INTO {table_name} SELECT id, 'v' FROM range({first}, {first + 100}, 1, 1)")
    eqdelete.write_equality_deletes(spark, table_name, ["k"], [(k,) for k in range(40)])   # 40% of the first file
    eqdelete.write_equality_deletes(spark, table_name, ["k"], [(k,) for k in range(100, 110)])  # 10% of the second
    before = _data_files(spark, table_name)
    # Off by default: the round resolves, and rewrites no data file.
    plain = eqdelete.maintain_round(spark, table_name)
    assert plain.committed and plain.data_files_compacted == 0 and _data_files(spark, table_name) == before
    eqdelete.write_equality_deletes(spark, table_name, ["k"], [(k,) for k in range(40, 45)])   # 45% of the first
    live = {k for k in range(200) if not (k < 45 or 100 <= k < 110)}
    # On v3 each data file's deletion vector counts at once. On v2, maintain's position delete
    # files cover the partition until its compaction leaves one per data file (here at two).
    settings = [("spark.eqdelete.maintain.compactDataBytesPerHour", "-1"),
                ("spark.eqdelete.maintain.compactDataDeadRatio", "0.3"),
                ("spark.eqdelete.maintain.compactPositionDeleteFiles", "2")]
    with eqdelete.use_conf(spark, settings):
        [due] = eqdelete.status(spark, table_name)
        expected = "compact position delete files" if version == 2 else "compact 1 data file(s) past the dead-row share"
        assert due.next.startswith("resolve 1 equality delete file(s), 5 row(s)") and expected in due.next, due.next
        compacted = eqdelete.maintain_round(spark, table_name)
    assert compacted.committed and compacted.rows_resolved == 5
    assert (compacted.data_files_compacted, compacted.data_files_written) == (1, 1), compacted
    assert compacted.data_bytes_rewritten in {b for _, b in before}, compacted
    assert "rewrote 1 data file(s) past the dead-row share" in compacted.render()
    after = _data_files(spark, table_name)
    assert sorted(r for r, _ in after) == [55, 100], after          # the 45% file rewritten, the 10% one kept
    for strategy in ("native", "auto"):
        with eqdelete.use_strategy(spark, strategy):
            assert {r.k for r in spark.table(table_name).collect()} == live
    summaries = [r[0] for r in spark.sql(f"SELECT summary FROM {table_name}.snapshots").collect()]
    assert sum("eqdelete.data-compaction-id" in summary for summary in summaries) == 1

    # A budget this hour's rewrite used up: the next file due waits, and the round says so.
    eqdelete.write_equality_deletes(spark, table_name, ["k"], [(k,) for k in range(110, 150)])  # the second: 50% dead
    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES ('eqdelete.maintain.compact-data-bytes-per-hour'="
              f"'{compacted.data_bytes_rewritten + 1}')")
    with eqdelete.use_conf(spark, settings):
        waiting = eqdelete.maintain_round(spark, table_name)
        if version == 2:  # its position deletes become the data file's own at the next compaction
            eqdelete.write_equality_deletes(spark, table_name, ["k"], [(150,)])
            waiting = eqdelete.maintain_round(spark, table_name)
    assert waiting.committed and waiting.data_files_compacted == 0, waiting
    assert waiting.deferred is not None and "left of this hour's budget" in waiting.deferred, waiting
    assert "data compaction: 1 data file(s) due" in waiting.render()
