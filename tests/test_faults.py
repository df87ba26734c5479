"""Faults and bad input: each answered with one clear line, nothing lost, no wrong rows, and the
session (or the application) alive afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO
from fixtures import FIXTURES, _create, _insert, sorted_rows
from hypothesis import given, settings
from hypothesis import strategies as st
from processes import eqdelete_cli, python_job, spark_submit
from pyspark.sql import SparkSession

import eqdelete
from eqdelete import _conf, write_equality_deletes
from eqdelete.tools.cdc import CdcSpec, generate

# --- 1. Bad session settings -------------------------------------------------------------------

BAD_VALUES = {
    "spark.eqdelete.enabled": ("maybe", "true or false"),
    "spark.eqdelete.strategy": ("fast", "one of auto, filter, join, native"),
    "spark.eqdelete.auto.minDataRows": ("-3", "a whole number of at least 0"),
    "spark.eqdelete.auto.filterMaxDeleteRows": ("lots", "a whole number of at least 0"),
    "spark.eqdelete.join.broadcastMaxBytes": ("-5", "or -1"),
    "spark.eqdelete.filter.maxHeapFraction": ("1.5", "above 0 and at most 1"),
    "spark.eqdelete.filter.force": ("yes please", "true or false"),
    "spark.eqdelete.filter.batchedLookup": ("sometimes", "true or false"),
    "spark.eqdelete.filter.cacheMaxKeys": ("1.5", "a whole number of at least 0"),
    "spark.eqdelete.maintain.maxAttempts": ("0", "a whole number of at least 1"),
    "spark.eqdelete.maintain.retryWaitMillis": ("-1", "a whole number of at least 0"),
    "spark.eqdelete.maintain.compactPositionDeleteFiles": ("often", "a whole number of at least 0"),
    "spark.eqdelete.maintain.compactDataBytesPerHour": ("-7", "or -1"),
    "spark.eqdelete.maintain.compactDataDeadRatio": ("0", "above 0 and at most 1"),
    "spark.eqdelete.maintain.liveIndex": ("sometimes", "one of auto, always, never, true, false"),
    "spark.eqdelete.maintain.liveIndexStores": ("-2", "a whole number of at least 0"),
    "spark.eqdelete.changes.rowImages": ("kept", "true or false"),
    "spark.eqdelete.changes.rowImageStores": ("many", "a whole number of at least 0"),
    "spark.eqdelete.sink.keptRows": ("kept", "true or false"),
    "spark.eqdelete.state.location": ("state/here", "a directory with its scheme"),
    "spark.eqdelete.state.deltasPerSnapshot": ("0", "a whole number of at least 1"),
}


def test_every_key_has_a_bad_value_case() -> None:
    assert set(BAD_VALUES) == set(_conf.rules())


@pytest.mark.parametrize("key", sorted(BAD_VALUES))
def test_bad_builder_value_fails_before_a_session_starts(spark: SparkSession, key: str) -> None:
    value, allowed = BAD_VALUES[key]
    before = spark.conf.get(key)
    expected = f"eqdelete: invalid value '{value}' for {key}: must be"
    with pytest.raises(ValueError, match="^" + expected) as error:
        eqdelete.session("bad", conf={key: value})
    assert allowed in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(ValueError, match="^" + expected):
        eqdelete.configure(SparkSession.Builder().config(key, value))
    # The running session was not touched.
    assert spark.conf.get(key) == before


def test_misspelt_key_fails_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown key spark.eqdelete.stratgy: eqdelete's keys are spark.eqdelete.enabled"):
        eqdelete.configure(SparkSession.Builder().config("spark.eqdelete.stratgy", "join"))


@pytest.mark.parametrize("key", sorted(BAD_VALUES))
def test_set_rejects_the_same_values_and_keeps_the_old_one(spark: SparkSession, key: str) -> None:
    value, allowed = BAD_VALUES[key]
    before = spark.conf.get(key)
    with pytest.raises(Exception) as error:
        spark.sql(f"SET {key}={value}")
    assert key in str(error.value) and value in str(error.value)
    with pytest.raises(ValueError, match=allowed.replace("(", r"\(")):
        eqdelete.toggles.use_conf(spark, [(key, value)]).__enter__()
    assert spark.conf.get(key) == before


# Values people write, and near misses: the Python check and Spark's SET must agree on each.
SAMPLES = {
    "boolean": ["true", "FALSE", " true ", "1", "yes", "", "truee"],
    "choice": ["join", " JOIN ", "Filter", "fast", "", "auto,join"],
    "count": ["0", "12", "+7", " 3 ", "-1", "1.0", "1e3", "1_000", "", "9223372036854775807", "9223372036854775808"],
    "bytes": ["0", "-1", "-5", "256m", "256M", "1g", "10kb", " 2m", "1.5g", "2x", "", "-0", "-1k", "--1"],
    "fraction": ["0.25", "1", "1.0", "0", "0.0", "1.01", ".5", "5e-1", "-0.1", "NaN", "half", ""],
    "location": ["", " ", "/mnt/state", "s3://bucket/state", "file:/tmp/x", "hdfs://nn:8020/s", "state", "./state",
                 "C:", "1s3://x", " /abs "],
}


@pytest.mark.parametrize("key", sorted(BAD_VALUES))
def test_python_rules_agree_with_spark(spark: SparkSession, key: str) -> None:
    for value in SAMPLES[_conf.rules()[key]["kind"]]:
        _assert_agree(spark, key, value)


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(sorted(BAD_VALUES)), value=st.text(alphabet="0123456789-+.eEkmgbtrufalsFTRUEjoinativ ", max_size=6))
def test_python_rules_agree_with_spark_on_random_values(spark: SparkSession, key: str, value: str) -> None:
    _assert_agree(spark, key, value)


def _assert_agree(spark: SparkSession, key: str, value: str) -> None:
    before = spark.conf.get(key)
    try:
        spark.conf.set(key, value)
        accepted = True
    except Exception:  # noqa: BLE001 - any rejection by Spark
        accepted = False
    finally:
        spark.conf.set(key, before)
    assert (_conf.problem(key, value) is None) == accepted, f"{key}={value!r}: Spark {'accepts' if accepted else 'rejects'} it"


JOB_WITH_PLAIN_BUILDER = """
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
    print("STARTED")
    spark.sql("SELECT 1").collect()
"""


def test_bad_value_in_properties_file_fails_spark_submit_with_one_line(tmp_path: Path) -> None:
    properties = tmp_path / "spark-defaults.conf"
    properties.write_text((REPO / "conf" / "spark-defaults.conf").read_text() + "\nspark.eqdelete.strategy  fast\n")
    result = spark_submit(JOB_WITH_PLAIN_BUILDER, tmp_path, "--properties-file", str(properties), timeout=180)
    assert result.returncode != 0 and "STARTED" not in result.stdout
    # spark-submit passes the Python job's stderr on to its own stdout.
    assert ("eqdelete: invalid value 'fast' for spark.eqdelete.strategy: must be one of auto, filter, join, native"
            in result.stdout + result.stderr)


def test_bad_value_added_after_configure_fails_when_the_session_starts(tmp_path: Path) -> None:
    # Past Python's check (added after configure()), so the extension's own check answers.
    script = f"""
        import eqdelete
        from pyspark.sql import SparkSession
        builder = eqdelete.configure(SparkSession.builder.master("local[1]"), warehouse={str(tmp_path / "wh")!r})
        try:
            builder.config("spark.eqdelete.join.broadcastMaxBytes", "-5").getOrCreate()
            print("STARTED")
        except Exception as error:
            print("FAILED", error)
    """
    result = python_job(script, tmp_path, timeout=180)
    assert "STARTED" not in result.stdout, result.stdout
    assert ("eqdelete: invalid value '-5' for spark.eqdelete.join.broadcastMaxBytes: must be a size of zero or more bytes"
            in result.stdout), result.stdout[-3000:]


# --- 2. Memory bounded by design ---------------------------------------------------------------

def _fixture_with(spark: SparkSession, table_name: str, name: str = "upserts_and_reinserts"):
    return FIXTURES[name](spark, table_name)


def test_filter_index_over_the_heap_share_takes_the_join(spark: SparkSession, table_name: str) -> None:
    fixture = _fixture_with(spark, table_name)
    tiny = "0.0000000001"  # no index fits this share of any heap
    with eqdelete.toggles.use_conf(spark, [("spark.eqdelete.strategy", "filter"), ("spark.eqdelete.filter.maxHeapFraction", tiny)]):
        df = spark.table(table_name)
        (decision,) = eqdelete.decisions(df)
        assert decision.strategy == "join"
        assert "spark.eqdelete.strategy=filter, but the filter's index of 3 delete rows needs" in decision.reason
        assert "spark.eqdelete.filter.force=true overrides" in decision.reason
        assert sorted_rows(df.collect()) == sorted_rows(fixture.expected)
        with eqdelete.toggles.use_conf(spark, [("spark.eqdelete.filter.force", "true")]):
            df = spark.table(table_name)
            assert [d.strategy for d in eqdelete.decisions(df)] == ["filter"]
            assert sorted_rows(df.collect()) == sorted_rows(fixture.expected)
    with eqdelete.toggles.use_conf(spark, [("spark.eqdelete.auto.minDataRows", "0"), ("spark.eqdelete.filter.maxHeapFraction", tiny)]):
        (decision,) = eqdelete.decisions(spark.table(table_name))
        assert decision.strategy == "join" and "auto: the filter's index of 3 delete rows needs" in decision.reason


MILLIONS_JOB = """
    import sys
    import eqdelete
    deletes, warehouse = int(sys.argv[1]), sys.argv[2]
    spark = eqdelete.session("eqdelete-1g", master="local[2]", warehouse=warehouse, conf={
        "spark.driver.memory": "1g", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4", "spark.eqdelete.filter.maxHeapFraction": "0.1"})
    spark.sparkContext.setLogLevel("ERROR")
    table = "local.mem.big"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.mem")
    spark.sql(f"CREATE TABLE {table} (k BIGINT, v INT) USING iceberg TBLPROPERTIES ('format-version'='2')")
    # Every other key of 2N rows deleted: N live rows. Delete keys 200 apart, too sparse for a key
    # bitmap (at most 64 bits a key): the index is the table this test sizes the driver against.
    spark.range(0, 2 * deletes, numPartitions=2).selectExpr("id * 100 AS k", "CAST(id % 7 AS INT) AS v").writeTo(table).append()
    eqdelete.write_equality_deletes(spark, table, ["k"], spark.range(0, 2 * deletes, 2).selectExpr("id * 100 AS k"),
                                    files_per_partition=4)
    for strategy, force in (("filter", "false"), ("join", "false"), ("auto", "false"), ("filter", "true")):
        settings = [("spark.eqdelete.strategy", strategy), ("spark.eqdelete.auto.minDataRows", "0"),
                    ("spark.eqdelete.filter.force", force)]
        name = strategy + ("+force" if force == "true" else "")
        with eqdelete.toggles.use_conf(spark, settings):
            try:
                rows = spark.table(table).count()
                (decision,) = eqdelete.last_decisions(spark)
                print("RESULT", name, rows == deletes, decision.strategy, "|", decision.reason, flush=True)
            except Exception as error:
                print("FAILED", name, str(error).splitlines()[0], flush=True)
        print("ALIVE", spark.sql("SELECT 41 + 1").first()[0], flush=True)
"""


def test_millions_of_delete_rows_on_a_1g_driver(tmp_path: Path) -> None:
    result = python_job(MILLIONS_JOB, tmp_path, "3000000", str(tmp_path / "wh"), timeout=600)
    lines = [line for line in result.stdout.splitlines() if line.startswith(("RESULT", "FAILED", "ALIVE"))]
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    results = {line.split()[1]: line for line in lines if line.startswith(("RESULT", "FAILED"))}
    assert set(results) == {"filter", "join", "auto", "filter+force"}, lines
    # 3M long keys: an index of ~150 MB with its broadcast copy, over a tenth of 1 GB.
    assert "RESULT filter True join | spark.eqdelete.strategy=filter, but the filter's index" in results["filter"]
    assert results["join"].startswith("RESULT join True join |"), lines
    assert results["auto"].startswith("RESULT auto True join |"), lines
    # Forced past the estimate: right rows, or (if the driver runs out of memory) a clear error.
    forced = results["filter+force"]
    assert forced.startswith("RESULT filter+force True filter |") or "the driver ran out of memory" in forced, lines
    assert lines.count("ALIVE 42") == 4, lines


# --- 3. Faults say what they are ---------------------------------------------------------------

def _eq_delete_paths(spark: SparkSession, table: str) -> list[str]:
    return [r[0] for r in spark.sql(f"SELECT file_path FROM {table}.delete_files WHERE content = 2").collect()]


def _damage(path: Path, how: str) -> None:
    if how == "missing":
        path.unlink()
    elif how == "corrupt":
        path.write_bytes(b"not a parquet file" * 10)
    else:  # same size, same first and last bytes gone: what a rewrite in place could leave
        path.write_bytes(b"\0" * path.stat().st_size)


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
@pytest.mark.parametrize("strategy", ["filter", "join", "auto", "native"])
def test_unreadable_delete_file_fails_with_eqdelete_error(spark: SparkSession, table_name: str, damage: str, strategy: str) -> None:
    FIXTURES["single_key"](spark, table_name)
    path = Path(_eq_delete_paths(spark, table_name)[0].removeprefix("file:"))
    _damage(path, damage)
    settings_ = [("spark.eqdelete.strategy", strategy), ("spark.eqdelete.auto.minDataRows", "0")]
    with eqdelete.toggles.use_conf(spark, settings_):
        with pytest.raises(Exception) as error:
            spark.table(table_name).collect()
    assert path.name in str(error.value)
    if strategy != "native":
        # eqdelete's own error, never a native fallback reading the file a second time.
        assert "eqdelete: cannot read equality delete file" in str(error.value)


@pytest.mark.parametrize("damage", ["missing", "corrupt", "same-size"])
@pytest.mark.parametrize("strategy", ["filter", "join"])
def test_damage_after_a_cached_read_still_fails(spark: SparkSession, table_name: str, damage: str, strategy: str) -> None:
    # Read once intact: the filter strategy keeps its index, and must still notice the damage.
    # (Not native: Iceberg's executor cache keeps delete sets too, and does not look again.)
    FIXTURES["single_key"](spark, table_name)
    path = Path(_eq_delete_paths(spark, table_name)[0].removeprefix("file:"))
    with eqdelete.use_strategy(spark, strategy):
        spark.table(table_name).collect()
        _damage(path, damage)
        with pytest.raises(Exception) as error:
            spark.table(table_name).collect()
    assert path.name in str(error.value) and "eqdelete: cannot read equality delete file" in str(error.value)


# --- 4. BINARY keys ----------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["native", "filter", "join", "auto"])
def test_binary_keys_with_empty_and_null_values(spark: SparkSession, table_name: str, strategy: str) -> None:
    _create(spark, table_name, "k BINARY, k2 BINARY, v INT")
    rows = [(b"a", b"x", 1), (b"", b"x", 2), (None, b"x", 3), (b"zz", None, 4), (b"\x00\xff", b"", 5), (b"a", b"y", 6)]
    _insert(spark, table_name, rows)
    write_equality_deletes(spark, table_name, ["k"], [(b"",), (None,), (b"\x00\xff",)])
    write_equality_deletes(spark, table_name, ["k", "k2"], [(b"a", b"y"), (b"zz", None), (b"", b"y")])
    expected = sorted(r[2] for r in rows if r[0] not in (b"", None, b"\x00\xff") and r[:2] not in ((b"a", b"y"), (b"zz", None)))
    assert expected == [1]
    with eqdelete.toggles.use_conf(spark, [("spark.eqdelete.strategy", strategy), ("spark.eqdelete.auto.minDataRows", "0")]):
        df = spark.table(table_name)
        assert sorted(r.v for r in df.collect()) == expected
        used = [d.strategy for d in eqdelete.decisions(df)]
    assert used == ([] if strategy == "native" else ["filter" if strategy == "auto" else strategy])


# --- 5. One clear line -------------------------------------------------------------------------

def test_cli_reports_bad_sql_and_missing_tables_in_one_line(tmp_path: Path) -> None:
    for sql, fragment in [("SELEC oops", "PARSE_SYNTAX_ERROR"), ("SELECT * FROM local.nowhere.t", "TABLE_OR_VIEW_NOT_FOUND")]:
        result = eqdelete_cli(tmp_path, "compare", "--sql", sql, "--master", "local[1]", "--runs", "1",
                              "--warehouse", str(tmp_path / "wh"))
        assert result.returncode == 2, result.stderr[-2000:]
        assert "Traceback" not in result.stderr and f"eqdelete: [{fragment}]" in result.stderr, result.stderr[-2000:]
    result = eqdelete_cli(tmp_path, "--debug", "compare", "--sql", "SELEC oops", "--master", "local[1]",
                          "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 2 and "Traceback" in result.stderr


def test_scale_bench_names_the_points_when_at_picks_none(tmp_path: Path) -> None:
    result = eqdelete_cli(tmp_path, "bench", "--scale", "--quick", "--at", "1e9", "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert ("eqdelete: no scale point has a size in --at 1,000,000,000: choose from data_rows 20,000, data_rows 60,000, "
            "delete_rows 2,000, delete_rows 60,000") in result.stderr
    assert not (tmp_path / "out").exists()


def test_generate_checks_the_catalog_before_creating_anything(spark: SparkSession, tmp_path: Path) -> None:
    result = eqdelete_cli(tmp_path, "generate", "--table", "db.cdc2", "--rows", "10")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "eqdelete: invalid CDC table parameters: table 'db.cdc2' should be <catalog>.<namespace>.<table>, e.g. local.db.cdc" in result.stderr
    spec = CdcSpec(table="nocatalog.db.cdc2", rows=10, commits=1)
    with pytest.raises(ValueError, match="cannot create nocatalog.db.cdc2: catalog 'nocatalog' is not configured in this session "
                                         r"\(Iceberg catalogs configured: local\)"):
        generate(spark, spec)
    spec = CdcSpec(table="spark_catalog.db.cdc2", rows=10, commits=1)
    with pytest.raises(ValueError, match="catalog 'spark_catalog' is not configured"):
        generate(spark, spec)
    assert not (tmp_path / "spark-warehouse").exists() and not Path("spark-warehouse").exists()
    session_warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    assert not (session_warehouse / "db.db").exists()


def test_explain_names_every_declined_scan(spark: SparkSession, table_name: str) -> None:
    # A key column dropped after its deletes were written: Iceberg still applies them (reading the
    # column by id from the data files), which a Spark relation cannot, so eqdelete declines.
    _create(spark, table_name, "k BIGINT, j BIGINT, v STRING")
    _insert(spark, table_name, [(1, 10, "a"), (2, 20, "b")])
    write_equality_deletes(spark, table_name, ["j"], [(10,)])
    spark.sql(f"ALTER TABLE {table_name} DROP COLUMN j")
    for strategy in ("filter", "join", "auto"):
        with eqdelete.use_strategy(spark, strategy):
            plan = spark.sql(f"EXPLAIN SELECT * FROM {table_name}").first()[0]
            (decision,) = eqdelete.decisions(spark.table(table_name))
            assert sorted_rows(spark.table(table_name).collect()) == [(2, "b")]
        assert decision.strategy == "native" and "is not a column of the schema read" in decision.reason
        assert f"[eqdelete native: {decision.reason}]" in plan, plan


@pytest.mark.parametrize(
    "statement",
    [
        "MERGE INTO {t} t USING {s} s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *",
        "UPDATE {t} SET v = 'u' WHERE k IN (SELECT k FROM {s})",
        "DELETE FROM {t} WHERE k IN (SELECT k FROM {s})",
    ],
)
def test_decisions_are_recorded_for_dml_sources(spark: SparkSession, table_name: str, statement: str) -> None:
    target, source = f"{table_name}_target", f"{table_name}_source"
    FIXTURES["upserts_and_reinserts"](spark, target)
    FIXTURES["single_key"](spark, source)
    with eqdelete.use_strategy(spark, "join"):
        result = spark.sql(statement.format(t=target, s=source))
        assert {(d.table, d.strategy) for d in eqdelete.last_decisions(spark)} == {(source, "join")}
        result.collect()  # the command's result, shown or collected, keeps its decisions
        assert {(d.table, d.strategy) for d in eqdelete.last_decisions(spark)} == {(source, "join")}
