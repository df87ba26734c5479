"""One real Spark session (local, Iceberg JDBC catalog on SQLite) for the whole test run."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import eqdelete
from eqdelete import _jars
from eqdelete.tools import lakehouse

REPO = Path(__file__).resolve().parents[1]
CATALOG = "local"
#: The Iceberg release the tests run with (scripts/test.sh --pair sets it); None: the default.
ICEBERG_VERSION = os.environ.get("EQDELETE_TEST_ICEBERG") or None


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark(warehouse: Path) -> SparkSession:
    # Iceberg's AWS bundle (S3FileIO's SDK) for the lakehouse tier, where setup.sh fetched it for this release.
    line = _jars.supported_line()
    aws = lakehouse.spark_jars(ICEBERG_VERSION or line.default_iceberg) if line is not None else []
    session = eqdelete.session(
        "eqdelete-tests",
        master="local[2]",
        warehouse=warehouse,
        conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.driver.memory": os.environ.get("EQDELETE_TEST_DRIVER_MEMORY", "4g"),
            "spark.sql.session.timeZone": "UTC",
            # Spark's built-in catalog (behind spark_catalog) keeps its databases here, not in ./spark-warehouse.
            "spark.sql.warehouse.dir": (warehouse / "spark-warehouse").as_uri(),
            **({"spark.jars": ",".join(aws)} if aws else {}),
        },
        iceberg_version=ICEBERG_VERSION,
    )
    session.sparkContext.setLogLevel("ERROR")
    _child_jvms_compile_quickly()
    yield session
    session.stop()


def _child_jvms_compile_quickly() -> None:
    """Spark JVMs the tests start in processes of their own (the command line, spark-submit, a
    service) from here on compile with C1 only: they live seconds to minutes on small tables,
    where C2's compiles cost two busy cores more than they return (a command line's run 28 s to
    22 s). This session's JVM, started above, keeps both tiers: its suites run for minutes."""
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "TieredStopAtLevel" not in opts:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{opts} -XX:TieredStopAtLevel=1".strip()


_names = itertools.count()


@pytest.fixture
def table_name(spark: SparkSession) -> str:
    """A fresh, unused table name in the test catalog."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.t")
    return f"{CATALOG}.t.tbl_{os.getpid()}_{next(_names)}"


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001
    from test_differential import CASES

    if CASES["run"]:
        terminalreporter.write_line(f"eqdelete differential cases checked against native: {CASES['run']}")


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:  # noqa: ANN001
    # The Connect tier (tests/connect) runs in a process of its own, when named: pyspark puts a
    # process that opened a Connect session in Connect mode, which classic sessions cannot share.
    if collection_path == Path(__file__).parent / "connect":
        return not any(str(Path(a).resolve()).startswith(str(collection_path)) for a in config.args)
    return None
