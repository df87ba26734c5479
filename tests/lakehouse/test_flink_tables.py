"""Tables written by the real producer, Flink's Iceberg sink, into the lakehouse (s3proxy behind
Iceberg's REST catalog), read, resolved and read again by Spark with eqdelete and by pyiceberg.

``eqdelete.tools.flink`` writes them once per module, run in the Flink virtualenv scripts/setup.sh makes
(a subprocess: PyFlink and pyspark live in different virtualenvs), through the REST catalog as Flink
SQL configures it; this session reads them through the catalog ``lake``. Neither holds an S3 key:
each table's FileIO gets them from the catalog. The rows each table must hold come from its spec
(``eqdelete.tools.flink.expected_rows``), never from Iceberg's reader. Without the Flink virtualenv
these tests fail, naming scripts/setup.sh.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lakehouse.conftest import CATALOG
from fixtures import sorted_rows
from pyiceberg.catalog import load_catalog
from pyspark.sql import SparkSession

import eqdelete
from eqdelete.tools import flink as fw
from eqdelete.tools.lakehouse import Lakehouse

NAMESPACE = "flink"
TABLES = {t["name"]: t for t in (
    fw.upsert_spec("upsert_part", partitioned=True),
    fw.upsert_spec("upsert_unpart", partitioned=False),
    fw.cdc_spec("cdc"),
    fw.streaming_upsert_spec("streaming", rows=3000, keys=500, checkpoints=4, min_commits=4),
    fw.upsert_spec("upsert_part_v3", partitioned=True, format_version=3),
    fw.cdc_spec("cdc_v3", format_version=3),
    fw.streaming_upsert_spec("streaming_part_v3", rows=2000, keys=300, checkpoints=4, partitions=3, format_version=3,
                             min_commits=4),
)}
CDC = [name for name, t in TABLES.items() if t["scenario"] == "cdc"]
#: Tables test_resolve already resolved: the read tests need their equality deletes.
RESOLVED: set[str] = set()


@dataclass
class Written:
    result: dict[str, Any] | None
    error: str | None

    def table(self, name: str) -> dict[str, Any]:
        if self.error is not None:
            pytest.fail(self.error, pytrace=False)
        return self.result["tables"][name]


@pytest.fixture(scope="module")
def flink(lake: str, lakehouse: Lakehouse, tmp_path_factory: pytest.TempPathFactory) -> Written:
    """Every table of TABLES written by Flink (one writer process) through the REST catalog.

    A writer that cannot run is each test's failure, not a skip and not an error of set-up."""
    workdir = tmp_path_factory.mktemp("flink")
    spec = {"catalog": lakehouse.flink_properties(), "namespace": NAMESPACE, "tables": list(TABLES.values())}
    try:
        return Written(fw.write(spec, workdir), None)
    except fw.FlinkWriterError as e:
        return Written(None, str(e))


def qualified(name: str) -> str:
    return f"{CATALOG}.{NAMESPACE}.{name}"


def delete_files(spark: SparkSession, name: str, content: int) -> list:
    return spark.sql(f"SELECT * FROM {qualified(name)}.delete_files WHERE content = {content}").collect()


def field_ids(spark: SparkSession, name: str) -> dict[str, int]:
    jvm, session = spark._jvm, spark._jsparkSession  # noqa: SLF001
    jtable = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(session, qualified(name))
    return {f.name(): f.fieldId() for f in jtable.schema().columns()}


def equality_delete_rows(table: dict[str, Any]) -> list[tuple]:
    """The rows Flink's sink writes into a changelog's equality delete files: each -U/-D of a key
    not inserted earlier in the same commit, the whole row as given (a key inserted in the same
    commit gets a position delete instead)."""
    names = [c for c, _ in fw.columns_of(table)]
    key = [names.index(c) for c in fw.key_of(table)]
    rows = []
    for commit in table["commits"]:
        inserted: set[tuple] = set()
        for kind, row in commit:
            k = tuple(row[i] for i in key)
            if kind in ("+I", "+U"):
                inserted.add(k)
            elif k in inserted:
                inserted.discard(k)
            else:
                rows.append(tuple(float(v) if t == "DOUBLE" and v is not None else v
                                  for v, (_, t) in zip(row, fw.columns_of(table))))
    return sorted_rows(rows)


def test_the_writer_refuses_a_bad_spec_in_one_line(tmp_path: Path) -> None:
    # Checked before Flink starts: a changelog Flink's sink would not turn into the modelled rows.
    if not fw.PYTHON.exists():
        pytest.fail(f"no Flink virtualenv at {fw.VENV}: run scripts/setup.sh", pytrace=False)
    bad = fw.cdc_spec("bad")
    bad["commits"][1] = [["-D", [99, "x", 1, 1.0, True]]]
    (tmp_path / "spec.json").write_text(json.dumps({"warehouse": str(tmp_path / "wh"), "tables": [bad]}))
    done = subprocess.run([str(fw.PYTHON), fw.__file__, str(tmp_path / "spec.json")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == ["eqdelete.flink: bad commit 1: -D of (99,), which is not live"]


def test_a_missing_flink_virtualenv_fails_naming_the_set_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fw, "PYTHON", tmp_path / "no-venv" / "bin" / "python")
    with pytest.raises(fw.FlinkWriterError, match="run scripts/setup.sh"):
        fw.write({"warehouse": str(tmp_path / "wh"), "tables": []}, tmp_path)


@pytest.mark.parametrize("name", TABLES)
def test_flink_wrote_equality_deletes(spark: SparkSession, flink: Written, name: str) -> None:
    spec, written = TABLES[name], flink.table(name)
    assert written["format_version"] == spec["format_version"]
    snapshots = [s["snapshot_id"] for s in written["snapshots"]]
    assert [r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {qualified(name)}.snapshots "
                                             "ORDER BY committed_at").collect()] == snapshots
    assert {s["summary"]["engine-name"] for s in written["snapshots"]} == {"flink"}
    # On the object store, through the REST catalog: metadata, data and delete files alike.
    assert written["location"].startswith("s3://lake/warehouse/"), written["location"]
    files = spark.sql(f"SELECT file_path FROM {qualified(name)}.all_files").collect()
    assert files and all(f.file_path.startswith(written["location"] + "/") for f in files)
    if spec["scenario"] == "streaming_upsert":
        # A commit per checkpoint; the writer reruns a table that made fewer than min_commits.
        assert len(snapshots) >= spec.get("min_commits", 2), written["snapshots"]
    else:
        assert len(snapshots) == len(spec["commits"])     # a commit per job
    ids = field_ids(spark, name)
    key_ids = sorted(ids[c] for c in fw.key_of(spec))
    equality = delete_files(spark, name, 2)
    assert equality and all(sorted(f.equality_ids) == key_ids for f in equality), equality
    if spec["scenario"] != "streaming_upsert":
        # Keys changed twice in one commit: position deletes (v2) or deletion vectors (v3) beside.
        positions = delete_files(spark, name, 1)
        assert positions
        assert {f.file_format for f in positions} == ({"PUFFIN"} if spec["format_version"] == 3 else {"PARQUET"})


@pytest.mark.parametrize("name", CDC)
def test_cdc_equality_deletes_hold_the_whole_row(spark: SparkSession, flink: Written, lakehouse: Lakehouse,
                                                name: str) -> None:
    import pyarrow.parquet as pq

    spec = TABLES[name]
    flink.table(name)
    files = delete_files(spark, name, 2)
    columns = [c for c, _ in fw.columns_of(spec)]
    # The files themselves, read from the store as plain Parquet: every column, while equality_ids is the key.
    store = lakehouse.s3_filesystem()
    deletes = [pq.read_table(lakehouse.object_key(f.file_path), filesystem=store) for f in files]
    assert all(d.column_names == columns for d in deletes)
    assert all(f.equality_ids == [field_ids(spark, name)["id"]] for f in files)
    rows = [tuple(r[c] for c in columns) for d in deletes for r in d.to_pylist()]
    assert sorted_rows(rows) == equality_delete_rows(spec)
    # One before-image holds only its key (NULL elsewhere) and deletes all the same.
    assert any(r[1:] == (None,) * (len(columns) - 1) for r in equality_delete_rows(spec))


@pytest.mark.parametrize("name", TABLES)
def test_rows_under_every_strategy(spark: SparkSession, flink: Written, name: str) -> None:
    spec = TABLES[name]
    flink.table(name)
    assert name not in RESOLVED, "test_resolve ran first: its table holds no equality deletes any more"
    expected = fw.expected_rows(spec)
    columns = [c for c, _ in fw.columns_of(spec)]
    key, last = fw.key_of(spec)[0], columns[-1]
    query = f"SELECT {last} FROM {qualified(name)} WHERE {key} % 2 = 0"  # a projection without the key
    expected_query = sorted_rows((r[-1],) for r in expected if r[columns.index(key)] % 2 == 0)
    for strategy in ("native", "filter", "join", "auto"):
        settings = [("spark.eqdelete.strategy", strategy), ("spark.eqdelete.auto.minDataRows", "0")]
        with eqdelete.use_conf(spark, settings):
            df = spark.table(qualified(name))
            assert sorted_rows(df.collect()) == expected, strategy
            assert sorted_rows(spark.sql(query).collect()) == expected_query, strategy
            assert spark.sql(f"SELECT count(*) FROM {qualified(name)}").first()[0] == len(expected), strategy
            decisions = eqdelete.decisions(df)
        if strategy != "native":
            assert len(decisions) == 1 and decisions[0].delete_files > 0, decisions
        if strategy in ("filter", "join"):
            assert decisions[0].strategy == strategy, decisions
            with eqdelete.use_strategy(spark, strategy):
                explained = spark.sql(f"EXPLAIN SELECT * FROM {qualified(name)}").first()[0]
            assert f"eqdelete {strategy}: {decisions[0].delete_files} equality delete file(s)" in explained, explained


@pytest.mark.parametrize("name", ["streaming", "streaming_part_v3"])
def test_changes_are_the_difference_of_consecutive_snapshots(spark: SparkSession, flink: Written, name: str) -> None:
    # Flink's checkpoints: upserts as equality deletes, a key changed twice in one checkpoint as a
    # position delete (v2) or a deletion vector (v3), through the object store and the REST catalog.
    from test_changes import check_changes, lineage

    flink.table(name)
    narrowed = check_changes(spark, qualified(name), "auto")
    assert len(lineage(spark, qualified(name))) >= 4
    # Flink's position deletes and vectors name files of their own checkpoint, so its upserts'
    # deleted rows are looked for among the rows of their keys only.
    assert narrowed, "no upsert snapshot was narrowed by its delete keys"


@pytest.mark.parametrize("name", TABLES)
def test_resolve_then_pyiceberg_reads_it(spark: SparkSession, flink: Written, lakehouse: Lakehouse, name: str) -> None:
    spec = TABLES[name]
    written = flink.table(name)
    table, expected = qualified(name), fw.expected_rows(spec)
    files = len(delete_files(spark, name, 2))
    # pyiceberg, through the same catalog and store, refuses a table with equality deletes ...
    catalog = load_catalog(CATALOG, **lakehouse.pyiceberg_properties())
    with pytest.raises(ValueError, match="equality delete"):
        catalog.load_table(f"{NAMESPACE}.{name}").scan().to_arrow()
    RESOLVED.add(name)
    result = eqdelete.resolve_equality_deletes(spark, table)
    assert result.committed and result.equality_delete_files_removed == files
    # Every row Flink wrote is live, deleted by position, or resolved now.
    totals = written["snapshots"][-1]["summary"]
    assert result.rows_resolved == int(totals["total-records"]) - int(totals["total-position-deletes"]) - len(expected)
    assert delete_files(spark, name, 2) == []
    # Flink's v3 sink puts a checkpoint's deletion vectors into one Puffin file: each DV merged
    # must be replaced, not one per file (Iceberg then refuses "multiple DVs" for a data file).
    with eqdelete.use_strategy(spark, "native"):
        assert sorted_rows(spark.table(table).collect()) == expected
    for strategy in ("filter", "join"):
        with eqdelete.use_strategy(spark, strategy):
            df = spark.table(table)
            assert sorted_rows(df.collect()) == expected
            assert not [d for d in eqdelete.decisions(df) if d.rewritten]
    assert not eqdelete.resolve_equality_deletes(spark, table).committed
    # ... and reads the rows after: the position deletes or deletion vectors written through the
    # table's FileIO, committed through the catalog.
    written_files = spark.sql(f"SELECT file_path FROM {table}.delete_files WHERE content = 1").collect()
    assert written_files and all(f.file_path.startswith(written["location"] + "/") for f in written_files)
    arrow = catalog.load_table(f"{NAMESPACE}.{name}").scan().to_arrow()
    columns = [c for c, _ in fw.columns_of(spec)]
    assert sorted_rows(tuple(r[c] for c in columns) for r in arrow.to_pylist()) == expected
