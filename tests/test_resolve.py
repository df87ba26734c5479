"""Resolving equality deletes into position deletes (v2) and deletion vectors (v3).

Each table's history is written here and modelled here: the rows it must hold, and which live
rows its equality deletes remove, are computed from what the test wrote (never only from
Iceberg's reader); native reads before and after must agree with them.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pytest
from fixtures import MOR, sorted_rows
from py4j.protocol import Py4JJavaError
from pyspark.sql import Row, SparkSession

import eqdelete
from eqdelete import _jvm, write_equality_deletes

Scope = Optional[tuple]  # None: global; ("spec0",) for rows of the unpartitioned spec; ("p", n)


@dataclass
class Model:
    """Rows with their data sequence numbers and scopes; position and equality deletes."""

    rows: list[tuple[dict, int, Scope]] = field(default_factory=list)
    positions: set[int] = field(default_factory=set)  # v of rows deleted by position
    equality: list[tuple[dict, int, Scope]] = field(default_factory=list)
    seq: int = 0

    def eq_deleted(self, row: dict, seq: int, scope: Scope) -> bool:
        return any(
            all(row[c] == v for c, v in keys.items()) and seq < dseq and dscope in (None, scope)
            for keys, dseq, dscope in self.equality
        )

    def live(self) -> list[tuple]:
        return sorted_rows([tuple(r.values()) for r, s, sc in self.rows
                            if r["v"] not in self.positions and not self.eq_deleted(r, s, sc)])

    def resolvable(self, scopes: Optional[set] = None) -> int:
        """Live rows (not deleted by position) an equality delete removes; only deletes of ``scopes``."""
        chosen = [d for d in self.equality if scopes is None or d[2] in scopes]
        return sum(1 for r, s, sc in self.rows if r["v"] not in self.positions and any(
            all(r[c] == v for c, v in keys.items()) and s < dseq and dscope in (None, sc) for keys, dseq, dscope in chosen))


class History:
    """A table created unpartitioned, then partitioned by p (so global deletes exist)."""

    def __init__(self, spark: SparkSession, table: str, version: int) -> None:
        self.spark, self.table, self.model = spark, table, Model()
        spark.sql(f"CREATE TABLE {table} (k BIGINT, c STRING, p INT, v INT) USING iceberg "
                  f"TBLPROPERTIES ({MOR.format(v=version)})")
        self.spec = "spec0"

    def _scope(self, p: int) -> Scope:
        return ("spec0",) if self.spec == "spec0" else ("p", p)

    def insert(self, rows: list[tuple]) -> None:
        self.spark.createDataFrame(rows, self.spark.table(self.table).schema).writeTo(self.table).append()
        self.model.seq += 1
        self.model.rows += [(dict(zip("kcpv", r)), self.model.seq, self._scope(r[2])) for r in rows]

    def partition(self) -> None:
        self.spark.sql(f"ALTER TABLE {self.table} ADD PARTITION FIELD p")
        self.spec = "p"

    def delete_where(self, v: int) -> None:
        self.spark.sql(f"DELETE FROM {self.table} WHERE v = {v}")
        self.model.seq += 1
        self.model.positions.add(v)

    def equality(self, keys: list[str], rows: list[tuple], *, global_: bool = False, inserts: list[tuple] = ()) -> None:
        columns = keys if global_ else keys + ["p"]
        write_equality_deletes(self.spark, self.table, keys, rows, columns=columns, global_deletes=global_,
                               inserts=list(inserts) or None)
        self.model.seq += 1
        for r in rows:
            self.model.equality.append((dict(zip(keys, r)), self.model.seq, None if global_ else ("p", r[-1])))
        self.model.rows += [(dict(zip("kcpv", r)), self.model.seq, ("p", r[2])) for r in inserts]


def build(spark: SparkSession, table: str, version: int) -> History:
    h = History(spark, table, version)
    h.insert([(k, f"c{k}", k % 2, k) for k in range(10)])                      # spec 0 (unpartitioned)
    h.partition()
    h.insert([(k, f"c{k}", k % 2, k) for k in range(10, 30)] + [(None, "cn", 0, 100), (None, "cn", 1, 101)])
    h.delete_where(12)                                                          # a position delete / DV
    h.equality(["k"], [(11, 1), (14, 0), (3, 1), (None, 0)])                    # scoped; k=3 is spec 0: kept
    h.equality(["k", "c"], [(16, "c16", 0), (17, "x", 1), (18, "c18", 0)])     # a second equality set
    h.equality(["k"], [(5,), (20,)], global_=True)                              # global: both specs
    h.equality(["k"], [(21, 1)], inserts=[(21, "c21b", 1, 200)])                # an upsert: the new row stays
    h.delete_where(22)                                                          # a second one, same data file
    return h


def eq_delete_files(spark: SparkSession, table: str) -> int:
    return spark.sql(f"SELECT count(*) FROM {table}.delete_files WHERE content = 2").collect()[0][0]


def native_rows(spark: SparkSession, table: str, version: Any = None) -> list[tuple]:
    source = table if version is None else f"{table} VERSION AS OF {version}"
    with eqdelete.use_strategy(spark, "native"):
        return sorted_rows(spark.sql(f"SELECT k, c, p, v FROM {source}").collect())


def snapshot(spark: SparkSession, table: str) -> int:
    return _jvm.current_snapshot_id(spark, table)


@pytest.mark.parametrize("version", [2, 3])
def test_resolve_leaves_no_equality_deletes_and_the_same_rows(spark: SparkSession, table_name: str, version: int) -> None:
    h = build(spark, table_name, version)
    expected, files_before = h.model.live(), eq_delete_files(spark, table_name)
    # One file per partition an equality commit touches: (k) p0 and p1, (k, c) p0 and p1, global, upsert.
    assert native_rows(spark, table_name) == expected and files_before == 6
    start = snapshot(spark, table_name)

    dry = eqdelete.resolve_equality_deletes(spark, table_name, dry_run=True)
    assert (dry.dry_run, dry.committed, snapshot(spark, table_name)) == (True, False, start)
    assert (dry.rows_resolved, dry.equality_delete_files_removed) == (h.model.resolvable(), 6)

    result = eqdelete.resolve_equality_deletes(spark, table_name)
    assert result.committed and result.starting_snapshot_id == start
    assert result.snapshot_id == snapshot(spark, table_name)
    assert (result.rows_resolved, result.equality_delete_files_removed) == (h.model.resolvable(), 6)
    assert eq_delete_files(spark, table_name) == 0
    assert native_rows(spark, table_name) == expected
    for strategy in ("filter", "join"):
        with eqdelete.use_strategy(spark, strategy):
            assert sorted_rows(spark.sql(f"SELECT k, c, p, v FROM {table_name}").collect()) == expected
    # Time travel reads the old snapshot, equality deletes and all.
    assert native_rows(spark, table_name, start) == expected
    with eqdelete.use_strategy(spark, "join"):
        [old] = eqdelete.decisions(spark.sql(f"SELECT * FROM {table_name} VERSION AS OF {start}"))
        assert old.delete_files > 0  # (Iceberg pairs a file by its bounds: not all six)

    positions = spark.sql(f"SELECT file_format, referenced_data_file, record_count FROM {table_name}.delete_files").collect()
    if version == 3:
        # One deletion vector per data file, the DELETEs' merged in (theirs replaced).
        assert {r.file_format for r in positions} == {"PUFFIN"}
        assert len({r.referenced_data_file for r in positions}) == len(positions)
        assert result.deletion_vectors_written >= 1 and result.position_delete_files_written == 0
        assert result.delete_files_replaced >= 1
        assert sum(r.record_count for r in positions) == h.model.resolvable() + len(h.model.positions)
    else:
        assert result.position_delete_files_written >= 1 and result.deletion_vectors_written == 0
        assert sum(r.record_count for r in positions) == h.model.resolvable() + len(h.model.positions)

    again = eqdelete.resolve_equality_deletes(spark, table_name)
    assert (again.committed, again.rows_resolved, snapshot(spark, table_name)) == (False, 0, result.snapshot_id)

    # Iceberg's own maintenance works on the result.
    catalog, rest = table_name.split(".", 1)
    spark.sql(f"CALL {catalog}.system.rewrite_position_delete_files(table => '{rest}', options => map('rewrite-all', 'true'))")
    assert native_rows(spark, table_name) == expected
    spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => '{rest}', options => map('delete-file-threshold', '1'))")
    assert native_rows(spark, table_name) == expected


def test_a_partition_filter_resolves_only_the_partitions_it_selects(spark: SparkSession, table_name: str) -> None:
    h = build(spark, table_name, 2)
    expected = h.model.live()
    result = eqdelete.resolve_equality_deletes(spark, table_name, where="p = 0")
    # The p=0 scoped files of (k) and (k, c) go; their p=1 files, the global one and the upsert's stay.
    assert result.committed and result.equality_delete_files_removed == 2 and result.equality_delete_files_kept == 4
    assert result.rows_resolved == h.model.resolvable({("p", 0)})
    assert eq_delete_files(spark, table_name) == 4
    assert native_rows(spark, table_name) == expected
    rest = eqdelete.resolve_equality_deletes(spark, table_name)
    assert rest.committed and eq_delete_files(spark, table_name) == 0
    assert native_rows(spark, table_name) == expected


def test_a_filter_within_partitions_resolves_nothing(spark: SparkSession, table_name: str) -> None:
    build(spark, table_name, 2)
    start = snapshot(spark, table_name)
    result = eqdelete.resolve_equality_deletes(spark, table_name, where="v > 5")
    assert (result.committed, result.equality_delete_files_removed, snapshot(spark, table_name)) == (False, 0, start)
    with pytest.raises(Exception, match="Iceberg cannot evaluate it on partitions"):
        eqdelete.resolve_equality_deletes(spark, table_name, where="length(c) > 1")
    assert snapshot(spark, table_name) == start


def _prepare(spark: SparkSession, table: str) -> Any:
    return spark._jvm.eqdelete.resolve.ResolveEqualityDeletes.prepare(spark._jsparkSession, table, None)  # noqa: SLF001


def test_a_conflicting_commit_fails_the_resolve_and_leaves_the_table(spark: SparkSession, table_name: str) -> None:
    h = build(spark, table_name, 3)
    expected = h.model.live()
    prepared = _prepare(spark, table_name)
    # Meanwhile, compaction rewrites the data files the resolve wrote deletion vectors for.
    catalog, rest = table_name.split(".", 1)
    spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => '{rest}', options => map('rewrite-all', 'true'))")
    after_rewrite = snapshot(spark, table_name)
    with pytest.raises(Py4JJavaError, match="conflicts with a commit made since snapshot"):
        prepared.commit()
    assert snapshot(spark, table_name) == after_rewrite
    assert native_rows(spark, table_name) == expected


def test_appends_and_new_equality_deletes_meanwhile_do_not_conflict(spark: SparkSession, table_name: str) -> None:
    h = build(spark, table_name, 2)
    prepared = _prepare(spark, table_name)
    h.insert([(40, "c40", 0, 300), (41, "c41", 1, 301)])
    h.equality(["k"], [(24, 0), (40, 0)])  # a new delete, of old and new rows: not resolved by this run
    result = prepared.commit()
    assert result.committed() and result.equalityDeleteFilesRemoved() == 6
    assert eq_delete_files(spark, table_name) == 1
    assert native_rows(spark, table_name) == h.model.live()


def test_an_unreadable_delete_file_fails_before_anything_is_written(spark: SparkSession, table_name: str) -> None:
    build(spark, table_name, 2)
    start = snapshot(spark, table_name)
    path = spark.sql(f"SELECT file_path FROM {table_name}.delete_files WHERE content = 2").collect()[0][0]
    Path(path.removeprefix("file:")).write_bytes(b"not a parquet file" * 10)
    with pytest.raises(Exception, match="cannot read equality delete file"):
        eqdelete.resolve_equality_deletes(spark, table_name)
    assert snapshot(spark, table_name) == start


def test_nested_keys_are_resolved(spark: SparkSession, table_name: str) -> None:
    """Keys on a struct field, which Iceberg's own reader mishandles: rows computed here."""
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT, s STRUCT<a: INT, b: STRING>, v INT) USING iceberg "
              f"TBLPROPERTIES ({MOR.format(v=2)})")
    rows = [(i, (i % 7, f"b{i}"), i) for i in range(40)]
    spark.createDataFrame(rows, spark.table(table_name).schema).writeTo(table_name).append()
    write_equality_deletes(spark, table_name, ["s.a"], [(Row(a=3, b=None),), (Row(a=5, b=None),)], columns=["s"])
    expected = sorted_rows([(i, (a, b), v) for i, (a, b), v in rows if a not in (3, 5)])
    result = eqdelete.resolve_equality_deletes(spark, table_name)
    assert result.committed and result.rows_resolved == 40 - len(expected)
    with eqdelete.use_strategy(spark, "native"):
        assert sorted_rows([(r.id, tuple(r.s), r.v) for r in spark.table(table_name).collect()]) == expected


def test_cli_resolves_with_progress(spark: SparkSession, warehouse: Path, table_name: str, tmp_path: Path) -> None:
    from processes import eqdelete_cli

    from eqdelete.tools.cdc import CdcSpec, generate

    # The table made by this session, in the catalog the command opens too (the same warehouse): one
    # command's JVM started, not one more for `generate` (test_cdc.py's demo runs it from the command line).
    # The command's refusals in one line: tests/test_faults.py; a WHERE refused on partitions: above.
    generate(spark, CdcSpec(table=table_name, rows=3000, commits=3, format_version=3))
    result = eqdelete_cli(tmp_path, "resolve", "--table", table_name, "--progress-seconds", "0.2", "--warehouse", str(warehouse),
                          "--master", "local[2]", "--driver-memory", "1g")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"resolved {table_name}: snapshot" in result.stdout and "deletion vector(s)" in result.stdout
    assert "[eqdelete resolve]" in result.stderr and "tasks" in result.stderr
    spark.sql(f"REFRESH TABLE {table_name}")
    assert spark.sql(f"SELECT count(*) FROM {table_name}.delete_files WHERE content = 2").first()[0] == 0


def test_the_result_has_one_schema(spark: SparkSession, table_name: str) -> None:
    """The procedure's columns are the JVM's one list of the result's fields (``Result.Fields``);
    Python's ``ResolveResult`` has the same fields, in order, with the matching types."""
    build(spark, table_name, 3)
    schema = spark.sql(f"CALL eqdelete.system.resolve_equality_deletes(table => '{table_name}', dry_run => true)").schema
    assert [f.name for f in dataclasses.fields(eqdelete.ResolveResult)] == schema.names
    python_type = {"StringType": str, "LongType": int, "IntegerType": int, "BooleanType": bool, "DoubleType": float}
    hints = typing.get_type_hints(eqdelete.ResolveResult)
    for column in schema.fields:
        expected = python_type[type(column.dataType).__name__]
        assert hints[column.name] == (Optional[expected] if column.nullable else expected), column.name


def test_sql_call_procedure(spark: SparkSession, table_name: str) -> None:
    """Spark 4.x runs CALL itself; ``eqdelete.session()`` registers the procedure catalog."""
    h = build(spark, table_name, 3)
    dry = spark.sql(f"CALL eqdelete.system.resolve_equality_deletes(table => '{table_name}', dry_run => true)").collect()
    assert [(r.dry_run, r.snapshot_id, r.rows_resolved) for r in dry] == [(True, None, h.model.resolvable())]
    [row] = spark.sql(f"CALL eqdelete.system.resolve_equality_deletes(table => '{table_name}', where => 'p = 0')").collect()
    assert row.snapshot_id == snapshot(spark, table_name) and row.equality_delete_files_removed == 2
    [row] = spark.sql(f"CALL eqdelete.system.resolve_equality_deletes('{table_name}')").collect()
    assert row.equality_delete_files_removed == 4 and eq_delete_files(spark, table_name) == 0
    assert native_rows(spark, table_name) == h.model.live()
    with pytest.raises(Exception, match="`eqdelete`.`system`.`nothing`"):  # Spark's FAILED_TO_LOAD_ROUTINE
        spark.sql("CALL eqdelete.system.nothing()").collect()
