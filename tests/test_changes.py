"""The changes of a table (``eqdelete.changes``, ``eqdelete_changes``), against an oracle: between
every two consecutive snapshots, the changes equal the multiset difference of the two snapshots'
rows, read by time travel with Iceberg's own reader. On the randomized histories of the
differential tests (1-3 key columns of mixed types, upserts, equality deletes partition-scoped and
global, position deletes and deletion vectors, a spec change, a key column renamed, v2 and v3), and
on the operations that change rows without equality deletes or change none.
"""

from __future__ import annotations

import datetime as dt
from contextlib import AbstractContextManager
import os
import re
from collections import Counter

import pytest
from fixtures import MOR
from pyspark.sql import DataFrame, SparkSession
from test_differential import History

import eqdelete
from eqdelete import _jvm, use_strategy, write_equality_deletes
from eqdelete.toggles import use_conf
from eqdelete.changes import CHANGE_COLUMNS

HISTORIES = int(os.environ.get("EQDELETE_CHANGES_HISTORIES", "4"))
FIRST_SEED = int(os.environ.get("EQDELETE_CHANGES_SEED", "2000"))
FIGURES = {"histories": 0, "snapshots": 0, "rows": 0, "narrowed": 0, "exact": 0, "in runs": 0, "from row images": 0}
ROW_IMAGES = "spark.eqdelete.changes.rowImages"


def rows_at(spark: SparkSession, table: str, snapshot: int) -> Counter:
    with use_strategy(spark, "native"):
        return Counter(tuple(r) for r in spark.sql(f"SELECT * FROM {table} VERSION AS OF {snapshot}").collect())


def changes_by_snapshot(rows: list) -> dict[int, tuple[Counter, Counter, set]]:
    """Commit snapshot id -> (inserted rows, deleted rows, ordinals seen)."""
    out: dict[int, tuple[Counter, Counter, set]] = {}
    for r in rows:
        inserted, deleted, ordinals = out.setdefault(r["_commit_snapshot_id"], (Counter(), Counter(), set()))
        data = tuple(r[: len(r) - len(CHANGE_COLUMNS)])
        {"INSERT": inserted, "DELETE": deleted}[r["_change_type"]][data] += 1
        ordinals.add(r["_change_ordinal"])
    return out


def lineage(spark: SparkSession, table: str) -> list[int]:
    """The current snapshot's ancestors, oldest first."""
    parents = dict(spark.sql(f"SELECT snapshot_id, parent_id FROM {table}.snapshots").collect())
    at, chain = _jvm.current_snapshot_id(spark, table), []
    while at is not None:
        chain.append(at)
        at = parents.get(at)
    return chain[::-1]


def narrowed_snapshots(changes: DataFrame) -> tuple[set[int], set[int], set[int]]:
    """The snapshots whose deleted rows the plan looks for among the rows of their delete keys (SnapshotDeleteKeys);
    those of them whose rows of those keys are their deleted rows (no read after them); and the ordinals of those
    whose rows were read once for a run of such snapshots (KeyedRuns)."""
    plan = changes._jdf.queryExecution().optimizedPlan().toString()
    found = re.findall(r"EqualityDeleteRows of snapshot (\d+) [^\n]*?(, exact)?$", plan, re.MULTILINE)
    runs = {int(o) for o in re.findall(r"(?<![-\d])(\d+) AS _eqdelete_at#", plan)}
    return {int(s) for s, _ in found}, {int(s) for s, exact in found if exact}, runs


def from_row_images(changes: DataFrame) -> tuple[set[int], set[int]]:
    """The snapshots whose deleted rows the plan looks up in kept row images (KeptRowImages), and the snapshots
    the images it reads were built at."""
    plan = changes._jdf.queryExecution().optimizedPlan().toString()
    found = re.findall(r"RowImages of snapshot\(s\) ([\d, ]+) at their parents \(\d+ stores, kept since snapshot (\d+)\)", plan)
    return {int(s) for ids, _ in found for s in ids.split(", ")}, {int(since) for _, since in found}


def row_images(spark: SparkSession) -> AbstractContextManager[None]:
    """Within it, the session keeps row images for the changes it reads."""
    return use_conf(spark, [(ROW_IMAGES, "true")])


def check_changes(spark: SparkSession, table: str, strategy: str) -> set[int]:
    """Every snapshot's changes, read in one range from the first, against the difference of its rows and its
    parent's, without and with kept row images; the snapshots narrowed by their delete keys."""
    chain = lineage(spark, table)
    with use_strategy(spark, strategy):
        changes = eqdelete.changes(spark, table)
        narrowed, exact, runs = narrowed_snapshots(changes)
        got = changes_by_snapshot(changes.collect())
        with row_images(spark):
            imaged_changes = eqdelete.changes(spark, table)
            imaged, _ = from_row_images(imaged_changes)
            assert changes_by_snapshot(imaged_changes.collect()) == got, "the changes with kept row images"
    # Each exact snapshot is answered from the images, unless a snapshot before it that they cannot follow left them behind.
    assert imaged <= exact and (not exact or imaged), (imaged, exact)
    before: Counter = Counter()
    for ordinal, snapshot in enumerate(chain):
        after = rows_at(spark, table, snapshot)
        inserted, deleted, ordinals = got.get(snapshot, (Counter(), Counter(), {ordinal}))
        assert inserted == after - before, f"snapshot {snapshot} (#{ordinal}): inserts"
        assert deleted == before - after, f"snapshot {snapshot} (#{ordinal}): deletes"
        assert ordinals == {ordinal}, f"snapshot {snapshot}: ordinals {ordinals}"
        FIGURES["snapshots"] += 1
        FIGURES["rows"] += sum(inserted.values()) + sum(deleted.values())
        before = after
    assert set(got) <= set(chain) and narrowed <= set(chain)
    FIGURES["narrowed"] += len(narrowed)
    FIGURES["exact"] += len(exact)
    FIGURES["in runs"] += len(runs)
    FIGURES["from row images"] += len(imaged)
    return narrowed


@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + HISTORIES))
def test_changes_are_the_difference_of_consecutive_snapshots(spark: SparkSession, table_name: str, seed: int) -> None:
    history = History(spark, table_name, seed)
    history.run(steps=history.rng.randint(5, 8))
    strategy = ("filter", "join", "auto")[seed % 3]
    try:
        check_changes(spark, table_name, strategy)
        # The net change from a snapshot to the end: the difference of the range's two ends.
        chain = lineage(spark, table_name)
        start = chain[len(chain) // 3]
        with use_strategy(spark, strategy):
            net = changes_by_snapshot(eqdelete.changes(spark, table_name, start_snapshot_id=start, net_changes=True).collect())
        inserted = sum((c[0] for c in net.values()), Counter())
        deleted = sum((c[1] for c in net.values()), Counter())
        first, last = rows_at(spark, table_name, start), rows_at(spark, table_name, chain[-1])
        assert (inserted, deleted) == (last - first, first - last), "net changes"
    except AssertionError as error:
        raise AssertionError(f"seed {seed} ({strategy}), key types {history.types}, spec {history.spec!r}, "
                             f"v{history.version}: {error}") from None
    FIGURES["histories"] += 1


def _table(spark: SparkSession, table: str, version: int = 2, key: str = "k BIGINT") -> None:
    """A merge-on-read table (k, v, p) partitioned by p, its first snapshot ten rows."""
    spark.sql(f"CREATE TABLE {table} ({key}, v STRING, p INT) USING iceberg PARTITIONED BY (p) "
              f"TBLPROPERTIES ({MOR.format(v=version)})")
    spark.createDataFrame([(k, f"a{k}", k % 2) for k in range(10)], "k BIGINT, v STRING, p INT") \
        .coalesce(1).writeTo(table).append()


@pytest.mark.parametrize("version", [2, 3])
def test_upserts_deletes_and_commands_of_every_kind(spark: SparkSession, table_name: str, version: int) -> None:
    _table(spark, table_name, version)
    # An upsert of an existing key and of a new one: one DELETE and two INSERTs.
    write_equality_deletes(spark, table_name, ["k"], [(3, 1), (42, 0)], inserts=[(3, "b3", 1), (42, "b42", 0)],
                           columns=["k", "p"])
    # A key deleted again that is already gone: nothing.
    write_equality_deletes(spark, table_name, ["k"], [(42, 0)], columns=["k", "p"])
    write_equality_deletes(spark, table_name, ["k"], [(42, 0)], columns=["k", "p"])
    spark.sql(f"DELETE FROM {table_name} WHERE k = 4")  # a position delete or a deletion vector
    spark.sql(f"DELETE FROM {table_name} WHERE k = 6")  # v3: a vector replacing the one before
    spark.sql(f"UPDATE {table_name} SET v = 'u8' WHERE k = 8")
    spark.sql(f"MERGE INTO {table_name} t USING (SELECT 9L AS k, 'm9' AS v, 1 AS p) s ON t.k = s.k "
              "WHEN MATCHED THEN UPDATE SET v = s.v")
    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES ('write.delete.mode'='copy-on-write')")
    spark.sql(f"DELETE FROM {table_name} WHERE k = 0")  # copy-on-write: the file's other rows carried over
    narrowed = check_changes(spark, table_name, "filter" if version == 2 else "join")  # each strategy on one version (CI time)
    changes = eqdelete.changes(spark, table_name).collect()
    by_snapshot = changes_by_snapshot(changes)
    chain = lineage(spark, table_name)
    # The new key, deleted by the next snapshot (its insert was newer than the upsert's own delete);
    # deleted again, nothing: it was gone already.
    assert by_snapshot[chain[2]][:2] == (Counter(), Counter({(42, "b42", 0): 1})) and chain[3] not in by_snapshot
    # The copy-on-write delete: its one row, not the rows of the file it rewrote.
    inserted, deleted, _ = by_snapshot[chain[-1]]
    assert not inserted and list(deleted) == [(0, "a0", 0)]
    inserted, deleted, _ = by_snapshot[chain[1]]
    assert sorted(inserted) == [(3, "b3", 1), (42, "b42", 0)] and list(deleted) == [(3, "a3", 1)]
    # The equality deletes' snapshots are found among their keys' rows; the others read their files whole.
    assert narrowed == set(chain[1:4]), (narrowed, chain)


def test_global_deletes_on_exact_keys_are_their_rows_of_those_keys(spark: SparkSession, table_name: str) -> None:
    # Unpartitioned, so every delete is global; a two-column key of exact types, NULLs in both:
    # each snapshot's deleted rows are its parent's rows of its delete keys, with no read after it.
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, s STRING, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    spark.createDataFrame([(1, "a", "x"), (2, None, "x"), (3, "c", "x"), (None, "d", "x"), (4, "e", "x")],
                          "k BIGINT, s STRING, v STRING").coalesce(1).writeTo(table_name).append()
    # (2, NULL) matches NULL-safe; (9, z) matches nothing; (1, a) is upserted.
    write_equality_deletes(spark, table_name, ["k", "s"], [(1, "a"), (2, None), (9, "z")], inserts=[(1, "a", "y")],
                           columns=["k", "s"])
    # The upserted row goes (its file is older than this delete); (NULL, d) too.
    write_equality_deletes(spark, table_name, ["k", "s"], [(1, "a"), (None, "d")], columns=["k", "s"])
    # One key twice: its row once.
    write_equality_deletes(spark, table_name, ["k", "s"], [(3, "c"), (3, "c")], columns=["k", "s"])
    # One key upserted by every snapshot of a run: each version goes at the next.
    for version in ("y", "z"):
        write_equality_deletes(spark, table_name, ["k", "s"], [(4, "e")], inserts=[(4, "e", version)], columns=["k", "s"])
    narrowed = check_changes(spark, table_name, "auto")
    chain = lineage(spark, table_name)
    with use_strategy(spark, "auto"):
        _, exact, runs = narrowed_snapshots(eqdelete.changes(spark, table_name))
        # From the second snapshot on: one read for all the deletes (KeyedRuns).
        _, _, later = narrowed_snapshots(eqdelete.changes(spark, table_name, start_snapshot_id=chain[1]))
    assert narrowed == exact == set(chain[1:]) and runs == {1, 2, 3, 4, 5} and later == {0, 1, 2, 3}, \
        (narrowed, exact, runs, later, chain)
    by_snapshot = changes_by_snapshot(eqdelete.changes(spark, table_name).collect())
    assert by_snapshot[chain[1]][1] == Counter({(1, "a", "x"): 1, (2, None, "x"): 1})
    assert by_snapshot[chain[2]][1] == Counter({(1, "a", "y"): 1, (None, "d", "x"): 1})
    assert by_snapshot[chain[3]][:2] == (Counter(), Counter({(3, "c", "x"): 1}))
    assert [by_snapshot[s][1] for s in chain[4:]] == [Counter({(4, "e", "x"): 1}), Counter({(4, "e", "y"): 1})]
    later_changes = changes_by_snapshot(eqdelete.changes(spark, table_name, start_snapshot_id=chain[1]).collect())
    assert later_changes == {s: by_snapshot[s][:2] + ({chain.index(s) - 2},) for s in chain[2:]}, later_changes


def test_deletes_partitioned_by_their_key_are_exact_in_one_spec(spark: SparkSession, table_name: str) -> None:
    # Partitioned by bucket(4, k), as Flink's upsert sink partitions by its key: each partition-scoped
    # delete matches a key's rows wherever they are, so its parent's rows of its keys are its deleted
    # rows (with kept row images too). Once the spec changes, the parent's files lie in two specs and
    # a delete of the new one does not apply to the old files: narrowed, not exact.
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING, p INT) USING iceberg PARTITIONED BY (bucket(4, k)) "
              f"TBLPROPERTIES ({MOR.format(v=2)})")
    spark.createDataFrame([(k, f"a{k}", k % 2) for k in range(16)], "k BIGINT, v STRING, p INT").writeTo(table_name).append()
    for tag, keys in (("b", [1, 2, 3]), ("c", [2, 3, 30])):
        write_equality_deletes(spark, table_name, ["k"], [(k,) for k in keys], inserts=[(k, f"{tag}{k}", k % 2) for k in keys])
    upserts = set(lineage(spark, table_name)[1:])
    narrowed = check_changes(spark, table_name, "auto")
    with use_strategy(spark, "auto"):
        _, exact, _ = narrowed_snapshots(eqdelete.changes(spark, table_name))
        with row_images(spark):
            imaged, _ = from_row_images(eqdelete.changes(spark, table_name))
    assert narrowed == exact == imaged == upserts, (narrowed, exact, imaged, upserts)
    spark.sql(f"ALTER TABLE {table_name} REPLACE PARTITION FIELD bucket(4, k) WITH bucket(8, k)")
    # The first upsert in the new spec deletes nothing (no file of its spec); the second deletes its row.
    for tag in ("d", "e"):
        write_equality_deletes(spark, table_name, ["k"], [(5,), (30,)], inserts=[(5, f"{tag}5", 1)])
    last = lineage(spark, table_name)[-1]
    narrowed = check_changes(spark, table_name, "auto")
    with use_strategy(spark, "auto"):
        _, exact, _ = narrowed_snapshots(eqdelete.changes(spark, table_name))
    assert last in narrowed and last not in exact and exact == upserts, (narrowed, exact, last)


def test_kept_row_images_follow_the_table_and_are_built_again_when_they_cannot(spark: SparkSession,
                                                                             table_name: str) -> None:
    # Upserts whose deletes are exact (global): kept row images built at the first upsert's parent,
    # then brought forward across appends, upserts, a resolve and a compaction; a MERGE's position
    # deletes on older files leave them behind, and the next read builds them again.
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING, p INT) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    spark.createDataFrame([(k, f"a{k}", k % 2) for k in range(10)], "k BIGINT, v STRING, p INT") \
        .repartition(2).writeTo(table_name).append()
    short = table_name.split(".", 1)[1]

    def upsert(keys: list[int], value: str) -> None:
        write_equality_deletes(spark, table_name, ["k"], [(k,) for k in keys], inserts=[(k, f"{value}{k}", k % 2) for k in keys])

    def imaged_since(start: int | None = None) -> tuple[set[int], set[int]]:
        """The range's changes with kept row images, against those without; what came from them."""
        with use_strategy(spark, "auto"):
            plain = changes_by_snapshot(eqdelete.changes(spark, table_name, start_snapshot_id=start).collect())
            with row_images(spark):
                imaged = eqdelete.changes(spark, table_name, start_snapshot_id=start)
                found, since = from_row_images(imaged)
                assert changes_by_snapshot(imaged.collect()) == plain, (start, lineage(spark, table_name))
        return found, since

    upsert([1, 2, 3], "b")
    upsert([2, 3, 4], "c")
    chain = lineage(spark, table_name)
    assert imaged_since() == (set(chain[1:]), {chain[0]})
    # An append, an upsert, eqdelete's resolve, a compaction, an upsert: followed, not built again.
    spark.sql(f"INSERT INTO {table_name} VALUES (30, 'a30', 0), (31, 'a31', 1)")
    upsert([3, 30, 50], "d")
    eqdelete.resolve_equality_deletes(spark, table_name)
    spark.sql(f"CALL local.system.rewrite_data_files(table => '{short}', options => map('rewrite-all', 'true'))")
    upsert([1, 31, 3], "e")
    chain = lineage(spark, table_name)
    upserts = {chain[4], chain[7]}
    assert imaged_since(chain[2]) == (upserts, {chain[0]})
    # A range from the start again: every version is still answered from the same images.
    assert imaged_since() == ({chain[1], chain[2]} | upserts, {chain[0]})
    # A MERGE deleting by position: not followed; the next upsert's read builds them at its parent.
    spark.sql(f"MERGE INTO {table_name} t USING (SELECT 2L AS k) s ON t.k = s.k WHEN MATCHED THEN DELETE")
    upsert([4, 1], "f")
    chain = lineage(spark, table_name)
    assert imaged_since(chain[-3]) == ({chain[-1]}, {chain[-2]})
    check_changes(spark, table_name, "auto")


def test_a_read_restricted_by_file_plans_only_those_files(spark: SparkSession, table_name: str) -> None:
    # What the changes' reads rest on: a `_file` filter (which Iceberg's scan cannot prune by) makes
    # the rule plan and read only the files it names, under every strategy, with the same rows.
    _table(spark, table_name)
    write_equality_deletes(spark, table_name, ["k"], [(3, 1), (4, 0)], inserts=[(3, "b3", 1)], columns=["k", "p"])
    spark.sql(f"INSERT INTO {table_name} VALUES (20, 'c20', 0)")
    files = sorted(r[0] for r in spark.sql(f"SELECT DISTINCT _file FROM {table_name}").collect())
    assert len(files) == 4
    with use_strategy(spark, "native"):
        everything = [tuple(r) for r in spark.sql(f"SELECT *, _file, _pos FROM {table_name}").collect()]
    for strategy, named in (("filter", files[:2]), ("join", files[1:3]), ("native", files[2:]), ("auto", files[3:])):
        with use_strategy(spark, strategy):
            listed = ", ".join(f"'{f}'" for f in named)
            df = spark.sql(f"SELECT *, _file, _pos FROM {table_name} WHERE _file IN ({listed})")
            assert sorted(map(tuple, df.collect())) == sorted(r for r in everything if r[3] in named), strategy
            planned = [d.data_files for d in eqdelete.decisions(df)]
            if strategy == "native":
                assert planned == []  # eqdelete's hands off
            elif planned == [0]:  # the named files carry no equality deletes: read natively, only them
                assert f"{len(named)} file(s) named by _file" in df._jdf.queryExecution().executedPlan().toString()
            else:
                assert planned == [len(named)], (strategy, planned)


def test_compactions_and_resolves_change_nothing(spark: SparkSession, table_name: str) -> None:
    _table(spark, table_name)
    write_equality_deletes(spark, table_name, ["k"], [(1, 1), (2, 0)], inserts=[(1, "b1", 1)], columns=["k", "p"])
    upserted = _jvm.current_snapshot_id(spark, table_name)
    eqdelete.resolve_equality_deletes(spark, table_name)
    short = table_name.split(".", 1)[1]
    spark.sql(f"CALL local.system.rewrite_data_files(table => '{short}', options => map('rewrite-all', 'true'))")
    end = _jvm.current_snapshot_id(spark, table_name)
    assert end != upserted
    assert eqdelete.changes(spark, table_name, start_snapshot_id=upserted, end_snapshot_id=end).count() == 0
    check_changes(spark, table_name, "auto")


def test_a_range_by_sql_and_its_errors(spark: SparkSession, table_name: str) -> None:
    _table(spark, table_name)
    first = _jvm.current_snapshot_id(spark, table_name)
    write_equality_deletes(spark, table_name, ["k"], [(5, 1)], columns=["k", "p"])
    second = _jvm.current_snapshot_id(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (11, 'a11', 1)")
    third = _jvm.current_snapshot_id(spark, table_name)
    rows = spark.sql(f"SELECT k, _change_type, _change_ordinal, _commit_snapshot_id FROM "
                     f"eqdelete_changes('{table_name}', {first}, {third}) ORDER BY _change_ordinal").collect()
    assert [tuple(r) for r in rows] == [(5, "DELETE", 0, second), (11, "INSERT", 1, third)]
    assert eqdelete.changes(spark, table_name, start_snapshot_id=first, end_snapshot_id=second).columns == \
        ["k", "v", "p", *CHANGE_COLUMNS]
    assert eqdelete.changes(spark, table_name, start_snapshot_id=third).count() == 0
    with pytest.raises(Exception, match=f"eqdelete: cannot read the changes of .* after snapshot {third}: it is not an "
                                        f"ancestor of snapshot {second}"):
        eqdelete.changes(spark, table_name, start_snapshot_id=third, end_snapshot_id=second).collect()
    with pytest.raises(Exception, match="the table has no such snapshot; the oldest snapshot that can still be read is"):
        eqdelete.changes(spark, table_name, end_snapshot_id=12345).collect()
    spark.sql(f"CALL local.system.expire_snapshots(table => '{table_name.split('.', 1)[1]}', "
              f"older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)")
    with pytest.raises(Exception, match=f"snapshot {second}, the parent of {third}, has expired; the oldest snapshot "
                                        f"that can still be read is {third}"):
        eqdelete.changes(spark, table_name, start_snapshot_id=first).collect()
    with pytest.raises(ValueError, match="start_snapshot_id must be a snapshot id"):
        eqdelete.changes(spark, table_name, start_snapshot_id="1")



def test_updates_net_changes_and_ranges_by_time(spark: SparkSession, table_name: str) -> None:
    _table(spark, table_name, key="k BIGINT NOT NULL")
    first = _jvm.current_snapshot_id(spark, table_name)
    write_equality_deletes(spark, table_name, ["k"], [(3, 1), (42, 0)], inserts=[(3, "b3", 1), (42, "b42", 0)],
                           columns=["k", "p"])
    upsert = _jvm.current_snapshot_id(spark, table_name)
    spark.sql(f"UPDATE {table_name} SET v = 'u8' WHERE k = 8")
    write_equality_deletes(spark, table_name, ["k"], [(3, 1)], columns=["k", "p"])
    # compute_updates: a snapshot's DELETE and INSERT of one key are its before and after images.
    rows = eqdelete.changes(spark, table_name, start_snapshot_id=first, compute_updates=True, identifier_columns=["k"])
    got = sorted((r.k, r.v, r._change_type, r._change_ordinal) for r in rows.collect())
    assert got == [(3, "a3", "UPDATE_BEFORE", 0), (3, "b3", "DELETE", 2), (3, "b3", "UPDATE_AFTER", 0),
                   (8, "a8", "UPDATE_BEFORE", 1), (8, "u8", "UPDATE_AFTER", 1), (42, "b42", "INSERT", 0)], got
    with pytest.raises(Exception, match="compute_updates pairs a snapshot's deletes and inserts by identifier columns, "
                                        "and .* has none: give identifier_columns"):
        eqdelete.changes(spark, table_name, compute_updates=True)
    spark.sql(f"ALTER TABLE {table_name} SET IDENTIFIER FIELDS k")
    by_identifier = eqdelete.changes(spark, table_name, start_snapshot_id=first, compute_updates=True)
    assert sorted((r.k, r.v, r._change_type, r._change_ordinal) for r in by_identifier.collect()) == got
    with pytest.raises(Exception, match="compute_updates and net_changes cannot both be set"):
        eqdelete.changes(spark, table_name, compute_updates=True, net_changes=True)
    # net_changes: 3 upserted then deleted is one DELETE of its first version; 8 a DELETE and an INSERT.
    net = eqdelete.changes(spark, table_name, start_snapshot_id=first, net_changes=True).collect()
    assert sorted((r.k, r.v, r._change_type) for r in net) == [
        (3, "a3", "DELETE"), (8, "a8", "DELETE"), (8, "u8", "INSERT"), (42, "b42", "INSERT")]
    # The same range by commit times: after the first snapshot's, up to the upsert's.
    committed = dict(spark.sql(f"SELECT snapshot_id, committed_at FROM {table_name}.snapshots").collect())
    by_time = eqdelete.changes(spark, table_name, start_timestamp=committed[first].replace(tzinfo=dt.timezone.utc),
                               end_timestamp=committed[upsert].replace(tzinfo=dt.timezone.utc))
    by_id = eqdelete.changes(spark, table_name, start_snapshot_id=first, end_snapshot_id=upsert)
    assert sorted(map(tuple, by_time.collect())) == sorted(map(tuple, by_id.collect())) and by_id.count() == 3
    with pytest.raises(Exception, match="unknown changes option 'start-snapshot'; the options are start-snapshot-id"):
        spark.sql(f"SELECT * FROM eqdelete_changes('{table_name}', NULL, NULL, map('start-snapshot', '1'))")


def test_create_changelog_view_as_icebergs(spark: SparkSession, table_name: str) -> None:
    _table(spark, table_name)
    first = _jvm.current_snapshot_id(spark, table_name)
    write_equality_deletes(spark, table_name, ["k"], [(3, 1)], inserts=[(3, "b3", 1)], columns=["k", "p"])
    (made,) = spark.sql(f"CALL eqdelete.system.create_changelog_view(table => '{table_name}', "
                        f"options => map('start-snapshot-id', '{first}'), compute_updates => true, "
                        "identifier_columns => array('k'))").collect()
    assert made.changelog_view == table_name.split(".")[-1] + "_changes"
    rows = spark.sql(f"SELECT k, v, _change_type FROM {made.changelog_view} ORDER BY _change_type").collect()
    assert [tuple(r) for r in rows] == [(3, "b3", "UPDATE_AFTER"), (3, "a3", "UPDATE_BEFORE")]
    spark.sql(f"CALL eqdelete.system.create_changelog_view(table => '{table_name}', changelog_view => 'all_changes')")
    assert spark.table("all_changes").count() == 12  # ten rows inserted, then one deleted and one inserted
    with pytest.raises(Exception, match="create_changelog_view takes net_changes as an argument, not in options"):
        spark.sql(f"CALL eqdelete.system.create_changelog_view(table => '{table_name}', options => map('net_changes', 'true'))")
