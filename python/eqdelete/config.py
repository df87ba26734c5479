"""Session set-up: jars, the extension, and a default Iceberg catalog on embedded SQLite."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from eqdelete import _conf, _jvm
from eqdelete._jars import jar_paths

EXTENSION = "eqdelete.EqualityDeleteExtensions"
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
DEFAULT_CATALOG = "local"
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


def configure(
    builder: SparkSession.Builder,
    *,
    catalog: str | None = DEFAULT_CATALOG,
    warehouse: str | Path = DEFAULT_WAREHOUSE,
    strategy: str | None = None,
    iceberg_extensions: bool = True,
) -> SparkSession.Builder:
    """Add eqdelete to a session builder and return the builder.

    Adds the extension, Iceberg's runtime and the SQLite JDBC driver to ``spark.jars``, and
    ``eqdelete.EqualityDeleteExtensions`` (after Iceberg's own extensions) to
    ``spark.sql.extensions``, keeping whatever the builder already had in both.

    Unless the builder already configures a catalog (any ``spark.sql.catalog.*`` key: REST,
    Hive, Hadoop, JDBC elsewhere, which is then left untouched) or ``catalog`` is None, an
    Iceberg JDBC catalog named ``catalog`` is added on an embedded SQLite file in
    ``warehouse``.

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
    extensions = ([ICEBERG_EXTENSION] if iceberg_extensions else []) + [EXTENSION]
    builder.config("spark.jars", _append(options, "spark.jars", jar_paths()))
    builder.config("spark.sql.extensions", _append(options, "spark.sql.extensions", extensions))
    user_catalog = any(k.startswith("spark.sql.catalog.") for k in options)
    if catalog is not None and not user_catalog:
        for key, value in catalog_options(catalog, warehouse).items():
            builder.config(key, value)
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
    spark = configure(builder, catalog=catalog, warehouse=warehouse, strategy=strategy).getOrCreate()
    _jvm.validate_conf(spark)
    return spark
