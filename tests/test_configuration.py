"""Session set-up, the one-switch properties file, and validation of spark.eqdelete.* keys."""

from __future__ import annotations

import re
from pathlib import Path

import pyspark
import pytest
from conftest import REPO
from processes import spark_submit
from pyspark.sql import SparkSession

import eqdelete
from eqdelete import _jars, _jvm

SPARK_MAJOR = int(pyspark.__version__.split(".")[0])
from eqdelete.tools.cli import DOCS_HEADER
from eqdelete.config import EXTENSION, ICEBERG_EXTENSION


def test_configure_adds_jars_extensions_and_default_catalog(tmp_path: Path) -> None:
    builder = SparkSession.Builder().config("spark.jars", "/opt/mine.jar").config("spark.sql.extensions", "my.Ext")
    assert eqdelete.configure(builder, warehouse=tmp_path) is builder
    options = builder._options
    assert options["spark.jars"].split(",")[0] == "/opt/mine.jar"
    line = _jars.supported_line()
    jars = options["spark.jars"].split(",")
    assert any(j.endswith(line.extension_jar_name(eqdelete.__version__)) for j in jars)
    # In a checkout, Iceberg's runtime (the newest supported release) and SQLite's driver come from build/deps.
    assert any(j.endswith(f"iceberg-spark-runtime-{line.spark}_{line.scala}-{line.default_iceberg}.jar") for j in jars)
    assert any("sqlite-jdbc" in j for j in jars) and "spark.jars.packages" not in options
    assert options["spark.sql.extensions"] == f"my.Ext,{ICEBERG_EXTENSION},{EXTENSION}"
    assert options["spark.sql.catalog.local"] == "org.apache.iceberg.spark.SparkCatalog"
    assert options["spark.sql.catalog.local.uri"] == f"jdbc:sqlite:{tmp_path.resolve() / 'catalog.db'}"


def test_configure_is_idempotent(tmp_path: Path) -> None:
    builder = eqdelete.configure(eqdelete.configure(SparkSession.Builder(), warehouse=tmp_path), warehouse=tmp_path)
    assert builder._options["spark.sql.extensions"].count(EXTENSION) == 1
    assert builder._options["spark.jars"].count("eqdelete-spark-") == 1


def test_iceberg_release_is_chosen_or_left_to_the_user(tmp_path: Path) -> None:
    line = _jars.supported_line()
    oldest = line.iceberg[0]
    builder = eqdelete.configure(SparkSession.Builder(), warehouse=tmp_path, iceberg_version=oldest)
    assert f"iceberg-spark-runtime-{line.spark}_{line.scala}-{oldest}.jar" in builder._options["spark.jars"]
    with pytest.raises(ValueError, match=f"Iceberg 0.9.0 is not supported with Spark {line.spark}: choose one of"):
        eqdelete.configure(SparkSession.Builder(), iceberg_version="0.9.0")
    # A runtime the user already put on the session is left alone, as coordinates or as a jar.
    builder = eqdelete.configure(
        SparkSession.Builder().config("spark.jars.packages", "org.apache.iceberg:iceberg-spark-runtime-x:1"), warehouse=tmp_path
    )
    assert "iceberg-spark-runtime" not in builder._options["spark.jars"]
    assert builder._options["spark.jars.packages"] == "org.apache.iceberg:iceberg-spark-runtime-x:1"


def test_a_user_catalog_is_left_untouched(tmp_path: Path) -> None:
    builder = (
        SparkSession.Builder()
        .config("spark.sql.catalog.prod", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.prod.type", "rest")
        .config("spark.sql.catalog.prod.uri", "http://127.0.0.1:8181")
    )
    eqdelete.configure(builder, warehouse=tmp_path)
    catalogs = {k: v for k, v in builder._options.items() if k.startswith("spark.sql.catalog.")}
    # No default Iceberg catalog is added; on Spark 4.x, eqdelete's procedure catalog is.
    procedures = {"spark.sql.catalog.eqdelete": "eqdelete.sql.EqDeleteProcedureCatalog"} if SPARK_MAJOR >= 4 else {}
    assert catalogs == {
        "spark.sql.catalog.prod": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.prod.type": "rest",
        "spark.sql.catalog.prod.uri": "http://127.0.0.1:8181",
        **procedures,
    }


def test_the_procedure_catalog_name_is_left_to_a_user_who_takes_it(tmp_path: Path) -> None:
    builder = SparkSession.Builder().config("spark.sql.catalog.eqdelete", "org.apache.iceberg.spark.SparkCatalog")
    eqdelete.configure(builder, warehouse=tmp_path)
    assert builder._options["spark.sql.catalog.eqdelete"] == "org.apache.iceberg.spark.SparkCatalog"


def test_configure_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match="SparkSession.Builder"):
        eqdelete.configure("not a builder")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid value 'fast' for spark.eqdelete.strategy: must be one of auto, filter, join, native"):
        eqdelete.configure(SparkSession.Builder(), strategy="fast")


def test_python_and_jvm_agree_on_strategies(spark: SparkSession) -> None:
    assert tuple(_jvm.strategy_names(spark)) == eqdelete.STRATEGIES


def test_extension_is_loaded(spark: SparkSession) -> None:
    described = spark.sql("SELECT eqdelete_version()").first()[0]
    expected = rf"{re.escape(eqdelete.__version__)} \(Spark {re.escape(pyspark.__version__)}, Iceberg 1\.1[12]\.\d+\)"
    assert re.fullmatch(expected, described), described
    keys = {r["key"] for r in spark.sql("SET -v").collect()}
    assert {"spark.eqdelete.enabled", "spark.eqdelete.strategy"} <= keys


@pytest.mark.parametrize(
    "key, value, fragments",
    [
        ("spark.eqdelete.strategy", "fastest", ["spark.eqdelete.strategy", "fastest", "auto", "filter", "join", "native"]),
        ("spark.eqdelete.enabled", "maybe", ["spark.eqdelete.enabled", "maybe", "boolean"]),
    ],
)
def test_bad_values_fail_naming_key_value_and_choices(spark: SparkSession, key: str, value: str, fragments: list[str]) -> None:
    before = spark.conf.get(key)
    with pytest.raises(Exception) as error:
        spark.conf.set(key, value)
    for fragment in fragments:
        assert fragment in str(error.value)
    assert spark.conf.get(key) == before, "the previous value is kept"


def test_strategy_values_are_normalised(spark: SparkSession) -> None:
    with eqdelete.use_strategy(spark, " JOIN "):
        assert eqdelete.get_strategy(spark) == "join"
    assert eqdelete.get_strategy(spark) == "auto"


def test_use_strategy_restores_the_previous_value(spark: SparkSession) -> None:
    eqdelete.set_strategy(spark, "filter")
    try:
        with eqdelete.use_strategy(spark, "native"):
            assert eqdelete.get_strategy(spark) == "native"
        assert eqdelete.get_strategy(spark) == "filter"
    finally:
        spark.conf.unset("spark.eqdelete.strategy")


def test_config_reference_is_current(spark: SparkSession) -> None:
    committed = (REPO / "docs" / "configuration.md").read_text()
    generated = _jvm.conf_reference(spark)
    assert committed == DOCS_HEADER + generated, "docs/configuration.md is stale: run python -m eqdelete docs --write"
    rules = (REPO / "python" / "eqdelete" / "conf_rules.json").read_text()
    assert rules == _jvm.conf_rules_json(spark), "conf_rules.json is stale: run python -m eqdelete docs --write"


def test_spark_defaults_conf_turns_the_extension_on(tmp_path: Path) -> None:
    script = """
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.getOrCreate()
        print("EXTENSIONS", spark.conf.get("spark.sql.extensions"))
        print("VERSION", spark.sql("SELECT eqdelete_version()").first()[0])
        print("STRATEGY", spark.conf.get("spark.eqdelete.strategy"))
    """
    result = spark_submit(script, tmp_path, "--properties-file", str(REPO / "conf" / "spark-defaults.conf"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"VERSION {eqdelete.__version__} (Spark {pyspark.__version__}, Iceberg " in result.stdout
    assert "STRATEGY auto" in result.stdout
    assert "eqdelete.EqualityDeleteExtensions" in result.stdout


def test_without_the_switch_the_extension_is_absent(tmp_path: Path) -> None:
    script = """
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.getOrCreate()
        spark.sql("SELECT eqdelete_version()").collect()
    """
    result = spark_submit(script, tmp_path)
    assert result.returncode != 0
    output = result.stdout + result.stderr  # spark-submit passes the job's stderr to its stdout
    assert "UNRESOLVED_ROUTINE" in output and "eqdelete_version" in output
