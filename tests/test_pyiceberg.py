"""pyiceberg's SqlCatalog opens the embedded catalog and sees the same tables and delete files."""

from __future__ import annotations

from pathlib import Path

from fixtures import FIXTURES
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession


def test_pyiceberg_sees_spark_tables_and_delete_files(spark: SparkSession, warehouse: Path, table_name: str) -> None:
    FIXTURES["two_equality_sets"](spark, table_name)
    catalog = SqlCatalog("local", uri=f"sqlite:///{warehouse / 'catalog.db'}", warehouse=warehouse.as_uri())

    namespace, name = table_name.split(".")[1:]
    assert (namespace, name) in catalog.list_tables(namespace)
    table = catalog.load_table(f"{namespace}.{name}")

    spark_snapshot = spark.sql(f"SELECT snapshot_id FROM {table_name}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    assert table.current_snapshot().snapshot_id == spark_snapshot

    deletes = table.inspect.delete_files().to_pylist()
    spark_deletes = spark.sql(f"SELECT file_path, equality_ids, record_count FROM {table_name}.delete_files").collect()
    assert sorted((d["file_path"], tuple(d["equality_ids"]), d["record_count"]) for d in deletes) == sorted(
        (r["file_path"], tuple(r["equality_ids"]), r["record_count"]) for r in spark_deletes
    )
    assert {d["content"] for d in deletes} == {2}
