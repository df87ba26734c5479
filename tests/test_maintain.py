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
