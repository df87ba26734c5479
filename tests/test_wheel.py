"""eqdelete from a built wheel, installed with pyspark into a fresh virtualenv outside the
checkout: the wheel carries the extension jar of every Spark line, and Iceberg's runtime and
SQLite's driver come from Maven coordinates (spark.jars.packages), as for any pip user."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

import eqdelete
from eqdelete import _jars

JOB = """
    import sys
    import eqdelete
    from pyspark.sql import SparkSession

    assert "site-packages" in eqdelete.__file__, eqdelete.__file__
    spark = eqdelete.session("wheel", master="local[1]", warehouse="wh", conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    print("JARS", spark.sparkContext.getConf().get("spark.jars"))
    print("PACKAGES", spark.sparkContext.getConf().get("spark.jars.packages"))
    print("VERSION", spark.sql("SELECT eqdelete_version()").first()[0])
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.db")
    spark.sql("CREATE TABLE local.db.t (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql("INSERT INTO local.db.t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (NULL, 'n')")
    eqdelete.write_equality_deletes(spark, "local.db.t", ["k"], [(2,), (None,)])
    for strategy in ("filter", "join", "native"):
        with eqdelete.use_strategy(spark, strategy):
            rows = sorted(r.v for r in spark.table("local.db.t").collect())
            used = [d.strategy for d in eqdelete.last_decisions(spark)]
        print("ROWS", strategy, rows, used)
"""


#: What scripts/setup.sh keeps outside the checkout: uv, and the wheels it built of pyspark.
CACHE = Path(os.environ.get("EQDELETE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "eqdelete")


def install(python: Path, requirements: list[str]) -> None:
    """Installs into ``python``'s virtualenv as pip would: with the uv set-up installed (CI time: it
    links pyspark's files from its cache, where pip unpacked 300-400 MB for each, ~40 s) and the
    pyspark wheels set-up built (pyspark is published as sources only); with pip where there is no uv."""
    uv = sorted(CACHE.glob("tools/uv-*/bin/uv"))
    if uv:
        subprocess.run([str(uv[-1]), "pip", "install", "--quiet", "--python", str(python),
                        "--find-links", str(CACHE / "wheels"), *requirements], check=True, timeout=900)
    else:  # --no-compile: byte-compiling pyspark's thousands of modules is most of pip's time, and no check needs it.
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-compile", *requirements], check=True, timeout=900)


LINES = sorted(_jars.matrix(), key=lambda line: tuple(int(n) for n in line.split(".")))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(REPO)],
                   check=True, timeout=600)
    (built,) = out.glob("eqdelete-*.whl")
    return built


def test_wheel_carries_the_jar_of_every_spark_line(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for line in _jars.matrix().values():
        assert f"eqdelete/jars/{line.extension_jar_name(eqdelete.__version__)}" in names
    assert {"eqdelete/matrix.txt", "eqdelete/conf_rules.json"} <= names


# The oldest and the newest line (a Scala 2.12 and a 2.13 jar); the jar of every line is checked
# above, and the choice of it is the same code for each (CI time).
@pytest.mark.parametrize("line", [LINES[0], LINES[-1]])
def test_wheel_installed_outside_the_checkout(wheel: Path, tmp_path: Path, line: str) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install(python, [str(wheel), f"pyspark=={line}.*"])
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "SPARK_", "EQDELETE_"))}
    result = subprocess.run([str(python), "job.py"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    out = dict(line_.split(" ", 1) for line_ in result.stdout.splitlines() if line_.startswith(("JARS", "PACKAGES", "VERSION")))
    row = _jars.matrix()[line]
    assert "/site-packages/eqdelete/jars/" + row.extension_jar_name(eqdelete.__version__) in out["JARS"]
    assert str(REPO) not in out["JARS"]
    assert row.iceberg_runtime(row.default_iceberg) in out["PACKAGES"] and _jars.SQLITE_JDBC in out["PACKAGES"]
    assert out["VERSION"].startswith(f"{eqdelete.__version__} (Spark {line}.") and f"Iceberg {row.default_iceberg})" in out["VERSION"]
    rows = [line_ for line_ in result.stdout.splitlines() if line_.startswith("ROWS")]
    assert rows == [
        "ROWS filter ['a', 'c'] ['filter']",
        "ROWS join ['a', 'c'] ['join']",
        "ROWS native ['a', 'c'] []",
    ], result.stdout[-2000:]
