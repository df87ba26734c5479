"""The filter's key bitmap: where every equality delete file of a set is global and newer than
every data file the scan reads, and its int, long or date key is dense, the index is a bitmap of
the keys, with no sequence numbers (a row whose key has a delete is deleted). Randomized tables
of that shape against rows the test computes itself and against native; and the shapes just
outside it (a newer data file, a partition-scoped delete, sparse keys) get the table and stay right.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pytest
from fixtures import MOR
from pyspark.sql import SparkSession

import eqdelete
from eqdelete import write_equality_deletes

AUTO = [("spark.eqdelete.strategy", "auto"), ("spark.eqdelete.auto.minDataRows", "0")]
FILTER = [("spark.eqdelete.strategy", "filter")]
EPOCH = dt.date(1970, 1, 1)

# key type -> (Spark DDL, a key from an int)
KEY_TYPES = {
    "int": ("INT", lambda i: i),
    "long": ("BIGINT", lambda i: i - 2**40),  # negative and far from 0
    "date": ("DATE", lambda i: EPOCH + dt.timedelta(days=i)),
}


def _rows(spark: SparkSession, table: str, settings: list[tuple[str, str]]) -> tuple[Counter, list]:
    with eqdelete.use_conf(spark, settings):
        df = spark.table(table)
        return Counter(tuple(r) for r in df.collect()), eqdelete.decisions(df)


def _native(spark: SparkSession, table: str) -> Counter:
    with eqdelete.use_strategy(spark, "native"):
        return Counter(tuple(r) for r in spark.table(table).collect())


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("key_type", sorted(KEY_TYPES))
def test_deletes_newer_than_every_data_file_are_a_key_bitmap(spark: SparkSession, table_name: str, key_type: str,
                                                             seed: int) -> None:
    ddl, key = KEY_TYPES[key_type]
    rng = random.Random(seed * 31 + len(key_type))
    spark.sql(f"CREATE TABLE {table_name} (k {ddl}, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    span = rng.choice([50, 700, 3000])
    low = rng.randint(-2000, 2000)
    data: list[tuple] = []
    for commit in range(rng.randint(1, 3)):
        rows = [(None if rng.random() < 0.02 else key(low + rng.randrange(span)), f"c{commit}r{i}")
                for i in range(rng.randint(50, 400))]
        spark.createDataFrame(rows, spark.table(table_name).schema).writeTo(table_name).append()
        data += rows
    deleted: set = set()
    for _ in range(rng.randint(1, 3)):
        # Delete-only commits: keys of the range (its ends included), some no row has, sometimes NULL;
        # at least one a 16 values, so dense enough for a bitmap.
        keys = {key(low + rng.randrange(span)) for _ in range(rng.randint(span // 8, span // 2))} | {key(low), key(low + span - 1)}
        keys |= {key(low + span + rng.randrange(5))}
        if rng.random() < 0.4:
            keys.add(None)
        write_equality_deletes(spark, table_name, ["k"], [(k,) for k in keys])
        deleted |= keys
    # Position deletes beside them stay Iceberg's.
    spark.sql(f"DELETE FROM {table_name} WHERE v LIKE 'c0r1%'")
    expected = Counter(r for r in data if r[0] not in deleted and not r[1].startswith("c0r1"))

    assert _native(spark, table_name) == expected
    for settings in (FILTER, AUTO):
        rows, decisions = _rows(spark, table_name, settings)
        assert rows == expected, settings
        (decision,) = decisions
        assert decision.strategy == "filter" and "key bitmap index of (k)" in decision.plan, decision

    # A data file newer than the deletes: its rows are not deleted by them, so the index needs
    # sequence numbers again, and is the table.
    reinserted = (key(low), "reinserted")
    spark.createDataFrame([reinserted], spark.table(table_name).schema).writeTo(table_name).append()
    expected[reinserted] += 1
    rows, (decision,) = _rows(spark, table_name, FILTER)
    assert rows == expected and rows == _native(spark, table_name)
    assert "bitmap" not in decision.plan and "index of (k)" in decision.plan, decision


def test_global_deletes_on_a_partitioned_table_are_a_key_bitmap_scoped_ones_are_not(spark: SparkSession,
                                                                                   table_name: str) -> None:
    # Global deletes are written under an unpartitioned spec: the table had one before p.
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, p STRING, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    rows = [(k, p, f"{p}{k}") for k in range(100) for p in ("a", "b")]
    spark.createDataFrame(rows[:50], spark.table(table_name).schema).writeTo(table_name).append()
    spark.sql(f"ALTER TABLE {table_name} ADD PARTITION FIELD p")
    spark.createDataFrame(rows[50:], spark.table(table_name).schema).writeTo(table_name).append()
    write_equality_deletes(spark, table_name, ["k"], [(k,) for k in range(0, 100, 3)], global_deletes=True)
    expected = Counter(r for r in rows if r[0] % 3 != 0)
    for settings in (FILTER, AUTO):
        got, (decision,) = _rows(spark, table_name, settings)
        assert got == expected and "key bitmap index of (k)" in decision.plan, decision
    # A partition-scoped delete file joins the set: its keys delete in partition a of the
    # partitioned spec only (a row (1, 'a') of the unpartitioned file stays).
    write_equality_deletes(spark, table_name, ["k"], [(1, "a"), (50, "a"), (52, "a")], columns=["k", "p"])
    expected -= Counter([(50, "a", "a50"), (52, "a", "a52")])
    got, (decision,) = _rows(spark, table_name, FILTER)
    assert got == expected and got == _native(spark, table_name)
    assert "bitmap" not in decision.plan, decision


def test_sparse_keys_get_the_table(spark: SparkSession, table_name: str) -> None:
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    rows = [(k * 1000, f"v{k}") for k in range(50)]
    spark.createDataFrame(rows, spark.table(table_name).schema).writeTo(table_name).append()
    write_equality_deletes(spark, table_name, ["k"], [(0,), (49000,)])  # 2 keys over 49,001 values
    got, (decision,) = _rows(spark, table_name, FILTER)
    assert got == Counter(rows[1:-1]) and "bitmap" not in decision.plan, decision


def test_explain_names_the_key_bitmap_and_its_range(spark: SparkSession, table_name: str) -> None:
    spark.sql(f"CREATE TABLE {table_name} (k INT, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    spark.createDataFrame([(k, "v") for k in range(10)], spark.table(table_name).schema).writeTo(table_name).append()
    write_equality_deletes(spark, table_name, ["k"], [(2,), (7,)])
    with eqdelete.use_strategy(spark, "filter"):
        explained = spark.sql(f"EXPLAIN SELECT * FROM {table_name}").first()[0]
    assert "BuildDeleteKeyIndex key bitmap index of (k): 1 file(s), 2 row(s)" in explained, explained
    assert "keys 2 .. 7, every delete newer than every data file read" in explained, explained
