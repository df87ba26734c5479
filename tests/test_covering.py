"""The cross-file simplification: delete rows of a multi-column equality set that a
single-column set covers (same key value, a sequence number as new or newer, same partition or
global) are dropped before indexing or joining, counted, and the rows stay exactly right.

Expected rows and the covered count are computed here from what the test wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fixtures import MOR, sorted_rows
from plans import executed, nodes, optimized
from pyspark.sql import SparkSession

import eqdelete
from eqdelete import write_equality_deletes

# join: every part shuffled (the only parts the join covers); auto with its size threshold off.
STRATEGIES = {
    "filter": [("spark.eqdelete.strategy", "filter")],
    "join": [("spark.eqdelete.strategy", "join"), ("spark.eqdelete.join.broadcastMaxBytes", "1")],
    "auto": [("spark.eqdelete.strategy", "auto"), ("spark.eqdelete.auto.minDataRows", "0")],
}


@dataclass(frozen=True)
class Delete:
    keys: dict  # column -> value (None is NULL, equal to NULL)
    seq: int
    partition: int | None  # None: global


def deleted(row: dict, seq: int, deletes: list[Delete]) -> bool:
    return any(
        all(row[c] == v for c, v in d.keys.items()) and seq < d.seq and d.partition in (None, row["p"])
        for d in deletes
    )


def covered(multi: list[Delete], single: list[Delete]) -> int:
    """Multi-column delete rows some single-column delete covers, by the rule."""
    return sum(
        any(
            all(m.keys.get(c, object()) == v for c, v in s.keys.items())
            and m.seq <= s.seq
            and s.partition in (None, m.partition)
            for s in single
        )
        for m in multi
    )


@pytest.fixture(scope="module")
def table(spark: SparkSession) -> tuple[str, list[tuple], int]:
    """A table with deletes on (c, d) and on c: scoped, global, older and newer, NULL keys."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.t")
    name = "local.t.covering"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    # Created unpartitioned, then partitioned by p: deletes under the first spec are global.
    spark.sql(f"CREATE TABLE {name} (c BIGINT, d STRING, p INT, v INT) USING iceberg "
              f"TBLPROPERTIES ({MOR.format(v=2)})")
    spark.sql(f"ALTER TABLE {name} ADD PARTITION FIELD p")
    data: list[tuple[dict, int]] = []  # (row, data sequence number)
    multi: list[Delete] = []
    single: list[Delete] = []

    def insert(rows: list[tuple], seq: int) -> None:
        spark.createDataFrame(rows, spark.table(name).schema).writeTo(name).append()
        data.extend((dict(zip("cdpv", r)), seq) for r in rows)

    base = [(c, d, p, i) for i, (c, d, p) in enumerate((c, d, p) for p in (0, 1) for c in range(20) for d in "xy")]
    insert(base + [(None, "x", 0, 1000), (None, "y", 1, 1001)], seq=1)
    # seq 2: (c, d) deletes in both partitions, a NULL key among them.
    rows2 = [(c, "x", p) for p in (0, 1) for c in range(10)] + [(None, "x", 0)]
    write_equality_deletes(spark, name, ["c", "d"], rows2, columns=["c", "d", "p"])
    multi += [Delete({"c": c, "d": d}, 2, p) for c, d, p in rows2]
    # seq 3: c deletes scoped to partition 0 (a NULL key too): they cover (c, d) rows of p=0 only.
    rows3 = [(c, 0) for c in range(5)] + [(None, 0)]
    write_equality_deletes(spark, name, ["c"], rows3, columns=["c", "p"])
    single += [Delete({"c": c}, 3, p) for c, p in rows3]
    # seq 4: a global c delete: it covers (c, d) rows of every partition.
    write_equality_deletes(spark, name, ["c"], [(5,)], global_deletes=True)
    single.append(Delete({"c": 5}, 4, None))
    # seq 5: (c, d) deletes newer than every c delete (not covered), with an upsert of (5, 'y', 0).
    rows5 = [(0, "y", 1), (1, "y", 1), (5, "y", 0)]
    upsert = [(5, "y", 0, 2000)]
    write_equality_deletes(spark, name, ["c", "d"], rows5, columns=["c", "d", "p"], inserts=upsert)
    multi += [Delete({"c": c, "d": d}, 5, p) for c, d, p in rows5]
    data.extend((dict(zip("cdpv", r)), 5) for r in upsert)

    expected = sorted_rows([tuple(r.values()) for r, seq in data if not deleted(r, seq, multi + single)])
    return name, expected, covered(multi, single)


def test_the_fixture_covers_rows_of_every_kind(table: tuple[str, list[tuple], int]) -> None:
    # 5 scoped + 1 NULL under the p=0 deletes, 2 under the global one; the seq-5 rows are not covered.
    assert table[2] == 8


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_covered_rows_are_dropped_and_counted(spark: SparkSession, table: tuple[str, list[tuple], int],
                                              strategy: str) -> None:
    name, expected, covered_rows = table
    with eqdelete.use_conf(spark, STRATEGIES[strategy]):
        df = spark.sql(f"SELECT c, d, p, v FROM {name}")
        [before] = eqdelete.decisions(df)
        assert before.strategy == ("filter" if strategy == "auto" else strategy)
        assert before.covered_delete_rows is None, "counted only as the deletes are read"
        assert "rows covered by (c) dropped" in before.plan
        assert sorted_rows(df.collect()) == expected
        [after] = eqdelete.last_decisions(spark)
        assert after.covered_delete_rows == covered_rows, after
        # Run again (the same plan; the filter's cached index): counted once, not twice.
        assert sorted_rows(df.collect()) == expected
        assert eqdelete.last_decisions(spark)[0].covered_delete_rows == covered_rows
        again = spark.sql(f"SELECT count(*) FROM {name}")
        assert again.collect()[0][0] == len(expected)
        assert eqdelete.last_decisions(spark)[0].covered_delete_rows == covered_rows
        # EXPLAIN of the plan that ran says how many.
        text = str(executed(df).toString())
        assert f"{covered_rows} covered" in text, text


def test_native_agrees_with_the_computed_rows(spark: SparkSession, table: tuple[str, list[tuple], int]) -> None:
    name, expected, _ = table
    with eqdelete.use_strategy(spark, "native"):
        assert sorted_rows(spark.sql(f"SELECT c, d, p, v FROM {name}").collect()) == expected


def test_a_broadcast_join_part_is_not_covered(spark: SparkSession, table: tuple[str, list[tuple], int]) -> None:
    """Covering pays where a delete side is shuffled; a broadcast side is left whole."""
    name, expected, _ = table
    with eqdelete.use_strategy(spark, "join"):
        df = spark.sql(f"SELECT c, d, p, v FROM {name}")
        [decision] = eqdelete.decisions(df)
        assert "covered" not in decision.plan
        names = [str(n.nodeName()) for n in nodes(optimized(df))]
        assert "BuildDeleteKeyIndex" not in names
        assert sorted_rows(df.collect()) == expected
        assert eqdelete.last_decisions(spark)[0].covered_delete_rows is None

