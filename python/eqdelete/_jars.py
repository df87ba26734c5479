"""Which jars a session needs: eqdelete's extension for the installed Spark line, Iceberg's Spark
runtime and SQLite's JDBC driver, and where each comes from.

The extension jar comes with the package (``eqdelete/jars/`` in a wheel) or, in a checkout,
from ``build/jars``. Iceberg's runtime and the SQLite driver come, in this order, from what the
user already put on the session (``spark.jars``, ``spark.jars.packages``, ``$SPARK_HOME/jars``:
left alone), from a checkout's ``build/deps``, or from Maven coordinates in
``spark.jars.packages``, which Spark resolves itself (as delta-spark does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import pyspark

#: Set to an ``os.pathsep``-separated list of jars to use instead of all of the above.
JARS_ENV = "EQDELETE_JARS"

SQLITE_JDBC = "org.xerial:sqlite-jdbc:3.50.3.0"

_PACKAGE = Path(__file__).resolve().parent
_CHECKOUT_BUILD = _PACKAGE.parents[1] / "build"


@dataclass(frozen=True)
class SparkLine:
    """One row of the support matrix (``matrix.txt``)."""

    spark: str  # "3.5"
    scala: str  # "2.12"
    iceberg: tuple[str, ...]  # tested releases, oldest first

    @property
    def default_iceberg(self) -> str:
        return self.iceberg[-1]

    def iceberg_runtime(self, version: str) -> str:
        """Maven coordinates of Iceberg's Spark runtime for this line."""
        return f"org.apache.iceberg:iceberg-spark-runtime-{self.spark}_{self.scala}:{version}"

    def extension_jar_name(self, version: str) -> str:
        return f"eqdelete-spark-{self.spark}_{self.scala}-{version}.jar"


@cache
def matrix() -> dict[str, SparkLine]:
    """Spark line -> its row of the support matrix."""
    rows = {}
    for line in resources.files("eqdelete").joinpath("matrix.txt").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            rows[fields[0]] = SparkLine(fields[0], fields[1], tuple(fields[2:]))
    return rows


def installed_spark_line() -> str:
    """The line of the installed pyspark: "4.1" for 4.1.4."""
    return ".".join(pyspark.__version__.split(".")[:2])


def supported_line() -> SparkLine | None:
    """The installed pyspark's row of the matrix, or None when eqdelete does not support it."""
    return matrix().get(installed_spark_line())


def _eqdelete_version() -> str:
    from eqdelete import __version__

    return __version__


def extension_jar(line: SparkLine) -> Path:
    """eqdelete's extension jar for ``line``: packaged with the wheel, or built in the checkout."""
    name = line.extension_jar_name(_eqdelete_version())
    for candidate in (_PACKAGE / "jars" / name, _CHECKOUT_BUILD / "jars" / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"eqdelete's extension jar {name} is missing: this eqdelete package carries no jar for Spark {line.spark} "
        "(in a checkout, run scripts/setup.sh)"
    )


def _spark_home_jars() -> str:
    home = os.environ.get("SPARK_HOME")
    jars = Path(home) / "jars" if home else None
    return " ".join(p.name for p in jars.glob("*.jar")) if jars and jars.is_dir() else ""


@dataclass(frozen=True)
class SessionJars:
    """What to add to a session: local jars (``spark.jars``) and coordinates (``spark.jars.packages``)."""

    jars: tuple[str, ...]
    packages: tuple[str, ...]


def session_jars(options: dict, line: SparkLine, iceberg_version: str, *, sqlite: bool) -> SessionJars:
    """The jars a session with builder ``options`` still needs, for ``line`` and ``iceberg_version``."""
    override = os.environ.get(JARS_ENV)
    if override:
        paths = [Path(p) for p in override.split(os.pathsep) if p]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"{JARS_ENV} names jars that do not exist: {', '.join(missing)}")
        return SessionJars(tuple(str(p.resolve()) for p in paths), ())

    jars = [str(extension_jar(line))]
    packages = []
    present = " ".join([str(options.get("spark.jars", "")), str(options.get("spark.jars.packages", "")), _spark_home_jars()])
    wanted = [(line.iceberg_runtime(iceberg_version), "iceberg-spark-runtime")]
    if sqlite:
        wanted.append((SQLITE_JDBC, "sqlite-jdbc"))
    for coordinates, artifact in wanted:
        if artifact in present:
            continue  # the user's own copy
        _, name, version = coordinates.split(":")
        built = _CHECKOUT_BUILD / "deps" / f"{name}-{version}.jar"
        if built.is_file():
            jars.append(str(built))
        else:
            packages.append(coordinates)
    return SessionJars(tuple(jars), tuple(packages))
