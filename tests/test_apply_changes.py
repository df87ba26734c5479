"""``eqdelete.apply_changes`` and ``apply_changes_from`` (``CALL eqdelete.system.apply_changes``): a
copy fed a table's changes ends with exactly the table's rows, also for NULL keys, a key live twice,
updates paired by ``compute_updates``, -0.0 and a column promoted; replaying a marked batch or
bringing an up-to-date copy forward changes nothing; a copy that is not the source's, a narrower
column or bad arguments fail in one line and write nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import apply_writers
import pytest
from fixtures import MOR
from pyspark.sql import SparkSession

import eqdelete
from eqdelete import write_equality_deletes


def rows(spark: SparkSession, table: str) -> Counter:
    # foreachBatch's session commits the copy; this session's catalog caches its own instance.
    spark.sql(f"REFRESH TABLE {table}")
    return Counter(tuple(r) for r in spark.table(table).collect())


def _source(spark: SparkSession, table: str) -> None:
    spark.sql(f"CREATE TABLE {table} (id INT, x DOUBLE, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    # A key live twice, a NULL key, -0.0.
    spark.sql(f"INSERT INTO {table} VALUES (1, 0.5, 'a'), (2, -0.0, 'b'), (NULL, 1.0, 'n')")
    spark.sql(f"INSERT INTO {table} VALUES (1, 0.5, 'a'), (3, 2.0, 'c')")


def _evolve(spark: SparkSession, table: str) -> None:
    """Upserts by key (the NULL key and the key live twice too), a Spark update and delete."""
    write_equality_deletes(spark, table, ["id"], [(1,), (None,), (4,)],
                           inserts=[(1, 0.0, "a2"), (None, 3.0, "n2"), (4, 4.0, "d")])
    spark.sql(f"UPDATE {table} SET v = 'b2' WHERE id = 2")
    spark.sql(f"DELETE FROM {table} WHERE id = 3")


def _copy_of(spark: SparkSession, source: str, copy: str) -> None:
    spark.sql(f"CREATE TABLE {copy} USING iceberg TBLPROPERTIES ({MOR.format(v=3)}) AS SELECT * FROM {source} LIMIT 0")


def test_a_streamed_copy_is_exact_and_a_replayed_batch_changes_nothing(spark: SparkSession, table_name: str,
                                                                      tmp_path) -> None:
    source, copy = table_name, table_name + "_copy"
    _source(spark, source)
    _copy_of(spark, source, copy)
    applied = []

    def sink(df, batch_id: int) -> None:
        applied.append(eqdelete.apply_changes(df, copy, keys=["id"], writer_id="test-copy", batch_id=batch_id))

    def run() -> None:
        (eqdelete.changes_stream(spark, source, compute_updates=True, identifier_columns=["id"], max_snapshots_per_trigger=1)
         .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "checkpoint"))
         .trigger(availableNow=True).start().awaitTermination())

    run()
    # The stream's own session committed; this one reads the commit without a REFRESH.
    assert Counter(tuple(r) for r in spark.table(copy).collect()) == rows(spark, source)
    _evolve(spark, source)
    run()
    assert rows(spark, copy) == rows(spark, source), applied
    assert any(a.rows_deleted and a.rows_inserted for a in applied), applied
    # The last batch again, as a restart would replay it: skipped by its mark.
    again = eqdelete.apply_changes(eqdelete.changes(spark, source), copy, writer_id="test-copy", batch_id=len(applied) - 1)
    assert again.snapshot_id is None and "is applied" in again.skipped
    # An older batch id is a new checkpoint's under the same writer id: skipped, and it says so.
    older = eqdelete.apply_changes(eqdelete.changes(spark, source), copy, writer_id="test-copy", batch_id=0)
    assert older.snapshot_id is None and "new checkpoint" in older.skipped and "new writer_id" in older.skipped
    assert rows(spark, copy) == rows(spark, source)


def test_a_copy_brought_forward_from_its_source(spark: SparkSession, table_name: str) -> None:
    source, copy = table_name, table_name + "_copy"
    _source(spark, source)
    _copy_of(spark, source, copy)
    first = eqdelete.apply_changes_from(spark, source, copy)
    assert first.rows_inserted == 5 and rows(spark, copy) == rows(spark, source)
    assert "its current one" in eqdelete.apply_changes_from(spark, source, copy).skipped
    _evolve(spark, source)
    for table in (source, copy):  # the copy migrated as its source
        spark.sql(f"ALTER TABLE {table} ALTER COLUMN id TYPE BIGINT")
        spark.sql(f"ALTER TABLE {table} ADD COLUMN w INT")
        spark.sql(f"REFRESH TABLE {table}")  # the session's catalog may hold the table as it was
    spark.sql(f"INSERT INTO {source} VALUES (9, 9.0, 'z', 7)")
    # SQL, as the Python-less call it.
    done = spark.sql(f"CALL eqdelete.system.apply_changes(table => '{copy}', source => '{source}', keys => array('id'))").first()
    assert done.snapshot_id is not None and done.skipped is None
    assert rows(spark, copy) == rows(spark, source)
    # Changes that cancel out (a row added, then deleted) still move the mark: up to date next time.
    spark.sql(f"INSERT INTO {source} VALUES (10, 1.0, 'gone', 1)")
    spark.sql(f"DELETE FROM {source} WHERE id = 10")
    moved = eqdelete.apply_changes_from(spark, source, copy)
    assert moved.snapshot_id is not None and (moved.rows_deleted, moved.rows_inserted) == (0, 0), moved
    assert "its current one" in eqdelete.apply_changes_from(spark, source, copy).skipped
    assert rows(spark, copy) == rows(spark, source)


def test_what_apply_changes_refuses(spark: SparkSession, table_name: str) -> None:
    source, copy = table_name, table_name + "_copy"
    _source(spark, source)
    _copy_of(spark, source, copy)
    eqdelete.apply_changes_from(spark, source, copy)
    before = rows(spark, copy)
    # A copy that is not the source where the changes start: the DELETE finds no row.
    spark.sql(f"DELETE FROM {copy} WHERE id = 3")
    spark.sql(f"DELETE FROM {source} WHERE id = 3")
    last = eqdelete._jvm.current_snapshot_id(spark, source)
    parent = spark.sql(f"SELECT parent_id FROM {source}.snapshots WHERE snapshot_id = {last}").first()[0]
    with pytest.raises(eqdelete.ApplyChangesError, match=r"^eqdelete: the changes delete 1 row\(s\) that .* does not hold, "
                                                         r"such as \(3, 2\.0, c\): it is not a copy of the source") as refused:
        eqdelete.apply_changes(eqdelete.changes(spark, source, start_snapshot_id=parent), copy)
    assert "\n" not in str(refused.value)
    assert rows(spark, copy) == before - Counter({(3, 2.0, "c"): 1})
    # The same with a row the batch adds, whose data file is written while the rows removed are
    # looked for: the refusal deletes it, and no file is left in the copy's location.
    spark.sql(f"INSERT INTO {source} VALUES (9, 9.0, 'z')")
    with pytest.raises(eqdelete.ApplyChangesError, match="does not hold"):
        eqdelete.apply_changes(eqdelete.changes(spark, source, start_snapshot_id=parent), copy)
    assert rows(spark, copy) == before - Counter({(3, 2.0, "c"): 1}) and _unreferenced_files(spark, copy) == []
    # Never narrowed: a copy whose column is narrower than the changes'.
    narrow = table_name + "_narrow"
    spark.sql(f"CREATE TABLE {narrow} (id INT, x FLOAT, v STRING) USING iceberg")
    with pytest.raises(Exception, match=r"column x of .* is float and the changes' is double: change the copy's column"):
        eqdelete.apply_changes(eqdelete.changes(spark, source), narrow)
    with pytest.raises(Exception, match=r"holds rows and no mark of .*: the first apply_changes from a source needs an empty copy"):
        eqdelete.apply_changes_from(spark, source, _nonempty(spark, table_name))
    with pytest.raises(Exception, match=r"needs the changes of a table, with their _change_type column"):
        eqdelete.apply_changes(spark.table(source), copy)
    with pytest.raises(ValueError, match="give writer_id and batch_id together"):
        eqdelete.apply_changes(eqdelete.changes(spark, source), copy, writer_id="w")
    with pytest.raises(ValueError, match="batch_id must be foreachBatch's batch id"):
        eqdelete.apply_changes(eqdelete.changes(spark, source), copy, writer_id="w", batch_id=-1)
    with pytest.raises(Exception, match="needs source .* or changes .*, one of the two"):
        spark.sql(f"CALL eqdelete.system.apply_changes(table => '{copy}')").collect()


def _unreferenced_files(spark: SparkSession, table: str) -> list[str]:
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'").first()[1]
    on_disk = {str(p) for p in (Path(location.removeprefix("file:")) / "data").rglob("*.parquet")} | \
        {str(p) for p in (Path(location.removeprefix("file:")) / "data").rglob("*.puffin")}
    referenced = {r[0].removeprefix("file:") for r in spark.sql(f"SELECT file_path FROM {table}.all_files").collect()}
    return sorted(on_disk - referenced)


def test_what_apply_changes_refuses_it_says_in_one_line_and_leaves_nothing(spark: SparkSession, table_name: str) -> None:
    """NULL into a NOT NULL column of the copy, and keys naming a struct or a map: refused before
    anything is written, in one line naming the column; no file left in the copy's location."""
    source, copy = table_name, table_name + "_copy"
    spark.sql(f"CREATE TABLE {source} (k BIGINT, v STRING, st STRUCT<a: INT>, m MAP<STRING, INT>) USING iceberg")
    spark.sql(f"INSERT INTO {source} VALUES (NULL, 'n', named_struct('a', 1), map('x', 1)), (1, 'a', NULL, NULL)")
    spark.sql(f"CREATE TABLE {copy} (k BIGINT NOT NULL, v STRING, st STRUCT<a: INT>, m MAP<STRING, INT>) USING iceberg")
    with pytest.raises(eqdelete.ApplyChangesError, match=r"^eqdelete: the changes add a row with NULL in k, which "
                                                         r"\S+ declares NOT NULL, such as \(null, n, ") as refused:
        eqdelete.apply_changes(eqdelete.changes(spark, source), copy)
    assert "\n" not in str(refused.value)
    assert rows(spark, copy) == Counter() and _unreferenced_files(spark, copy) == []
    for key, kind in (("st", "struct<a:int>"), ("m", "map<string,int>")):
        with pytest.raises(Exception, match=rf"eqdelete: key {key} is a {kind}: keys narrow the copy's read") as refused:
            eqdelete.apply_changes(eqdelete.changes(spark, source), copy, keys=[key])
        assert "\n" not in str(refused.value).strip(), str(refused.value)


def test_writers_side_by_side_append_without_conflicts(spark: SparkSession, table_name: str) -> None:
    """Four threads, each applying its own source's changes (inserts only) to one copy under its own
    writer_id, four batches each: no apply conflicts with another's appends, the copy holds every
    source's rows, and every mark is on the copy once (lakehouse/test_apply_writers: processes)."""
    copy, sources = table_name + "_copy", {i: f"{table_name}_s{i}" for i in range(4)}
    apply_writers.create(spark, copy, list(sources.values()))
    assert apply_writers.write(spark, copy, sources, batches=4) == []
    assert rows(spark, copy) == apply_writers.expected_rows(4, 4)
    assert apply_writers.marks(spark, copy) == Counter({(f"w{i}", b): 1 for i in range(4) for b in range(4)})


def _nonempty(spark: SparkSession, table_name: str) -> str:
    other = table_name + "_other"
    spark.sql(f"CREATE TABLE {other} (id INT, x DOUBLE, v STRING) USING iceberg")
    spark.sql(f"INSERT INTO {other} VALUES (1, 1.0, 'x')")
    return other


def test_a_copy_one_nested_field_ahead_takes_the_changes_of_the_old_schema(spark: SparkSession, table_name: str) -> None:
    """The copy migrated a step ahead of its source (a field added in a struct, and in an array's
    element struct): changes still in the old schema apply, rows matched whole in the fields both
    have, the new fields NULL in the rows added, as for a top-level column the copy has more of."""
    source, copy = table_name, table_name + "_copy"
    spark.sql(f"CREATE TABLE {source} (k BIGINT, st STRUCT<a: INT>, arr ARRAY<STRUCT<x: INT>>) USING iceberg "
              f"TBLPROPERTIES ({MOR.format(v=2)})")
    spark.sql(f"INSERT INTO {source} VALUES (1, named_struct('a', 1), array(named_struct('x', 1))), (2, NULL, NULL), "
              "(3, named_struct('a', NULL), array())")
    spark.sql(f"CREATE TABLE {copy} (k BIGINT, st STRUCT<a: INT>, arr ARRAY<STRUCT<x: INT>>) USING iceberg")
    first = eqdelete._jvm.current_snapshot_id(spark, source)
    eqdelete.apply_changes(eqdelete.changes(spark, source), copy)
    spark.sql(f"ALTER TABLE {copy} ADD COLUMN st.b STRING")
    spark.sql(f"ALTER TABLE {copy} ADD COLUMN arr.element.y STRING")
    spark.sql(f"DELETE FROM {source} WHERE k = 1")
    spark.sql(f"UPDATE {source} SET st = named_struct('a', 5) WHERE k = 3")
    spark.sql(f"INSERT INTO {source} VALUES (4, named_struct('a', 4), array(named_struct('x', 4)))")
    done = eqdelete.apply_changes(eqdelete.changes(spark, source, start_snapshot_id=first), copy)
    assert done.rows_deleted == 2 and done.rows_inserted == 2, done
    spark.sql(f"REFRESH TABLE {copy}")
    got = sorted(tuple(r) for r in spark.sql(
        f"SELECT k, st IS NULL, st.a, st.b, to_json(arr), exists(arr, e -> e.y IS NOT NULL) FROM {copy}").collect())
    assert got == [(2, True, None, None, None, None), (3, False, 5, None, "[]", False),
                   (4, False, 4, None, '[{"x":4}]', False)], got


@pytest.mark.parametrize("seed", [0])
def test_keys_narrow_the_copys_read_and_never_its_rows(spark: SparkSession, table_name: str, seed: int) -> None:
    """The copy's read narrowed by `keys` (each key between the least and greatest removed, and among
    their values for up to 200 rows removed) finds every row a batch removes: random upserts by a
    (long, string, date) key with NULL parts over copies in several files, each a range of the long,
    applied in batches of under and over 200 rows removed with the long, the three columns, and a
    double (never bounded; NaN and -0.0 among its values), into one copy per `keys` and one
    without; each ends as the source."""
    import datetime as dt
    import random

    rng = random.Random(seed)
    source = table_name
    spark.sql(f"CREATE TABLE {source} (k1 BIGINT, k2 STRING, k3 DATE, x DOUBLE, v INT) USING iceberg "
              f"TBLPROPERTIES ({MOR.format(v=2)})")

    def key() -> tuple:
        return (None if rng.random() < 0.03 else rng.randrange(3000),
                None if rng.random() < 0.03 else f"s{rng.randrange(5)}",
                None if rng.random() < 0.03 else dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(3)))

    def x() -> float:
        return rng.choice([float("nan"), -0.0, 0.0, rng.random()])

    live = {key() for _ in range(2500)}
    base = spark.createDataFrame([(*k, x(), 0) for k in live], "k1 BIGINT, k2 STRING, k3 DATE, x DOUBLE, v INT")
    base.repartitionByRange(4, "k1").writeTo(source).append()
    copies = {name: f"{table_name}_copy_{i}" for i, name in enumerate(["none", "k1", "x", "k1,k2,k3"])}
    for copy in copies.values():
        spark.sql(f"CREATE TABLE {copy} USING iceberg TBLPROPERTIES ({MOR.format(v=2)}) AS SELECT * FROM {source} LIMIT 0")

    def apply_all() -> None:
        for name, copy in copies.items():
            keys = None if name == "none" else name.split(",")
            eqdelete.apply_changes_from(spark, source, copy, keys=keys)

    apply_all()
    for copy in copies.values():
        # Several files, each a range of k1, so that Iceberg's pruning by the keys' bounds decides about
        # files that hold the rows removed (the apply wrote all in one).
        spark.sql(f"CALL local.system.rewrite_data_files(table => '{copy.split('.', 1)[1]}', strategy => 'sort', "
                  "sort_order => 'k1', options => map('rewrite-all', 'true', 'target-file-size-bytes', '16384'))")
        assert spark.sql(f"SELECT count(*) FROM {copy}.files").first()[0] >= 3, copy
    # The last round's keys lie in the lowest range of k1, so that Iceberg's planning leaves files out
    # (the keys' filter applied); in the others they spread over it, where Iceberg may keep every file
    # (then the copy is read unfiltered).
    for round_, (updates, low) in enumerate([(40, False), (900, False), (120, False), (60, True)]):
        among = sorted((k for k in live if not low or (k[0] is not None and k[0] < 300)), key=repr)
        changed = rng.sample(among, updates)
        new = {k for k in (key() for _ in range(updates // 3)) if not low or (k[0] is not None and k[0] < 300)} - live
        write_equality_deletes(spark, source, ["k1", "k2", "k3"], [list(k) for k in changed],
                               inserts=[(*k, x(), round_ + 1) for k in [*changed, *new]])
        live |= new
        apply_all()
        expected = rows(spark, source)
        for name, copy in copies.items():
            assert _same_rows(rows(spark, copy), expected), f"round {round_}, keys {name}"


def _same_rows(a: Counter, b: Counter) -> bool:
    """Counters of rows equal, NaN equal to NaN (a row holding NaN is no key of its own to Counter)."""
    def norm(c: Counter) -> Counter:
        return Counter({tuple("NaN" if isinstance(v, float) and v != v else v for v in r): n for r, n in c.items()})
    return norm(a) == norm(b)


def _kept_copy_rows(spark: SparkSession) -> tuple[int, int]:
    """How many times this driver built a copy's kept rows, and restored them from a checkpoint."""
    kept = spark._jvm.eqdelete.sink.KeptCopyRows
    return kept.built(), kept.restored()


def _exact(c: Counter) -> Counter:
    """Rows with each float as its repr: -0.0 apart from 0.0 (Python finds them equal), every NaN one."""
    return Counter({tuple(repr(v) if isinstance(v, float) else v for v in r): n for r, n in c.items()})


@pytest.mark.parametrize("seed", [0])
def test_kept_copy_rows_find_the_rows_a_read_of_the_copy_finds(spark: SparkSession, table_name: str, seed: int) -> None:
    """With ``spark.eqdelete.sink.keptRows`` an apply looks the rows it removes up in the copy's rows
    kept by key instead of reading the copy, and brings them forward by its commit. Random upserts by
    a (long, string, date) key with NULL parts, NaN and -0.0 in a double key, into copies (v2 and
    v3) kept on the long, on the three columns and on the double: each ends every round as the
    source (floats compared exactly), and its kept rows hold as many rows as it does. Between
    rounds: a restart restores them from their checkpoint, behind by rows others appended, which
    are followed; a compaction (rows moved) makes the next apply build them again. A row live twice
    is removed whole, and, at the end, one of two alike."""
    import datetime as dt
    import random

    rng = random.Random(seed)
    source = table_name
    schema = "k1 BIGINT, k2 STRING, k3 DATE, x DOUBLE, v INT"
    spark.sql(f"CREATE TABLE {source} ({schema}) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")

    def key() -> tuple:
        return (None if rng.random() < 0.03 else rng.randrange(2000),
                None if rng.random() < 0.03 else f"s{rng.randrange(5)}",
                None if rng.random() < 0.03 else dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(3)))

    def x() -> float:
        return rng.choice([float("nan"), -0.0, 0.0, rng.random()])

    live = sorted({key() for _ in range(1500)}, key=repr)
    twice = (live[0][0], live[0][1], live[0][2], 0.25, 0)
    base = [(*k, x(), 0) for k in live[1:]] + [twice]
    spark.createDataFrame(base, schema).repartition(3).writeTo(source).append()
    spark.createDataFrame([twice], schema).writeTo(source).append()  # the same row live twice
    copies = {name: f"{table_name}_copy_{i}" for i, name in enumerate(["k1", "k1,k2,k3", "x"])}
    for name, copy in copies.items():
        version = 3 if name == "k1" else 2
        spark.sql(f"CREATE TABLE {copy} USING iceberg TBLPROPERTIES ({MOR.format(v=version)}) "
                  f"AS SELECT * FROM {source} LIMIT 0")
    before: list[int | None] = [None]
    kept = spark._jvm.eqdelete.sink.KeptCopyRows

    def apply_all(batch: int, changes=None) -> None:
        if changes is None:
            changes = eqdelete.changes(spark, source, start_snapshot_id=before[0])
            before[0] = eqdelete._jvm.current_snapshot_id(spark, source)
        for name, copy in copies.items():
            eqdelete.apply_changes(changes, copy, keys=name.split(","), writer_id="kept", batch_id=batch)

    def check(when: str, expected: Counter) -> None:
        for name, copy in copies.items():
            held = rows(spark, copy)
            assert _exact(held) == _exact(expected), f"{when}, keys {name}"
            assert kept.liveRows(spark._jsparkSession, copy, name) == sum(held.values()), f"{when}, keys {name}"

    live_keys = set(live)
    dup = (5000, "dup", None, -0.0, 5)
    with eqdelete.use_conf(spark, [("spark.eqdelete.sink.keptRows", "true")]):
        apply_all(0)  # into empty copies
        for round_ in range(1, 7):
            built, restored = _kept_copy_rows(spark)
            if round_ == 3:
                # A restart, and rows appended by others to source and copies alike (the applies start
                # after them): restored behind them, then brought forward by them.
                kept.forgetAll(spark._jsparkSession)
                appended = [(10_000 + i, "o", None, x(), 9) for i in range(5)]
                for table in (source, *copies.values()):
                    spark.createDataFrame(appended, schema).writeTo(table).append()
                before[0] = eqdelete._jvm.current_snapshot_id(spark, source)
                live_keys |= {r[:3] for r in appended}
            if round_ == 4:
                for copy in copies.values():
                    spark.sql(f"CALL local.system.rewrite_data_files(table => '{copy.split('.', 1)[1]}', "
                              "options => map('rewrite-all', 'true'))")
            changed = rng.sample(sorted(live_keys - {live[0]}, key=repr), 60) + \
                {1: [live[0]], 3: [(10_000, "o", None), (10_003, "o", None)]}.get(round_, [])
            new = {key() for _ in range(20)} - live_keys
            write_equality_deletes(spark, source, ["k1", "k2", "k3"], [list(k) for k in changed],
                                   inserts=[(*k, x(), round_) for k in [*changed, *new]])
            live_keys |= new
            if round_ == 5:
                for _ in range(2):  # two rows alike, in two commits
                    spark.createDataFrame([dup], schema).writeTo(source).append()
            apply_all(round_)
            check(f"round {round_}", rows(spark, source))
            now = _kept_copy_rows(spark)
            # Built for each copy by round 0 or 1 (the first apply over a snapshot), restored after
            # the restart, built again after the compaction; brought forward otherwise.
            if round_ > 1:
                assert now[0] - built == (3 if round_ == 4 else 0), (round_, built, now)
                assert now[1] - restored == (3 if round_ == 3 else 0), (round_, restored, now)
        # One of the two rows alike removed (changes made by hand: the source cannot delete one of two).
        one = spark.createDataFrame([(*dup, "DELETE")], schema + ", _change_type STRING")
        apply_all(7, one)
        expected = rows(spark, source)
        expected[dup] -= 1
        check("one of two alike removed", expected)
        # A row the copy does not hold: refused after a read of the copy itself, nothing written.
        gone = spark.createDataFrame([(5000, "dup", None, 0.5, 5, "DELETE")], schema + ", _change_type STRING")
        with pytest.raises(eqdelete.ApplyChangesError, match="does not hold"):
            eqdelete.apply_changes(gone, copies["k1"], keys=["k1"], writer_id="kept", batch_id=8)
        assert _exact(rows(spark, copies["k1"])) == _exact(expected)


def test_kept_copy_rows_of_a_uuid_key_and_a_binary_key(spark: SparkSession, table_name: str) -> None:
    """Kept rows by a key of Iceberg's ``uuid`` type (Spark reads its values as strings, Iceberg's
    own reader loses its deletes: the source is read with eqdelete's filter) and by a binary key
    (bytes compared by content, the empty value and NULL among them, some rows sharing one): random
    upserts by the uuid key and deletes by the binary one, round after round, each copy (of the
    source's types, through Iceberg's API) equal to the source and its kept rows as many as its
    rows; built once for each copy, then only brought forward."""
    import random
    import uuid

    rng = random.Random(11)
    jvm = spark.sparkContext._jvm
    types = jvm.org.apache.iceberg.types.Types

    def create(table: str) -> None:
        fields = [types.NestedField.optional(1, "k", types.UUIDType.get()),
                  types.NestedField.optional(2, "b", types.BinaryType.get()),
                  types.NestedField.optional(3, "v", types.IntegerType.get())]
        catalog_name, namespace, name = table.split(".")
        catalog = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergCatalog(eqdelete._jvm._jsession(spark), catalog_name)
        catalog.createTable(jvm.org.apache.iceberg.catalog.TableIdentifier.parse(f"{namespace}.{name}"),
                            jvm.org.apache.iceberg.Schema(fields), jvm.org.apache.iceberg.PartitionSpec.unpartitioned(),
                            {"format-version": "2", "write.delete.mode": "merge-on-read"})

    source = table_name
    copies = {"k": f"{table_name}_copy_k", "b": f"{table_name}_copy_b"}
    for table in (source, *copies.values()):
        create(table)
    schema = spark.table(source).schema

    def uid() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128)))

    def blob() -> bytes | None:
        n = rng.choice([None, 0, 1, 1, 5, 16, 40])
        return None if n is None else bytes(rng.getrandbits(8) for _ in range(n))

    def held(table: str) -> Counter:
        spark.sql(f"REFRESH TABLE {table}")
        return Counter((k, None if b is None else bytes(b), v) for k, b, v in spark.table(table).collect())

    keys = [uid() for _ in range(400)] + [None]
    spark.createDataFrame([(k, blob(), 0) for k in keys], schema).repartition(2).writeTo(source).append()
    kept = spark._jvm.eqdelete.sink.KeptCopyRows
    before: list[int | None] = [None]
    with eqdelete.use_conf(spark, [("spark.eqdelete.sink.keptRows", "true")]), eqdelete.use_strategy(spark, "filter"):
        built = _kept_copy_rows(spark)[0]
        for round_ in range(4):
            if round_ > 0:
                live = held(source)
                changed = rng.sample(sorted({k for k, _, _ in live if k is not None}), 30) + ([None] if round_ == 2 else [])
                new = [uid() for _ in range(10)]
                write_equality_deletes(spark, source, ["k"], [(k,) for k in changed],
                                       inserts=[(k, blob(), round_) for k in changed + new])
                gone = sorted({b for _, b, _ in live if b is not None}, key=lambda b: (len(b), b))[:3]
                write_equality_deletes(spark, source, ["b"], [(bytearray(b),) for b in gone] + [(None,)] * (round_ == 3))
            changes = eqdelete.changes(spark, source, start_snapshot_id=before[0])
            before[0] = eqdelete._jvm.current_snapshot_id(spark, source)
            for name, copy in copies.items():
                eqdelete.apply_changes(changes, copy, keys=[name], writer_id="kept", batch_id=round_)
            expected = held(source)
            for name, copy in copies.items():
                assert held(copy) == expected, f"round {round_}, keys {name}"
                # None into an empty copy (round 0): they are built at the first apply over a snapshot.
                live_rows = kept.liveRows(spark._jsparkSession, copy, name)
                assert live_rows == (-1 if round_ == 0 else sum(expected.values())), f"round {round_}, keys {name}"
        # Built for each copy once (the first apply over a snapshot), then brought forward.
        assert _kept_copy_rows(spark)[0] - built == len(copies)
