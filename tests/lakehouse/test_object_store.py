"""eqdelete's reads, writes and checks go through each table's own FileIO, the one the REST catalog
configures with the table's S3 keys: the session holds no key of its own, and a delete file lost or
rewritten on the object store fails the query by name under every strategy, also after the filter's
index of it was kept from an earlier query (checked through the FileIO, not a local path)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from lakehouse.conftest import CATALOG
from fixtures import FIXTURES
from pyspark.sql import SparkSession

import eqdelete
from eqdelete.tools.lakehouse import Lakehouse

_names = itertools.count()


@pytest.fixture
def table(spark: SparkSession, lake: str) -> str:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {lake}.store")
    return f"{lake}.store.t{next(_names)}"


def _eq_delete_paths(spark: SparkSession, table: str) -> list[str]:
    return [r[0] for r in spark.sql(f"SELECT file_path FROM {table}.delete_files WHERE content = 2").collect()]


def _damage(lakehouse: Lakehouse, location: str, how: str) -> None:
    """What someone with the bucket's keys could do to an object behind the table's back."""
    store, key = lakehouse.s3_filesystem(), lakehouse.object_key(location)
    if how == "missing":
        store.delete_file(key)
        return
    size = store.get_file_info(key).size
    with store.open_output_stream(key) as out:
        out.write(b"not a parquet file" * 10 if how == "corrupt" else b"\0" * size)


def test_the_session_holds_no_key_of_the_store(spark: SparkSession, lake: str, lakehouse: Lakehouse) -> None:
    settings = {k: v for k, v in spark.sparkContext.getConf().getAll()} | lakehouse.spark_options(lake)
    assert not [k for k in settings if "access" in k and "key" in k or "secret" in k or "credential" in k]
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # noqa: SLF001
    assert hadoop.get("fs.s3a.access.key") is None and hadoop.get("fs.s3.impl") is None


@pytest.mark.parametrize("strategy", ["filter", "join", "auto"])
def test_tables_spark_writes_on_the_store(spark: SparkSession, table: str, strategy: str) -> None:
    fixture = FIXTURES["upserts_and_reinserts"](spark, table)
    assert all(p.startswith("s3://lake/warehouse/") for p in _eq_delete_paths(spark, table))
    settings = [("spark.eqdelete.strategy", strategy), ("spark.eqdelete.auto.minDataRows", "0")]
    with eqdelete.use_conf(spark, settings):
        df = spark.table(table)
        assert sorted(tuple(r) for r in df.collect()) == sorted(fixture.expected)
        [decision] = eqdelete.decisions(df)
    assert decision.strategy == ("filter" if strategy == "auto" else strategy) and decision.delete_files == 3


@pytest.mark.parametrize("damage", ["missing", "corrupt", "same-size"])
@pytest.mark.parametrize("strategy", ["filter", "join"])
def test_a_delete_file_damaged_on_the_store_fails_by_name(spark: SparkSession, lakehouse: Lakehouse, table: str,
                                                          damage: str, strategy: str) -> None:
    # Read once intact: the filter strategy keeps its index, and must still notice the damage.
    FIXTURES["single_key"](spark, table)
    [path] = _eq_delete_paths(spark, table)
    with eqdelete.use_strategy(spark, strategy):
        assert spark.table(table).count() == 7
        _damage(lakehouse, path, damage)
        with pytest.raises(Exception) as error:
            spark.table(table).collect()
    assert f"eqdelete: cannot read equality delete file {path}" in str(error.value)


def test_resolve_and_maintain_commit_through_the_catalog(spark: SparkSession, lakehouse: Lakehouse, table: str) -> None:
    from pyiceberg.catalog import load_catalog

    fixture = FIXTURES["mixed_position_and_equality"](spark, table, version=3)
    first = eqdelete.maintain_round(spark, table)
    assert first.committed and first.deletion_vectors_written >= 1 and first.equality_delete_files_live == 0
    dvs = spark.sql(f"SELECT file_path, file_format FROM {table}.delete_files").collect()
    assert dvs and all(r.file_format == "PUFFIN" and r.file_path.startswith("s3://lake/") for r in dvs)
    catalog = load_catalog(CATALOG, **lakehouse.pyiceberg_properties())
    name = table.split(".", 1)[1]
    assert catalog.load_table(name).current_snapshot().snapshot_id == first.snapshot_id
    rows = catalog.load_table(name).scan().to_arrow().to_pylist()
    assert sorted((r["k"], r["v"]) for r in rows) == sorted(fixture.expected)


def test_kept_state_is_checkpointed_on_the_store_and_restored(spark: SparkSession, lakehouse: Lakehouse, table: str) -> None:
    """maintain's kept index and the changes' kept row images checkpoint to the object store, beside
    the table (its ``_eqdelete_state/``, written through the table's own FileIO with the keys the
    catalog handed it): stores lost here load from there, and a restart (the driver's state of them
    forgotten) restores them from there instead of building them again. Rows against the model."""
    from pyarrow import fs

    from eqdelete import _jvm

    spark.sql(f"CREATE TABLE {table} (k BIGINT, v STRING) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')")
    spark.createDataFrame([(k, f"a{k}") for k in range(300)], "k BIGINT, v STRING").repartition(3).writeTo(table).append()
    model = {k: f"a{k}" for k in range(300)}
    images = spark.sparkContext._jvm.eqdelete.changes.KeptRowImages
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").filter("col_name = 'Location'").first().data_type

    def upsert(tag: str, keys: range) -> None:
        eqdelete.write_equality_deletes(spark, table, ["k"], [(k,) for k in keys], inserts=[(k, f"{tag}{k}") for k in keys])
        model.update({k: f"{tag}{k}" for k in keys})

    def step(tag: str, keys: range) -> eqdelete.MaintainRound:
        # An upsert, its changes through the row images (against those read from the data files), a round.
        upsert(tag, keys)
        last = [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at").collect()][-2]
        imaged = sorted(map(tuple, eqdelete.changes(spark, table, start_snapshot_id=last).collect()))
        with eqdelete.use_conf(spark, [("spark.eqdelete.changes.rowImages", "false")]):
            assert imaged == sorted(map(tuple, eqdelete.changes(spark, table, start_snapshot_id=last).collect()))
        result = eqdelete.maintain_round(spark, table, keep_index=True)
        assert result.committed and result.rows_resolved == len(keys), result.render()
        with eqdelete.use_strategy(spark, "native"):
            assert dict(spark.table(table).collect()) == model
        return result

    settings = [("spark.eqdelete.maintain.liveIndex", "always"), ("spark.eqdelete.changes.rowImages", "true")]
    with eqdelete.use_conf(spark, settings):
        try:
            built = step("b", range(0, 30))
            assert "built from the table" in (built.live_index_note or ""), built.render()
            state = lakehouse.s3_filesystem().get_file_info(fs.FileSelector(lakehouse.object_key(f"{location}/_eqdelete_state"),
                                                                             recursive=True))
            names = [f.path for f in state if f.type == fs.FileType.File]
            assert any("/live-index/" in n and n.endswith(".json") for n in names), names
            assert any("/row-images/" in n and n.endswith(".sst") for n in names), names
            loads = _jvm.kept_store_loads(spark)
            _jvm.lose_kept_index_stores(spark, table)
            lost = step("c", range(20, 50))
            assert lost.live_index_note is None and _jvm.kept_store_loads(spark) > loads, lost.render()
            built_images, restored_images = images.built(), images.restored()
            _jvm.forget_kept_indexes(spark, table)
            images.forgetAll(spark._jsparkSession)
            restarted = step("d", range(40, 70))
            assert "restored from version" in (restarted.live_index_note or ""), restarted.render()
            assert images.restored() - restored_images == 1 and images.built() == built_images
        finally:
            _jvm.forget_kept_indexes(spark, table)


def test_a_streams_row_images_are_checkpointed_on_the_store(spark: SparkSession, lakehouse: Lakehouse, table: str,
                                                            tmp_path: Path) -> None:
    """A changes stream with ``spark.eqdelete.state.location`` on the object store (its own checkpoint
    on local disk): its kept row images checkpoint there, through the table's FileIO, and a restart
    (the driver's images forgotten) restores them from there and brings them forward instead of
    building them from a full read. Replayed, the batches give every snapshot's rows."""
    from pyarrow import fs
    from test_changes import lineage, rows_at
    from test_changes_stream import replay, stream_batches

    spark.sql(f"CREATE TABLE {table} (k BIGINT, v STRING) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.createDataFrame([(k, f"a{k}") for k in range(40)], "k BIGINT, v STRING").repartition(2).writeTo(table).append()
    upserts = iter((("b", [1, 2, 3]), ("c", [2, 3, 25]), ("d", [3, 25, 7]), ("e", [1, 7, 8]), ("f", [8, 9])))

    def upsert(n: int) -> None:
        for _, (tag, keys) in zip(range(n), upserts):
            eqdelete.write_equality_deletes(spark, table, ["k"], [(k,) for k in keys], inserts=[(k, f"{tag}{k}") for k in keys])

    images = spark.sparkContext._jvm.eqdelete.changes.KeptRowImages
    state, checkpoint = f"{lakehouse.warehouse}/stream-state-{tmp_path.name}", tmp_path / "checkpoint"
    upsert(3)
    built, restored = images.built(), images.restored()
    with eqdelete.use_conf(spark, [("spark.eqdelete.changes.rowImages", "true"), ("spark.eqdelete.state.location", state)]):
        batches = stream_batches(spark, table, checkpoint, max_snapshots_per_trigger=1)
        assert images.built() - built == 1
        stored = [f.path for f in lakehouse.s3_filesystem().get_file_info(fs.FileSelector(lakehouse.object_key(state), recursive=True))
                  if f.type == fs.FileType.File]
        assert any("/row-images/" in n and n.endswith(".json") for n in stored), stored
        assert not list(checkpoint.rglob("*.sst")), "row images beside the checkpoint, not on the store"
        images.forgetAll(spark._jsparkSession)
        upsert(2)
        batches += stream_batches(spark, table, checkpoint, max_snapshots_per_trigger=1)
    assert images.restored() - restored == 1 and images.built() - built == 1, "built again instead of restored"
    assert replay(spark, table, batches) == rows_at(spark, table, lineage(spark, table)[-1])
