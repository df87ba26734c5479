"""Keeping a table resolved round by round (``eqdelete.maintain``) while a writer commits between
rounds, on the embedded catalog: each round resolves what was committed since the last, rows
computed from what the test wrote (test_resolve's model). Conflicts with concurrent commits are
the Scala suite's (MaintainRoundSuite, deterministic) and the lakehouse tier's (a live Flink job).
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import threading
import time
import typing
from pathlib import Path
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
    # The compaction left each data file its own file: no reader opens more than the setting,
    # so nothing is compacted again until rounds add more.
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


def test_a_stop_while_starting_exits_at_once(tmp_path: Path) -> None:
    # SIGTERM while the JVM and Spark still start (no round has begun, nothing to save): the command
    # exits 0 at once, not once the session is up (35 s on a loaded machine, past a container's 30 s).
    command = [sys.executable, "-m", "eqdelete", "maintain", "--table", "local.db.t", "--once",
               "--warehouse", str(tmp_path / "warehouse"), "--master", "local[1]", "--conf", "spark.ui.enabled=false"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Once its JVM is a child process, the handler is installed and Spark is starting.
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
        deadline = time.monotonic() + 120
        while process.poll() is None and not children.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=60)
        took = time.monotonic() - signalled
    finally:
        process.kill()
    assert process.returncode == 0, err[-3000:]
    assert "SIGTERM: stopped while starting, before any round" in err, err[-3000:]
    assert took < 30, f"{took:.1f} s from SIGTERM to exit: past the 30 s a container is given"


def test_the_round_has_one_schema(spark: SparkSession, table_name: str) -> None:
    """The procedure's columns are the JVM's one list of a round's fields (``RoundResult.Fields``);
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
    # files cover the partition until its compaction splits them into each data file's own (here at two).
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


@dataclasses.dataclass(frozen=True)
class PositionDeleteLayout:
    """A v2 table's position delete files: those naming one data file (its own), the others
    (partition-wide) by partition, and the live data files by partition."""

    scoped: dict[str, set[str]]          # data file -> its own delete files
    wide: dict[int, set[str]]            # partition -> its partition-wide delete files
    named: dict[str, set[str]]           # partition-wide delete file -> the data files it names
    data: dict[int, set[str]]            # partition -> its live data files
    partition: dict[str, int]            # delete file -> its partition

    @staticmethod
    def of(spark: SparkSession, table: str) -> "PositionDeleteLayout":
        data: dict[int, set[str]] = {}
        for r in spark.sql(f"SELECT file_path, partition.p FROM {table}.files WHERE content = 0").collect():
            data.setdefault(r[1], set()).add(r[0])
        names = {r[0]: (r[1], set(r[2])) for r in spark.sql(
            f"SELECT delete_file_path, first(partition.p), collect_set(file_path) FROM {table}.position_deletes GROUP BY 1").collect()}
        scoped: dict[str, set[str]] = {}
        wide: dict[int, set[str]] = {}
        named: dict[str, set[str]] = {}
        for delete_file, (p, files) in names.items():
            if len(files) == 1:
                scoped.setdefault(next(iter(files)), set()).add(delete_file)
            else:
                wide.setdefault(p, set()).add(delete_file)
                named[delete_file] = files
        return PositionDeleteLayout(scoped, wide, named, data, {f: p for f, (p, _) in names.items()})

    def files(self) -> set[str]:
        return set().union(*self.scoped.values(), *self.wide.values())

    def opened(self) -> int:
        """The most position delete files a reader of one data file opens."""
        return max((len(self.wide.get(p, ())) + len(self.scoped.get(f, ())) for p, fs in self.data.items() for f in fs), default=0)

    def rewritable(self, threshold: int) -> set[str]:
        """What a compaction at ``threshold`` may rewrite: in each partition due (counted as
        maintain counts, PositionDeletePileUp), its partition-wide files, and the own files of
        the data files they name, of data files holding more than half the threshold, and of
        data files gone."""
        keep = max(1, threshold // 2)
        live = set().union(*self.data.values())
        out: set[str] = set()
        for p in set(self.partition.values()):
            own = {d: {f for f in fs if self.partition[f] == p} for d, fs in self.scoped.items()}
            if len(self.wide.get(p, ())) + max((len(fs) for fs in own.values()), default=0) < threshold:
                continue
            touched = set().union(*(self.named[w] for w in self.wide.get(p, ())))
            out |= self.wide.get(p, set())
            out |= {f for d, fs in own.items() if d not in live or d in touched or len(self.scoped[d]) > keep for f in fs}
        return out


def _create_v2(spark: SparkSession, table: str) -> None:
    spark.sql(f"CREATE TABLE {table} (k bigint, p int) USING iceberg PARTITIONED BY (p) "
              "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')")


def _keys(spark: SparkSession, table: str) -> set[int]:
    with eqdelete.use_strategy(spark, "native"):
        return {r.k for r in spark.table(table).collect()}


def _compact_only(spark: SparkSession, table: str, threshold: int) -> MaintainRound:
    with eqdelete.use_conf(spark, [("spark.eqdelete.maintain.compactPositionDeleteFiles", str(threshold))]):
        return eqdelete.maintain_round(spark, table)


def _resolve_only(spark: SparkSession, table: str) -> MaintainRound:
    with eqdelete.use_conf(spark, [("spark.eqdelete.maintain.compactPositionDeleteFiles", "0")]):
        return eqdelete.maintain_round(spark, table)


def test_a_compaction_rewrites_only_the_position_deletes_that_changed(spark: SparkSession, table_name: str) -> None:
    """Iceberg's rewrite_position_delete_files rewrote every position delete file of a partition
    each time; maintain's compaction splits the partition-wide files rounds wrote into each data
    file's own, and leaves the files of data files no new delete names as they were."""
    _create_v2(spark, table_name)
    for start in range(0, 400, 100):  # four data files in p=0
        spark.createDataFrame([(k, 0) for k in range(start, start + 100)], "k bigint, p int").coalesce(1).writeTo(table_name).append()
    live = set(range(400))

    def delete(keys: list[int]) -> None:
        eqdelete.write_equality_deletes(spark, table_name, ["k"], [(k, 0) for k in keys], columns=["k", "p"])
        live.difference_update(keys)
        assert _resolve_only(spark, table_name).rows_resolved == len(keys)

    for r in range(4):  # rounds deleting from the first two data files only
        delete([r, 150 + r])
    before = PositionDeleteLayout.of(spark, table_name)
    assert len(before.wide[0]) == 4 and before.opened() == 4 and not before.scoped
    first = _compact_only(spark, table_name, 4)
    after = PositionDeleteLayout.of(spark, table_name)
    assert (first.position_delete_files_compacted, first.compaction_files_written) == (4, 2), first
    assert not after.wide and len(after.scoped) == 2 and after.opened() == 1
    assert _keys(spark, table_name) == live

    for r in range(3):  # now the other two (a round's deletes in one data file only would be that file's own already)
        delete([250 + r, 350 + r])
    before = PositionDeleteLayout.of(spark, table_name)
    second = _compact_only(spark, table_name, 4)
    after = PositionDeleteLayout.of(spark, table_name)
    # Only the three partition-wide files went; the first two data files' own files are untouched.
    assert (second.position_delete_files_compacted, second.compaction_files_written) == (3, 2), second
    assert before.files() - after.files() == before.wide[0]
    assert all(after.scoped[d] == fs for d, fs in before.scoped.items())
    assert _keys(spark, table_name) == live
    for strategy in ("filter", "join"):
        with eqdelete.use_strategy(spark, strategy):
            assert {r.k for r in spark.table(table_name).collect()} == live


#: One history in the README test command (CI time); EQDELETE_DIFF_HISTORIES=N runs more, as for test_differential.
COMPACTION_HISTORIES = max(1, int(os.environ.get("EQDELETE_DIFF_HISTORIES", "12")) // 12)


@pytest.mark.parametrize("seed", range(7, 7 + COMPACTION_HISTORIES))
def test_compactions_over_random_histories_keep_the_rows_and_rewrite_only_what_changed(
        spark: SparkSession, table_name: str, seed: int) -> None:
    """Random v2 histories: deletes concentrated on a few of several data files per partition,
    upserts, inserts, Iceberg's rewrite_data_files (leaving the old files' own deletes dangling),
    a random threshold each time. After each compaction the rows are those written, no reader
    opens the threshold's number of files, and nothing outside what changed was rewritten."""
    rng = random.Random(seed)
    _create_v2(spark, table_name)
    next_key = 0
    live: set[int] = set()

    def insert(n: int) -> None:
        nonlocal next_key
        rows = [(k, k % 2) for k in range(next_key, next_key + n)]
        spark.createDataFrame(rows, "k bigint, p int").repartition(1, "p").writeTo(table_name).append()
        live.update(k for k, _ in rows)
        next_key += n

    for _ in range(4):
        insert(60)
    merged_own = kept_own = 0  # compactions that merged some data file's own files, and that left some as they were
    for step in range(12):
        hot = sorted(live)[rng.randrange(len(live)):][:40]   # a run of keys: a few data files
        deleted = rng.sample(hot, k=min(len(hot), rng.randint(1, 6)))
        upserted = [k for k in deleted if rng.random() < 0.3]
        eqdelete.write_equality_deletes(spark, table_name, ["k"], [(k, k % 2) for k in deleted], columns=["k", "p"],
                                        inserts=[(k, k % 2) for k in upserted] or None)
        live.difference_update(deleted)
        live.update(upserted)
        if rng.random() < 0.3:
            insert(rng.randint(5, 30))
        if rng.random() < 0.15:
            p = rng.randrange(2)
            spark.sql(f"CALL local.system.rewrite_data_files(table => '{table_name.split('.', 1)[1]}', where => 'p = {p}', "
                      "options => map('rewrite-all', 'true'))")
        _resolve_only(spark, table_name)
        threshold = rng.choice([2, 3, 4])
        before = PositionDeleteLayout.of(spark, table_name)
        compaction = _compact_only(spark, table_name, threshold)
        after = PositionDeleteLayout.of(spark, table_name)
        removed, added = before.files() - after.files(), after.files() - before.files()
        assert removed <= before.rewritable(threshold), (step, removed - before.rewritable(threshold))
        assert (compaction.position_delete_files_compacted, compaction.compaction_files_written) == (len(removed), len(added))
        assert not added or removed, step
        assert after.opened() < threshold, (step, threshold, after.opened())
        assert _keys(spark, table_name) == live, step
        own_before = set().union(*before.scoped.values())
        if compaction.position_delete_files_compacted:
            merged_own += bool(removed & own_before)
            kept_own += bool(own_before - removed)
    assert merged_own and kept_own, (merged_own, kept_own)
    with eqdelete.use_strategy(spark, "auto"):
        assert {r.k for r in spark.table(table_name).collect()} == live
