"""Query shapes a reviewer would try to break the rule with.

Every shape runs natively and under each setting of ``SETTINGS`` (filter, broadcast join,
shuffled join, auto); its rows must equal native's and, where the test can compute them
without Iceberg, the rows the same query gives on plain in-memory copies of what the tables
hold (``expected`` views built from the history the test wrote). Reads eqdelete does not model
(``_deleted``, incremental reads, unknown options, a session's write-audit-publish branch) must
stay Iceberg's own, with the reason in the decision and in EXPLAIN; changelog and streaming
reads never reach the rule, and must read as natively.

The tables, written once for the module:
- ``ev``: ``k, region, v, n``, partitioned by region, partition-scoped equality deletes on k:
  a base load, an upsert, a plain delete, a re-insert, a merge-on-read DELETE (position
  deletes), a branch with a commit of its own and a tag;
- ``dim``: ``k, name``, unpartitioned, equality deletes on k;
- ``pairs``: a composite key ``(a, b)``;
- ``ev3``: format v3 (row lineage: ``_row_id``, ``_last_updated_sequence_number``).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pyspark
import pytest
from conftest import CATALOG
from fixtures import MOR, sorted_rows
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.types import BooleanType

import eqdelete
from eqdelete import write_equality_deletes
from eqdelete.config import hadoop_catalog_options

SETTINGS: dict[str, list[tuple[str, str]]] = {
    "filter": [("spark.eqdelete.strategy", "filter")],
    "join": [("spark.eqdelete.strategy", "join")],
    # Spark would still broadcast a small delete side: its own threshold off too. AQE off
    # here, on elsewhere.
    "join_shuffled": [("spark.eqdelete.strategy", "join"), ("spark.eqdelete.join.broadcastMaxBytes", "-1"),
                      ("spark.sql.autoBroadcastJoinThreshold", "-1"), ("spark.sql.adaptive.enabled", "false")],
    "auto": [("spark.eqdelete.strategy", "auto"), ("spark.eqdelete.auto.minDataRows", "0")],
}
#: The many SQL shapes skip auto: on these small tables (auto.minDataRows=0) it plans as filter does.
SHAPE_SETTINGS = {name: conf for name, conf in SETTINGS.items() if name != "auto"}
REGIONS = ("eu", "us", "asia")


@dataclass
class History:
    """What the test wrote into one table, commit by commit, and the rows live after each."""

    table: str
    columns: tuple[str, ...]
    live: list[tuple] = field(default_factory=list)
    appended: dict[int, list[tuple]] = field(default_factory=dict)  # snapshot -> rows it added
    live_at: dict[int, list[tuple]] = field(default_factory=dict)  # snapshot -> rows live there
    snapshots: list[int] = field(default_factory=list)

    def written(self) -> list[tuple]:
        return [r for rows in self.appended.values() for r in rows]

    def append(self, spark: SparkSession, rows: list[tuple]) -> None:
        """A plain append commit of ``rows``."""
        _insert(spark, self.table, rows)
        self.live += rows
        self.record(spark, rows)

    def record(self, spark: SparkSession, added: list[tuple]) -> int:
        snapshot = current_snapshot(spark, self.table)
        self.snapshots.append(snapshot)
        self.appended[snapshot] = list(added)
        self.live_at[snapshot] = list(self.live)
        return snapshot


def current_snapshot(spark: SparkSession, table: str) -> int:
    return spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]


def _insert(spark: SparkSession, table: str, rows: list[tuple]) -> None:
    spark.createDataFrame(rows, spark.table(table).schema).coalesce(1).writeTo(table).append()


def _new_table(spark: SparkSession, table: str, columns: str, base: list[tuple], version: int = 2,
               partitioned_by: str = "") -> History:
    """A merge-on-read table of ``columns`` (SQL), its first commit appending ``base``."""
    part = f"PARTITIONED BY ({partitioned_by}) " if partitioned_by else ""
    spark.sql(f"CREATE TABLE {table} ({columns}) USING iceberg {part}TBLPROPERTIES ({MOR.format(v=version)})")
    h = History(table, tuple(c.split()[0] for c in columns.split(", ")))
    h.append(spark, base)
    return h


def _upsert(spark: SparkSession, h: History, keys: set, make: Callable[[tuple], tuple], key_of: Callable[[tuple], tuple],
            scope: Callable[[tuple], tuple], key_columns: list[str], columns: list[str]) -> None:
    """Equality deletes of ``keys`` and, in the same commit, a new version of each (an upsert)."""
    old = [r for r in h.live if key_of(r) in keys]
    new = [make(r) for r in old]
    write_equality_deletes(spark, h.table, key_columns, [scope(r) for r in old], inserts=new, columns=columns)
    h.live = [r for r in h.live if key_of(r) not in keys] + new
    h.record(spark, new)


def _build_ev(spark: SparkSession, table: str) -> History:
    h = _new_table(spark, table, "k BIGINT, region STRING, v STRING, n INT",
                   [(k, REGIONS[k % 3], f"b{k}", k) for k in range(60)], partitioned_by="region")
    scoped = dict(key_of=lambda r: r[0], scope=lambda r: (r[0], r[1]), key_columns=["k"], columns=["k", "region"])
    _upsert(spark, h, {1, 4, 7, 10, 20}, lambda r: (r[0], r[1], f"u{r[0]}", r[3] + 100), **scoped)
    gone = [r for r in h.live if r[0] in (2, 5, 30)]
    write_equality_deletes(spark, table, ["k"], [(r[0], r[1]) for r in gone] + [(2, "us")], columns=["k", "region"])
    h.live = [r for r in h.live if r not in gone]
    h.record(spark, [])
    h.append(spark, [(2, REGIONS[2], "r2", 2), (70, "eu", "n70", 70), (71, "us", "n71", 71)])
    _upsert(spark, h, {4, 70}, lambda r: (r[0], r[1], f"w{r[0]}", r[3] + 1000), **scoped)
    spark.sql(f"DELETE FROM {table} WHERE k = 3")  # merge-on-read: a position delete
    h.live = [r for r in h.live if r[0] != 3]
    h.record(spark, [])
    return h


def _build_dim(spark: SparkSession, table: str) -> History:
    h = _new_table(spark, table, "k BIGINT, name STRING", [(k, f"name{k % 7}") for k in range(30)])
    write_equality_deletes(spark, table, ["k"], [(0,), (4,), (9,), (20,), (99,)])
    h.live = [r for r in h.live if r[0] not in (0, 4, 9, 20)]
    h.record(spark, [])
    return h


def _build_pairs(spark: SparkSession, table: str) -> History:
    h = _new_table(spark, table, "a INT, b STRING, v INT", [(a, b, a * 10) for a in range(8) for b in ("x", "y")])
    h.append(spark, [(a, "z", a) for a in range(4)])
    pair = dict(key_of=lambda r: (r[0], r[1]), scope=lambda r: (r[0], r[1]), key_columns=["a", "b"], columns=["a", "b"])
    _upsert(spark, h, {(1, "x"), (2, "y"), (3, "z")}, lambda r: (r[0], r[1], r[2] + 1000), **pair)
    h.append(spark, [(9, "x", 9)])
    return h


def _build_v3(spark: SparkSession, table: str) -> History:
    h = _new_table(spark, table, "k BIGINT, v STRING", [(k, f"a{k}") for k in range(20)], version=3)
    _upsert(spark, h, {3, 6, 9}, lambda r: (r[0], f"u{r[0]}"), key_of=lambda r: r[0], scope=lambda r: (r[0],),
            key_columns=["k"], columns=["k"])
    spark.sql(f"DELETE FROM {table} WHERE k = 12")  # a deletion vector
    h.live = [r for r in h.live if r[0] != 12]
    h.record(spark, [])
    return h


@dataclass
class Tables:
    ev: History
    dim: History
    pairs: History
    v3: History
    branch_rows: list[tuple]
    tag_snapshot: int

    def names(self, expected: bool = False) -> dict[str, str]:
        if expected:
            return {"ev": "ev_expected", "dim": "dim_expected", "pairs": "pairs_expected", "v3": "v3_expected"}
        return {"ev": self.ev.table, "dim": self.dim.table, "pairs": self.pairs.table, "v3": self.v3.table}


@pytest.fixture(scope="module")
def tables(spark: SparkSession) -> Tables:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.shapes")
    prefix = f"{CATALOG}.shapes.t{int(time.time() * 1000)}"
    ev = _build_ev(spark, f"{prefix}_ev")
    dim = _build_dim(spark, f"{prefix}_dim")
    pairs = _build_pairs(spark, f"{prefix}_pairs")
    v3 = _build_v3(spark, f"{prefix}_v3")
    # A branch from the upsert, with a commit of its own; a tag on the re-insert.
    branch_at, tag_at = ev.snapshots[1], ev.snapshots[3]
    spark.sql(f"ALTER TABLE {ev.table} CREATE BRANCH audit AS OF VERSION {branch_at}")
    spark.sql(f"INSERT INTO {ev.table}.branch_audit VALUES (90, 'eu', 'branch90', 90)")
    spark.sql(f"ALTER TABLE {ev.table} CREATE TAG reinsert AS OF VERSION {tag_at}")
    for h, name in ((ev, "ev"), (dim, "dim"), (pairs, "pairs"), (v3, "v3")):
        spark.createDataFrame(h.live, spark.table(h.table).schema).createOrReplaceTempView(f"{name}_expected")
    return Tables(ev, dim, pairs, v3, ev.live_at[branch_at] + [(90, "eu", "branch90", 90)], tag_at)


def outcome(query: Callable[[], DataFrame], ordered: bool = False) -> tuple[str, object]:
    """("rows", rows) or ("error", the error's first line): Iceberg refusing a read is an outcome too."""
    return run(query, ordered)[0]


def run(query: Callable[[], DataFrame], ordered: bool = False) -> tuple[tuple[str, object], DataFrame | None]:
    """The outcome of ``query``, and the DataFrame that ran (None when it failed)."""
    try:
        df = query()
        rows = [tuple(r) for r in df.collect()]
    except Exception as e:  # noqa: BLE001 - compared across strategies, not swallowed
        return ("error", str(e).strip().splitlines()[0][:200]), None
    return ("rows", rows if ordered else sorted_rows(rows)), df


def check(spark: SparkSession, query: Callable[[], DataFrame], *, expected: list[tuple] | None = None,
          ordered: bool = False, rewritten: bool | None = True, reason: str | None = None,
          may_refuse: bool = False, settings: dict[str, list[tuple[str, str]]] = SETTINGS) -> dict[str, list]:
    """``query`` natively and under every setting: same outcome as native (and ``expected``,
    unless Iceberg refuses the read and ``may_refuse``: then every setting must refuse it alike).

    ``rewritten``: every setting rewrites at least one scan and leaves none native for a reason
    other than having no equality deletes. False: every scan with equality deletes is left
    native, with ``reason`` in its decision and in EXPLAIN's plan. None: either.
    """
    with eqdelete.use_strategy(spark, "native"):
        native = outcome(query, ordered)
    if expected is not None and not (may_refuse and native[0] == "error"):
        assert native == ("rows", expected if ordered else sorted_rows(expected)), f"native: {native}"
    decisions = {}
    for name, conf in settings.items():
        with eqdelete.use_conf(spark, conf):
            result, df = run(query, ordered)
            assert result == native, f"{name} differs from native"
            if df is None:
                continue
            decisions[name] = eqdelete.decisions(df)
            looked_at = [d for d in decisions[name] if d.reason != "no planned data file carries equality deletes"]
            if rewritten is None:
                continue
            if rewritten:
                assert looked_at and all(d.rewritten for d in looked_at), f"{name}: {decisions[name]}"
            else:
                assert looked_at and not any(d.rewritten for d in looked_at), f"{name}: {decisions[name]}"
                assert all(reason in d.reason for d in looked_at), f"{name}: {decisions[name]}"
                plan = df._jdf.queryExecution().toString()  # noqa: SLF001 - what EXPLAIN EXTENDED prints
                assert f"[eqdelete native: {reason}" in plan, plan
    return decisions


# Shapes whose rows the test computes by running the same SQL on the in-memory copies.
SHAPES: dict[str, str] = {
    "select_star": "SELECT * FROM {ev}",
    "projection_without_key": "SELECT v FROM {ev}",
    "count_star": "SELECT count(*) FROM {ev}",
    "count_rows_of_two_tables": "SELECT (SELECT count(*) FROM {ev}), (SELECT count(*) FROM {dim})",
    "key_range": "SELECT * FROM {ev} WHERE k BETWEEN 3 AND 30",
    "key_in_list": "SELECT k, v FROM {ev} WHERE k IN (1, 2, 5, 7, 70)",
    "key_equals": "SELECT * FROM {ev} WHERE k = 4",
    "partition_filter": "SELECT * FROM {ev} WHERE region = 'eu'",
    "partition_and_key": "SELECT * FROM {ev} WHERE region = 'us' AND k < 20",
    "or_across_columns": "SELECT k, v FROM {ev} WHERE region = 'asia' OR n > 100",
    "not_and_null_checks": "SELECT k FROM {ev} WHERE NOT (v LIKE 'b%') AND v IS NOT NULL",
    "nondeterministic_filter": "SELECT k, v FROM {ev} WHERE rand(7) >= 0",
    "expression_in_filter": "SELECT k FROM {ev} WHERE k % 4 = 1 AND length(v) > 1",
    "case_insensitive_columns": "SELECT K, V FROM {ev} WHERE REGION = 'eu'",
    "group_by": "SELECT region, count(*), sum(n), min(v), max(v) FROM {ev} GROUP BY region",
    "min_max_count": "SELECT min(k), max(k), count(*), count(v) FROM {ev}",
    "distinct": "SELECT DISTINCT region FROM {ev}",
    "count_distinct": "SELECT count(DISTINCT k), count(DISTINCT region) FROM {ev}",
    "rollup": "SELECT region, n % 2 AS parity, count(*) FROM {ev} GROUP BY ROLLUP(region, n % 2)",
    "having": "SELECT region, count(*) c FROM {ev} GROUP BY region HAVING count(*) > 10",
    "inner_join": "SELECT e.k, e.v, d.name FROM {ev} e JOIN {dim} d ON e.k = d.k",
    "left_join": "SELECT e.k, e.v, d.name FROM {ev} e LEFT JOIN {dim} d ON e.k = d.k",
    "full_outer_join": "SELECT e.k, d.k, d.name FROM {ev} e FULL OUTER JOIN {dim} d ON e.k = d.k",
    "join_on_non_key": "SELECT e.k, d.k FROM {ev} e JOIN {dim} d ON e.n = d.k + 100",
    "cross_join_filtered": "SELECT e.k, d.k FROM {ev} e CROSS JOIN {dim} d WHERE e.k + d.k = 30",
    "self_join": "SELECT a.k, a.v, b.v FROM {ev} a JOIN {ev} b ON a.k = b.k + 1",
    "self_join_same_key": "SELECT a.k, b.region FROM {ev} a JOIN {ev} b ON a.k = b.k AND a.region = b.region",
    "union_all": "SELECT k FROM {ev} UNION ALL SELECT k FROM {dim}",
    "union_all_same_table": "SELECT k, v FROM {ev} WHERE region = 'eu' UNION ALL SELECT k, v FROM {ev} WHERE n > 50",
    "union_distinct": "SELECT k FROM {ev} UNION SELECT k FROM {dim}",
    "intersect": "SELECT k FROM {ev} INTERSECT SELECT k FROM {dim}",
    "except": "SELECT k FROM {ev} EXCEPT SELECT k FROM {dim}",
    "cte_used_twice": "WITH x AS (SELECT * FROM {ev} WHERE n < 50) SELECT a.k, b.v FROM x a JOIN x b ON a.k = b.k",
    "nested_ctes": "WITH a AS (SELECT k, v FROM {ev}), b AS (SELECT k FROM a WHERE k > 5) SELECT count(*) FROM b",
    "in_subquery": "SELECT * FROM {ev} WHERE k IN (SELECT k FROM {dim})",
    "not_in_subquery": "SELECT * FROM {ev} WHERE k NOT IN (SELECT k FROM {dim})",
    "exists": "SELECT * FROM {ev} e WHERE EXISTS (SELECT 1 FROM {dim} d WHERE d.k = e.k)",
    "not_exists": "SELECT * FROM {ev} e WHERE NOT EXISTS (SELECT 1 FROM {dim} d WHERE d.k = e.k)",
    "scalar_subquery": "SELECT k, (SELECT max(k) FROM {dim}) AS m FROM {ev}",
    "scalar_subquery_in_filter": "SELECT k FROM {ev} WHERE k > (SELECT avg(k) FROM {dim})",
    "correlated_scalar_subquery": "SELECT e.k, (SELECT max(d.name) FROM {dim} d WHERE d.k = e.k) FROM {ev} e",
    "lateral_subquery": "SELECT e.k, x.name FROM {ev} e, LATERAL (SELECT name FROM {dim} d WHERE d.k = e.k) x",
    "derived_table": "SELECT s.region, s.c FROM (SELECT region, count(*) c FROM {ev} GROUP BY region) s WHERE s.c > 1",
    "window_row_number": "SELECT k, region, row_number() OVER (PARTITION BY region ORDER BY k) FROM {ev}",
    "window_lag_and_sum": "SELECT k, lag(v) OVER (ORDER BY k, v), sum(n) OVER (PARTITION BY region) FROM {ev}",
    "explode": "SELECT k, x FROM {ev} LATERAL VIEW explode(array(n, n + 1)) t AS x",
    "values_join": "SELECT e.k, e.v FROM {ev} e JOIN VALUES (1), (2), (4), (70) AS t(x) ON e.k = t.x",
    "partition_column_join": "SELECT e.k, t.label FROM {ev} e JOIN VALUES ('eu', 'E') AS t(r, label) ON e.region = t.r",
    "dynamic_partition_pruning": "SELECT e.k, e.v FROM {ev} e JOIN (SELECT DISTINCT region FROM {ev} WHERE k = 6) s "
                                 "ON e.region = s.region",
    "tablesample_everything": "SELECT * FROM {ev} TABLESAMPLE (100 PERCENT)",
    "composite_key": "SELECT * FROM {pairs}",
    "composite_key_filter": "SELECT a, v FROM {pairs} WHERE b = 'x'",
    "v3_table": "SELECT * FROM {v3}",
}
ORDERED_SHAPES: dict[str, str] = {
    "order_by_limit": "SELECT * FROM {ev} ORDER BY k DESC, v LIMIT 7",
    "order_by_limit_offset": "SELECT k, v FROM {ev} ORDER BY k, v LIMIT 5 OFFSET 3",
    "top_by_window": "SELECT k, v FROM (SELECT k, v, rank() OVER (ORDER BY n DESC, k) r FROM {ev}) WHERE r <= 3 ORDER BY k",
}


@pytest.mark.parametrize("name", sorted(SHAPES) + sorted(ORDERED_SHAPES))
def test_shape(spark: SparkSession, tables: Tables, name: str) -> None:
    ordered = name in ORDERED_SHAPES
    sql = ORDERED_SHAPES[name] if ordered else SHAPES[name]
    with eqdelete.use_strategy(spark, "native"):
        expected = spark.sql(sql.format(**tables.names(expected=True))).collect()
    check(spark, lambda: spark.sql(sql.format(**tables.names())), expected=[tuple(r) for r in expected],
          ordered=ordered, settings=SHAPE_SETTINGS)


# Reads eqdelete does not model: Iceberg's own reader, the reason shown.

DELETED_REASON = "reads the _deleted metadata column"
INCREMENTAL_REASON = "incremental read"


def _marked(h: History) -> list[tuple]:
    """Every row in the table's data files, marked deleted or not, as Iceberg's `_deleted` shows them."""
    live = set(h.live)
    return [r + (r not in live,) for r in h.written()]


def test_deleted_metadata_column_stays_native(spark: SparkSession, tables: Tables) -> None:
    ev = tables.ev
    marked = _marked(ev)
    check(spark, lambda: spark.sql(f"SELECT *, _deleted FROM {ev.table}"), expected=marked,
          rewritten=False, reason=DELETED_REASON)
    check(spark, lambda: spark.sql(f"SELECT k, v FROM {ev.table} WHERE _deleted = true"),
          expected=[r[:1] + r[2:3] for r in marked if r[-1]], rewritten=False, reason=DELETED_REASON)
    by_flag: dict[bool, int] = {}
    for r in marked:
        by_flag[r[-1]] = by_flag.get(r[-1], 0) + 1
    check(spark, lambda: spark.sql(f"SELECT _deleted, count(*) FROM {ev.table} GROUP BY _deleted"),
          expected=list(by_flag.items()), rewritten=False, reason=DELETED_REASON)
    # The DataFrame API, and beside the other metadata columns.
    check(spark, lambda: spark.table(ev.table).select("k", "_file", "_deleted"), rewritten=False, reason=DELETED_REASON)


def _options_read(spark: SparkSession, table: str, options: dict) -> DataFrame:
    reader = spark.read.format("iceberg")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load(table)


def _appended_between(spark: SparkSession, h: History, start: int, end: int | None) -> list[tuple]:
    """Rows of the append commits after `start` up to `end`: Iceberg's incremental scans read only
    the data files of `append` snapshots, and apply no deletes."""
    operations = dict(spark.sql(f"SELECT snapshot_id, operation FROM {h.table}.snapshots").collect())
    order = h.snapshots
    last = order.index(end) if end is not None else len(order) - 1
    chosen = order[order.index(start) + 1:last + 1]
    return [r for s in chosen if operations[s] == "append" for r in h.appended[s]]


@pytest.mark.parametrize("table", ["ev", "pairs"])
def test_incremental_reads_stay_native(spark: SparkSession, tables: Tables, table: str) -> None:
    h: History = getattr(tables, table)
    first, middle = h.snapshots[0], h.snapshots[2]
    check(spark, lambda: _options_read(spark, h.table, {"start-snapshot-id": first, "end-snapshot-id": middle}),
          expected=_appended_between(spark, h, first, middle), rewritten=False, reason=INCREMENTAL_REASON)
    check(spark, lambda: _options_read(spark, h.table, {"start-snapshot-id": first}),
          expected=_appended_between(spark, h, first, None), rewritten=False, reason=INCREMENTAL_REASON)
    committed = dict(spark.sql(f"SELECT snapshot_id, committed_at FROM {h.table}.snapshots").collect())
    millis = lambda s: int(committed[s].replace(tzinfo=dt.timezone.utc).timestamp() * 1000)  # noqa: E731
    # Iceberg's batch scans take start-timestamp for changelogs only; eqdelete leaves it to Iceberg all the same.
    check(spark, lambda: _options_read(spark, h.table, {"start-timestamp": millis(first)}),
          rewritten=False, reason=INCREMENTAL_REASON)
    check(spark, lambda: _options_read(spark, h.table, {"start-snapshot-id": first}).where("v IS NOT NULL").select("v"),
          rewritten=False, reason=INCREMENTAL_REASON)


def test_unknown_read_option_stays_native(spark: SparkSession, tables: Tables) -> None:
    ev = tables.ev
    check(spark, lambda: spark.read.format("iceberg").option("some-future-option", "1").load(ev.table),
          expected=ev.live, rewritten=False, reason="read option 'some-future-option' is not one eqdelete models")
    # Options that only tune splits are modelled: the read is rewritten.
    check(spark, lambda: spark.read.option("split-size", "1024").option("vectorization-enabled", "false")
          .table(ev.table), expected=ev.live)
    if int(pyspark.__version__.split(".")[0]) >= 4:  # SQL's WITH (options) came with Spark 4.0
        check(spark, lambda: spark.sql(f"SELECT * FROM {ev.table} WITH ('split-size' = '2048')"), expected=ev.live)


def test_changelog_view_reads_natively(spark: SparkSession, tables: Tables) -> None:
    ev = tables.ev
    catalog, rest = ev.table.split(".", 1)
    view = "ev_changes"
    spark.sql(f"CALL {catalog}.system.create_changelog_view(table => '{rest}', changelog_view => '{view}', "
              f"options => map('start-snapshot-id', '{ev.snapshots[0]}'))")
    with eqdelete.use_strategy(spark, "native"):
        native = outcome(lambda: spark.table(view))
    for name, settings in SETTINGS.items():
        with eqdelete.use_conf(spark, settings):
            assert outcome(lambda: spark.table(view)) == native, name
            if native[0] == "rows":
                assert not any(d.rewritten for d in eqdelete.decisions(spark.table(view))), name


def test_streaming_read_stays_native(spark: SparkSession, tables: Tables, tmp_path) -> None:  # noqa: ANN001
    ev = tables.ev
    results = {}
    for name, settings in [("native", [("spark.eqdelete.strategy", "native")]), *SETTINGS.items()]:
        with eqdelete.use_conf(spark, settings):
            stream = (spark.readStream.format("iceberg")
                      .option("streaming-skip-overwrite-snapshots", "true")
                      .option("streaming-skip-delete-snapshots", "true").load(ev.table))
            sink = f"stream_{name}"
            query = (stream.writeStream.format("memory").queryName(sink).trigger(availableNow=True)
                     .option("checkpointLocation", str(tmp_path / name)).start())
            query.awaitTermination(300)
            assert query.exception() is None, query.exception()
            results[name] = sorted_rows(spark.table(sink).collect())
    # The stream reads the base load, the one plain append, and nothing it skips.
    assert results["native"] == sorted_rows(_appended_between(spark, ev, ev.snapshots[0], None) + ev.appended[ev.snapshots[0]])
    assert all(rows == results["native"] for rows in results.values())


# Time travel, branches and tags, by SQL and by read options.

def test_time_travel(spark: SparkSession, tables: Tables) -> None:
    ev = tables.ev
    s = ev.snapshots[1]
    check(spark, lambda: spark.sql(f"SELECT * FROM {ev.table} VERSION AS OF {s}"), expected=ev.live_at[s])
    # Spark's time-travel options (DataFrameReader.table() ignores them on Spark 3.5; load() does not).
    check(spark, lambda: _options_read(spark, ev.table, {"versionAsOf": s}), expected=ev.live_at[s])
    committed = spark.sql(f"SELECT committed_at FROM {ev.table}.snapshots WHERE snapshot_id = {s}").first()[0]
    check(spark, lambda: spark.sql(f"SELECT * FROM {ev.table} TIMESTAMP AS OF '{committed}'"), expected=ev.live_at[s])
    check(spark, lambda: _options_read(spark, ev.table, {"timestampAsOf": committed}), expected=ev.live_at[s])
    # Iceberg's own options: read as Iceberg reads them, or refused alike (Iceberg 1.12 on Spark 4.1
    # refuses them for versionAsOf).
    millis = int(committed.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)
    # Two snapshots of one table in one query.
    same = len(set(ev.live_at[s]) & set(ev.live))
    check(spark, lambda: spark.sql(f"SELECT count(*) FROM {ev.table} VERSION AS OF {s} a JOIN {ev.table} b "
                                   "ON a.k = b.k AND a.v = b.v"), expected=[(same,)])
    for options in ({"snapshot-id": s}, {"as-of-timestamp": millis}):
        check(spark, lambda: _options_read(spark, ev.table, options), expected=ev.live_at[s], may_refuse=True)


def test_snapshot_options_on_a_table_loaded_at_another_snapshot(spark: SparkSession, tables: Tables) -> None:
    # DataFrameReader.table() loads the current snapshot and hands Iceberg's own options to its
    # scan, which reads the snapshot they choose: the read is left to Iceberg (or refused alike,
    # by an Iceberg that no longer takes them).
    ev = tables.ev
    s = ev.snapshots[1]
    committed = spark.sql(f"SELECT committed_at FROM {ev.table}.snapshots WHERE snapshot_id = {s}").first()[0]
    millis = int(committed.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)
    for key, value, rows in (("snapshot-id", s, ev.live_at[s]), ("as-of-timestamp", millis, ev.live_at[s]),
                             ("branch", "audit", tables.branch_rows), ("tag", "reinsert", ev.live_at[tables.tag_snapshot])):
        check(spark, lambda: spark.read.option(key, str(value)).table(ev.table), expected=rows, may_refuse=True,
              rewritten=None)


def test_branches_and_tags(spark: SparkSession, tables: Tables) -> None:
    ev = tables.ev
    branch = tables.branch_rows
    check(spark, lambda: spark.sql(f"SELECT * FROM {ev.table}.branch_audit"), expected=branch)
    check(spark, lambda: spark.sql(f"SELECT * FROM {ev.table} VERSION AS OF 'audit'"), expected=branch)
    check(spark, lambda: _options_read(spark, ev.table, {"branch": "audit"}), expected=branch, may_refuse=True)
    tagged = ev.live_at[tables.tag_snapshot]
    check(spark, lambda: spark.sql(f"SELECT * FROM {ev.table}.tag_reinsert"), expected=tagged)
    check(spark, lambda: spark.sql(f"SELECT * FROM {ev.table} VERSION AS OF 'reinsert'"), expected=tagged)
    check(spark, lambda: _options_read(spark, ev.table, {"tag": "reinsert"}), expected=tagged, may_refuse=True)
    # The current snapshot through the DataFrame reader, by name.
    check(spark, lambda: spark.read.format("iceberg").load(ev.table), expected=ev.live)


def test_write_audit_publish_branch(spark: SparkSession, table_name: str) -> None:
    # With spark.wap.branch set and the table's write.wap.enabled, Iceberg reads that branch:
    # the plain table name no longer means the current snapshot, so eqdelete leaves it to Iceberg.
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    _insert(spark, table_name, [(k, f"a{k}") for k in range(10)])
    spark.sql(f"ALTER TABLE {table_name} CREATE BRANCH audit")
    spark.sql(f"INSERT INTO {table_name}.branch_audit VALUES (20, 'audit')")
    write_equality_deletes(spark, table_name, ["k"], [(1,), (2,)])  # on main only
    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES ('write.wap.enabled'='true')")
    audit = [(k, f"a{k}") for k in range(10)] + [(20, "audit")]
    check(spark, lambda: spark.sql(f"SELECT * FROM {table_name}.branch_audit"), expected=audit, rewritten=None)
    spark.conf.set("spark.wap.branch", "audit")
    try:
        with eqdelete.use_strategy(spark, "native"):
            expected = outcome(lambda: spark.table(table_name))[1]
        assert expected in (sorted_rows(audit), sorted_rows([(k, f"a{k}") for k in range(10) if k not in (1, 2)]))
        check(spark, lambda: spark.table(table_name), expected=expected, rewritten=None)
    finally:
        spark.conf.unset("spark.wap.branch")


# Metadata columns: rewritten, and equal to Iceberg's own.

@pytest.mark.parametrize(
    "sql",
    [
        "SELECT k, v, _file, _pos FROM {ev}",
        "SELECT k, _spec_id, _partition FROM {ev}",
        "SELECT _file, count(*) FROM {ev} GROUP BY _file",
        "SELECT k FROM {ev} WHERE _pos < 5",
        "SELECT k, _partition.region FROM {ev} WHERE _spec_id = 0 AND _file LIKE '%.parquet'",
        "SELECT k, v, _file, _pos, _row_id, _last_updated_sequence_number FROM {v3}",
        "SELECT _row_id FROM {v3} WHERE _last_updated_sequence_number > 1",
        "SELECT k, _spec_id, _partition, _file FROM {dim}",
    ],
)
def test_metadata_columns(spark: SparkSession, tables: Tables, sql: str) -> None:
    check(spark, lambda: spark.sql(sql.format(**tables.names())))


# DataFrames, caches, views, paths and catalogs.

def test_dataframe_api_cache_and_views(spark: SparkSession, tables: Tables) -> None:
    ev = tables.ev
    live_eu = [r for r in ev.live if r[1] == "eu"]
    check(spark, lambda: spark.table(ev.table).where("region = 'eu'"), expected=live_eu)
    spark.sql(f"CREATE OR REPLACE TEMP VIEW ev_view AS SELECT * FROM {ev.table} WHERE region = 'eu'")
    check(spark, lambda: spark.table("ev_view"), expected=live_eu)
    check(spark, lambda: spark.sql("SELECT count(*) FROM ev_view"), expected=[(len(live_eu),)])
    # A view Iceberg's catalog keeps, expanded by Spark's analyzer.
    iceberg_view = f"{ev.table}_eu"
    spark.sql(f"CREATE OR REPLACE VIEW {iceberg_view} AS SELECT k, v FROM {ev.table} WHERE region = 'eu'")
    check(spark, lambda: spark.table(iceberg_view), expected=[r[:1] + r[2:3] for r in live_eu])

    def cached() -> DataFrame:
        df = spark.table(ev.table).where("n < 1000")
        df.cache()
        df.count()
        return df

    check(spark, lambda: spark.sql(f"SELECT count(*) FROM {ev.table}.delete_files"), rewritten=None)
    for name, settings in [("native", [("spark.eqdelete.strategy", "native")]), *SETTINGS.items()]:
        with eqdelete.use_conf(spark, settings):
            spark.catalog.cacheTable(ev.table)
            try:
                assert sorted_rows(spark.table(ev.table).collect()) == sorted_rows(ev.live), name
            finally:
                spark.catalog.uncacheTable(ev.table)
            df = cached()
            try:
                assert sorted_rows(df.collect()) == sorted_rows([r for r in ev.live if r[3] < 1000]), name
                assert sorted_rows(df.groupBy("region").count().collect()) == sorted_rows(
                    [(g, sum(1 for r in ev.live if r[1] == g and r[3] < 1000)) for g in REGIONS]), name
            finally:
                df.unpersist(blocking=True)


def test_python_udf_and_input_file_name(spark: SparkSession, tables: Tables) -> None:
    from pyspark.sql.functions import col, input_file_name, udf

    ev = tables.ev
    is_odd = udf(lambda k: k % 2 == 1, BooleanType())
    check(spark, lambda: spark.table(ev.table).where(is_odd(col("k"))), expected=[r for r in ev.live if r[0] % 2])
    # The file a row came from, as Iceberg's reader reports it, under every strategy: a shuffled
    # join would move rows away from the task that read them, so there it stays native.
    decisions = check(spark, lambda: spark.table(ev.table).select("k", input_file_name().alias("f")), rewritten=None)
    assert set(decisions) == set(SETTINGS) and all(decisions.values()), decisions
    for name, records in decisions.items():
        if name == "join_shuffled":
            assert all(not d.rewritten and "input_file_name()" in d.reason for d in records), records
        else:
            assert all(d.rewritten for d in records), (name, records)
    check(spark, lambda: spark.sql(f"SELECT k, input_file_name() FROM {ev.table} WHERE region = 'us'"), rewritten=None)


def test_hadoop_catalog_table_read_by_path(spark: SparkSession, tables: Tables, tmp_path) -> None:  # noqa: ANN001
    # spark.read.load(<path>) reads a table of a Hadoop catalog through Iceberg's path tables.
    warehouse = tmp_path / "hadoop"
    for key, value in hadoop_catalog_options("shapes_hadoop", warehouse).items():
        spark.conf.set(key, value)
    table = "shapes_hadoop.db.by_path"
    spark.sql(f"CREATE TABLE {table} (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    _insert(spark, table, [(k, f"p{k}") for k in range(10)])
    write_equality_deletes(spark, table, ["k"], [(1,), (8,)])
    expected = [(k, f"p{k}") for k in range(10) if k not in (1, 8)]
    check(spark, lambda: spark.table(table), expected=expected)
    check(spark, lambda: spark.read.format("iceberg").load(str(warehouse / "db" / "by_path")), expected=expected)


def test_session_catalog(spark: SparkSession, tables: Tables, warehouse) -> None:  # noqa: ANN001
    # spark_catalog as Iceberg's SparkSessionCatalog (on a JDBC catalog), set on the running session.
    from eqdelete.config import catalog_options

    # Its own SQLite file: two JDBC catalogs on one file lock each other out on Iceberg 1.10
    # (SQLITE_BUSY on the next commit of the other), with or without eqdelete.
    options = catalog_options("spark_catalog", Path(warehouse) / "session_catalog")
    options["spark.sql.catalog.spark_catalog"] = "org.apache.iceberg.spark.SparkSessionCatalog"
    try:
        for key, value in options.items():
            spark.conf.set(key, value)
        name = f"shapes_session_{int(time.time() * 1000)}"
        ev = _build_ev(spark, f"spark_catalog.default.{name}")
        for table in (f"spark_catalog.default.{name}", f"default.{name}"):
            check(spark, lambda: spark.table(table), expected=ev.live)
            check(spark, lambda: spark.sql(f"SELECT k, count(*) FROM {table} WHERE region <> 'us' GROUP BY k"),
                  expected=[(k, sum(1 for r in ev.live if r[0] == k and r[1] != "us"))
                            for k in {r[0] for r in ev.live if r[1] != "us"}])
    finally:
        for key in options:
            spark.conf.unset(key)


# Statements reading tables with equality deletes: the source is rewritten, the rows written right.

@pytest.mark.parametrize(
    "statement, reads",
    [
        ("CREATE TABLE {target} USING iceberg AS SELECT * FROM {ev}", 1),
        ("CREATE OR REPLACE TABLE {target} USING iceberg AS SELECT * FROM {ev} WHERE n > 3", 1),
        ("CREATE TABLE {target} USING iceberg PARTITIONED BY (region) AS "
         "SELECT e.*, d.name FROM {ev} e LEFT JOIN {dim} d ON e.k = d.k", 2),
        ("INSERT INTO {target} SELECT * FROM {ev}", 1),
        ("INSERT OVERWRITE {target} SELECT * FROM {ev} WHERE region = 'eu'", 1),
        ("MERGE INTO {target} t USING {ev} s ON t.k = s.k "
         "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *", 1),
        ("DELETE FROM {target} WHERE k IN (SELECT k FROM {dim})", 1),
        ("UPDATE {target} SET v = 'in dim' WHERE k IN (SELECT k FROM {dim})", 1),
    ],
)
def test_statement_sources(spark: SparkSession, tables: Tables, statement: str, reads: int) -> None:
    names = tables.names()
    written = {}
    for name, settings in [("native", [("spark.eqdelete.strategy", "native")]), *SETTINGS.items()]:
        target = f"{tables.ev.table}_{name}_{abs(hash(statement)) % 10**8}"
        if not statement.startswith("CREATE TABLE"):
            spark.sql(f"CREATE TABLE {target} (k BIGINT, region STRING, v STRING, n INT) USING iceberg "
                      f"TBLPROPERTIES ({MOR.format(v=2)})")
            _insert(spark, target, [(k, "eu", f"t{k}", k) for k in range(0, 80, 3)])
        with eqdelete.use_conf(spark, settings):
            spark.sql(statement.format(target=target, **names))
            used = [d for d in eqdelete.last_decisions(spark) if d.table != target]
        if name != "native":
            # Iceberg's DELETE and UPDATE may read their subquery twice (a runtime filter too).
            assert len({d.table for d in used}) == reads and all(d.rewritten for d in used), f"{name}: {used}"
        with eqdelete.use_strategy(spark, "native"):
            written[name] = sorted_rows(spark.table(target).collect())
    assert all(rows == written["native"] for rows in written.values()), written
    if statement.startswith("CREATE TABLE {target} USING iceberg AS SELECT * FROM"):
        assert written["native"] == sorted_rows(tables.ev.live)


def test_spark_table_as_select_source(spark: SparkSession, tables: Tables) -> None:
    # A CTAS into Spark's built-in catalog (a v1 command that runs its query as an execution of its own).
    ev = tables.ev
    for name, settings in SETTINGS.items():
        target = f"default.shapes_parquet_{name}_{int(time.time() * 1000)}"
        with eqdelete.use_conf(spark, settings):
            spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT * FROM {ev.table}")
            used = eqdelete.last_decisions(spark)
        assert [d.table for d in used] == [ev.table] and used[0].rewritten, (name, used)
        assert sorted_rows(spark.table(target).collect()) == sorted_rows(ev.live), name


def test_dataframe_writer_source(spark: SparkSession, tables: Tables) -> None:
    ev = tables.ev
    for name, settings in SETTINGS.items():
        target = f"{ev.table}_written_{name}"
        with eqdelete.use_conf(spark, settings):
            spark.table(ev.table).writeTo(target).using("iceberg").create()
            used = eqdelete.last_decisions(spark)
            assert [d.table for d in used] == [ev.table] and used[0].rewritten, (name, used)
        with eqdelete.use_strategy(spark, "native"):
            assert sorted_rows(spark.table(target).collect()) == sorted_rows(ev.live), name
