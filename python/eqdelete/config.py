"""Session set-up: jars, the extension, and a default Iceberg catalog on embedded SQLite."""

from __future__ import annotations

import warnings
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from eqdelete import _conf, _jars, _jvm

EXTENSION = "eqdelete.EqualityDeleteExtensions"
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
DEFAULT_CATALOG = "local"
#: eqdelete's catalog of SQL procedures (Spark 4.0 and later): CALL eqdelete.system.resolve_equality_deletes(...)
PROCEDURE_CATALOG = "eqdelete"
PROCEDURE_CATALOG_CLASS = "eqdelete.sql.ResolveProcedureCatalog"
DEFAULT_WAREHOUSE = "warehouse"
#: The values spark.eqdelete.strategy accepts, from the extension's own declarations.
STRATEGIES: tuple[str, ...] = tuple(_conf.rules()["spark.eqdelete.strategy"]["values"])


def _append(options: dict, key: str, values: list[str], sep: str = ",") -> str:
    """Existing comma-separated value of ``key`` plus ``values`` not already in it."""
    current = [v for v in str(options.get(key, "")).split(sep) if v]
    return sep.join(current + [v for v in values if v not in current])


def catalog_options(name: str, warehouse: str | Path) -> dict[str, str]:
    """Spark options for an Iceberg JDBC catalog on a SQLite file inside ``warehouse``.

    pyiceberg's ``SqlCatalog`` reads the same file (``sqlite:///<warehouse>/catalog.db``).
    """
    root = Path(warehouse).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": f"jdbc:sqlite:{root / 'catalog.db'}",
        # V1 adds views; pyiceberg's SqlCatalog reads the same tables either way.
        f"{prefix}.jdbc.schema-version": "V1",
        f"{prefix}.warehouse": root.as_uri(),
    }


def hadoop_catalog_options(name: str, warehouse: str | Path) -> dict[str, str]:
    """Spark options for an Iceberg Hadoop catalog on ``warehouse``: how Spark reads the tables
    Flink's Iceberg sink writes there (``eqdelete.flink``). Catalog options may be set on a
    running session; Spark makes the catalog on first use."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "hadoop",
        f"{prefix}.warehouse": Path(warehouse).expanduser().resolve().as_uri(),
    }


def configure(
    builder: SparkSession.Builder,
    *,
    catalog: str | None = DEFAULT_CATALOG,
    warehouse: str | Path = DEFAULT_WAREHOUSE,
    strategy: str | None = None,
    iceberg_extensions: bool = True,
    iceberg_version: str | None = None,
) -> SparkSession.Builder:
    """Add eqdelete to a session builder and return the builder.

    Adds eqdelete's extension jar for the installed Spark line to ``spark.jars`` and
    ``eqdelete.EqualityDeleteExtensions`` (after Iceberg's own extensions) to
    ``spark.sql.extensions``, keeping whatever the builder already had in both. Iceberg's
    Spark runtime (release ``iceberg_version``, by default the newest supported for this Spark
    line) and the SQLite JDBC driver are added unless the session already has them
    (``spark.jars``, ``spark.jars.packages`` or ``$SPARK_HOME/jars``): from a checkout's
    ``build/deps``, or else as Maven coordinates in ``spark.jars.packages``.

    On a Spark line eqdelete does not support (no Iceberg runtime exists for it), the builder
    is returned as it was, with a warning.

    Unless the builder already configures a catalog (any ``spark.sql.catalog.*`` key: REST,
    Hive, Hadoop, JDBC elsewhere, which is then left untouched) or ``catalog`` is None, an
    Iceberg JDBC catalog named ``catalog`` is added on an embedded SQLite file in
    ``warehouse``. On Spark 4.0 and later, eqdelete's procedure catalog is added as ``eqdelete``
    (``CALL eqdelete.system.resolve_equality_deletes(table => ...)``) unless that name is taken.

    Every ``spark.eqdelete.*`` value on the builder is checked here, with the extension's own
    rules: a bad one raises ValueError naming the key, the value and what is allowed, before
    any JVM starts. (Values added to the builder later, or from spark-defaults.conf, are
    checked by the extension when the session starts, with the same message.)
    """
    if not isinstance(builder, SparkSession.Builder):
        raise TypeError(f"configure() takes a SparkSession.Builder, not {type(builder).__name__}")
    # Spark keeps builder options in this dict; Delta's configure_spark_with_delta_pip reads
    # it the same way, to extend rather than overwrite the user's values.
    options: dict = builder._options  # noqa: SLF001
    _conf.check({**options, **({"spark.eqdelete.strategy": strategy} if strategy is not None else {})})
    line = _jars.supported_line()
    if line is None:
        warnings.warn(
            f"eqdelete supports Spark {', '.join(_jars.matrix())}, not pyspark {pyspark.__version__} "
            "(Iceberg publishes no Spark runtime for it): the session is left without eqdelete",
            stacklevel=2,
        )
        return builder
    version = iceberg_version or line.default_iceberg
    if version not in line.iceberg:
        raise ValueError(
            f"eqdelete: Iceberg {version} is not supported with Spark {line.spark}: "
            f"choose one of {', '.join(line.iceberg)}"
        )
    add_catalog = catalog is not None and not any(k.startswith("spark.sql.catalog.") for k in options)
    needed = _jars.session_jars(options, line, version, sqlite=add_catalog)
    extensions = ([ICEBERG_EXTENSION] if iceberg_extensions else []) + [EXTENSION]
    builder.config("spark.jars", _append(options, "spark.jars", list(needed.jars)))
    if needed.packages:
        builder.config("spark.jars.packages", _append(options, "spark.jars.packages", list(needed.packages)))
    builder.config("spark.sql.extensions", _append(options, "spark.sql.extensions", extensions))
    if add_catalog:
        for key, value in catalog_options(catalog, warehouse).items():
            builder.config(key, value)
    procedures = f"spark.sql.catalog.{PROCEDURE_CATALOG}"
    if int(line.spark.split(".")[0]) >= 4 and procedures not in options:  # Spark 3.5 has no CALL of its own
        builder.config(procedures, PROCEDURE_CATALOG_CLASS)
    if strategy is not None:
        builder.config("spark.eqdelete.strategy", strategy)
    return builder


def session(
    app_name: str = "eqdelete",
    *,
    master: str | None = "local[*]",
    catalog: str | None = DEFAULT_CATALOG,
    warehouse: str | Path = DEFAULT_WAREHOUSE,
    strategy: str | None = None,
    conf: dict[str, str] | None = None,
    iceberg_version: str | None = None,
) -> SparkSession:
    """A ready session: ``configure`` on a fresh builder, extra ``conf`` applied first.

    A bad ``spark.eqdelete.*`` value in ``conf`` raises ValueError before a JVM starts; one in
    spark-defaults.conf fails when the session starts; both name the key, the value and what
    is allowed.
    """
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    configure(builder, catalog=catalog, warehouse=warehouse, strategy=strategy, iceberg_version=iceberg_version)
    spark = builder.getOrCreate()
    if _jars.supported_line() is not None:
        _jvm.validate_conf(spark)
    return spark
