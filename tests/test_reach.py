"""Never a session taken down by a version or class path eqdelete was not built for: it stands
aside with one warning, or leaves the one scan it cannot handle native, and every query still
returns Iceberg's rows."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from conftest import REPO
from processes import python_job

import eqdelete
from eqdelete import _jars

JOB = """
    import os
    import eqdelete
    spark = eqdelete.session("reach", master="local[1]", warehouse="wh",
                             conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        print("VERSION", spark.sql("SELECT eqdelete_version()").first()[0])
    except Exception as error:
        print("NO VERSION FUNCTION", type(error).__name__)
    if os.environ.get("ICEBERG"):  # a plain Iceberg table, read as without eqdelete
        spark.sql("CREATE NAMESPACE IF NOT EXISTS local.db")
        spark.sql("CREATE TABLE local.db.p (k BIGINT) USING iceberg")
        spark.sql("INSERT INTO local.db.p VALUES (1), (2)")
        print("PLAIN", sorted(r.k for r in spark.table("local.db.p").collect()))
        if os.environ.get("RESOLVE"):  # resolving refuses, naming why; the session stays
            try:
                eqdelete.resolve_equality_deletes(spark, "local.db.p")
                print("RESOLVED")
            except Exception as error:
                print("RESOLVE REFUSED", str(error).splitlines()[0])
            for ask in (eqdelete.last_decisions, lambda s: eqdelete.decisions(s.table("local.db.p")),
                        lambda s: eqdelete.summarize(s, "local.db.p")):
                try:
                    print("ANSWERED", ask(spark))
                except eqdelete.ExtensionNotLoadedError as error:
                    print("NOT LOADED", str(error).splitlines()[0])
    if os.environ.get("WITH_TABLE"):
        spark.sql("CREATE TABLE local.db.t (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")
        spark.sql("INSERT INTO local.db.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        eqdelete.write_equality_deletes(spark, "local.db.t", ["k"], [(2,)])
        for strategy in ("join", "filter"):
            with eqdelete.use_strategy(spark, strategy):
                rows = sorted(r.v for r in spark.table("local.db.t").where("k > 0").collect())
                print("ROWS", strategy, rows, [(d.strategy, d.reason) for d in eqdelete.last_decisions(spark)])
    print("ALIVE", spark.sql("SELECT 41 + 1").first()[0], not spark.sparkContext._jsc.sc().isStopped())
"""


def _run(tmp_path: Path, jars: list[Path], python: Path | None = None, with_table: bool = True, iceberg: bool = True,
         resolve: bool = False):
    env = {"EQDELETE_JARS": os.pathsep.join(str(j) for j in jars), "WITH_TABLE": "1" if with_table else "",
           "ICEBERG": "1" if iceberg else "", "RESOLVE": "1" if resolve else ""}
    return python_job(JOB, tmp_path, timeout=300, python=python, env=env)


def _deps(line: _jars.SparkLine, iceberg: str) -> list[Path]:
    deps = REPO / "build" / "deps"
    return [deps / f"iceberg-spark-runtime-{line.spark}_{line.scala}-{iceberg}.jar", *deps.glob("sqlite-jdbc-*.jar")]


def test_no_iceberg_runtime_stands_aside_with_one_warning(tmp_path: Path) -> None:
    line = _jars.supported_line()
    result = _run(tmp_path, [_jars.extension_jar(line)], with_table=False, iceberg=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "NO VERSION FUNCTION" in result.stdout and "ALIVE 42 True" in result.stdout
    warnings = [line_ for line_ in result.stderr.splitlines() if "stands aside" in line_]
    assert len(warnings) == 1, warnings
    assert f"eqdelete {eqdelete.__version__} stands aside: no Iceberg runtime on the classpath" in warnings[0]
    assert f"this eqdelete jar supports Spark {line.spark}.x with Iceberg 1.11.x or 1.12.x" in warnings[0]


def test_a_jar_built_for_another_spark_line_stands_aside(tmp_path: Path) -> None:
    # The Spark 4.1 jar on Spark 4.0, beside 4.0's own Iceberg runtime.
    other = _jars.matrix()["4.0"]
    python = REPO / "build" / "venvs" / "spark-4.0" / "bin" / "python"
    jar = _jars.extension_jar(_jars.matrix()["4.1"])
    result = _run(tmp_path, [jar, *_deps(other, other.iceberg[0])], python=python, with_table=False, resolve=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "found Spark 4.0." in result.stderr and "but this eqdelete jar supports Spark 4.1.x" in result.stderr
    assert "NO VERSION FUNCTION" in result.stdout and "ALIVE 42 True" in result.stdout
    assert "PLAIN [1, 2]" in result.stdout
    assert "RESOLVE REFUSED" in result.stdout and "cannot resolve equality deletes: found Spark 4.0." in result.stdout, result.stdout
    refused = [line_ for line_ in result.stdout.splitlines() if line_.startswith("NOT LOADED")]
    assert len(refused) == 3 and all("eqdelete is not loaded in this session: found Spark 4.0." in r for r in refused), result.stdout


def test_a_class_missing_from_the_jar_leaves_the_scan_native(tmp_path: Path) -> None:
    # A class the join strategy needs is missing: a LinkageError inside the optimizer rule.
    line = _jars.supported_line()
    broken = tmp_path / "eqdelete-broken.jar"
    with zipfile.ZipFile(_jars.extension_jar(line)) as source, zipfile.ZipFile(broken, "w") as target:
        for item in source.infolist():
            if not item.filename.startswith("eqdelete/join/ApplyDeletesWithJoin"):
                target.writestr(item, source.read(item))
    result = _run(tmp_path, [broken, *_deps(line, line.default_iceberg)])
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line_.split()[1]: line_ for line_ in result.stdout.splitlines() if line_.startswith("ROWS")}
    assert rows["join"].startswith("ROWS join ['a', 'c'] [('native', 'planning failed: java.lang.NoClassDefFoundError: "
                                   "eqdelete/join/ApplyDeletesWithJoin"), rows
    assert rows["filter"].startswith("ROWS filter ['a', 'c'] [('filter',"), rows
    assert "ALIVE 42 True" in result.stdout


@pytest.mark.parametrize("line", sorted(_jars.matrix()))
def test_every_line_has_its_jar_and_runtimes(line: str) -> None:
    row = _jars.matrix()[line]
    assert _jars.extension_jar(row).is_file()
    for iceberg in row.iceberg:
        assert all(p.is_file() for p in _deps(row, iceberg))
