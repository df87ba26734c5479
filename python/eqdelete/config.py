"""Session set-up: jars, the extension, and a default Iceberg catalog on embedded SQLite."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from eqdelete import _conf, _jars, _jvm, _remote

EXTENSION = "eqdelete.EqualityDeleteExtensions"
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
DEFAULT_CATALOG = "local"
#: eqdelete's catalog of SQL procedures (Spark 4.0 and later): CALL eqdelete.system.resolve_equality_deletes(...)
PROCEDURE_CATALOG = "eqdelete"
PROCEDURE_CATALOG_CLASS = "eqdelete.sql.EqDeleteProcedureCatalog"
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
    Flink's Iceberg sink writes there (``eqdelete.tools.flink``). Catalog options may be set on a
    running session; Spark makes the catalog on first use."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "hadoop",
        f"{prefix}.warehouse": Path(warehouse).expanduser().resolve().as_uri(),
    }


def extension_options(
    options: dict,
    *,
    catalog: str | None = DEFAULT_CATALOG,
    warehouse: str | Path = DEFAULT_WAREHOUSE,
    iceberg_extensions: bool = True,
    iceberg_version: str | None = None,
) -> dict[str, str]:
    """The settings ``configure`` adds to a session whose settings are ``options``, for the
    installed Spark line: the values to set, each merged with what ``options`` already holds.
    (Also what a Spark Connect server needs at start: ``python -m eqdelete connect-server``.)"""
    line = _jars.supported_line()
    if line is None:
        raise ValueError(
            f"eqdelete supports Spark {', '.join(_jars.matrix())}, not pyspark {pyspark.__version__} "
            "(Iceberg publishes no Spark runtime for it)"
        )
    version = iceberg_version or line.default_iceberg
    if version not in line.iceberg:
        raise ValueError(
            f"eqdelete: Iceberg {version} is not supported with Spark {line.spark}: "
            f"choose one of {', '.join(line.iceberg)}"
        )
    add_catalog = catalog is not None and not any(k.startswith("spark.sql.catalog.") for k in options)
    needed = _jars.session_jars(options, line, version, sqlite=add_catalog)
    extensions = ([ICEBERG_EXTENSION] if iceberg_extensions else []) + [EXTENSION]
    added = {
        "spark.jars": _append(options, "spark.jars", list(needed.jars)),
        "spark.sql.extensions": _append(options, "spark.sql.extensions", extensions),
    }
    if needed.packages:
        added["spark.jars.packages"] = _append(options, "spark.jars.packages", list(needed.packages))
    if add_catalog:
        added.update(catalog_options(catalog, warehouse))
    procedures = f"spark.sql.catalog.{PROCEDURE_CATALOG}"
    if procedures not in options:
        added[procedures] = PROCEDURE_CATALOG_CLASS
    return added


def starts_local_server(options: dict) -> bool:
    """Whether a builder with ``options`` starts a Spark Connect server of its own, in this process's
    JVM, from the builder's settings (pyspark does for ``remote("local[...]")``, and for
    ``spark.api.mode=connect`` without a ``sc://`` address): eqdelete's jars, extensions and catalog
    then go on the builder as on a classic one."""
    remote = options.get("spark.remote", os.environ.get("SPARK_REMOTE"))
    if remote is not None:
        return str(remote).startswith("local")
    mode = str(options.get("spark.api.mode", os.environ.get("SPARK_API_MODE", ""))).lower()
    return mode == "connect"


class RemoteSessionWarning(UserWarning):
    """configure() was given a Spark Connect builder: the server, not the client, loads eqdelete."""


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

    On a builder of a Spark Connect client of a running server (``SparkSession.builder.remote("sc://...")``)
    only ``strategy`` can be set: jars, extensions and catalogs are the server's, fixed when it
    starts. The builder then gets the strategy and a ``RemoteSessionWarning`` lists the settings
    the server needs (``python -m eqdelete connect-server`` starts one with them). A builder that
    starts its own local server (``remote("local[...]")``, or ``spark.api.mode=connect``) gets
    everything, as a classic one: pyspark starts that server from the builder's settings.

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
    if _jars.supported_line() is None:
        warnings.warn(
            f"eqdelete supports Spark {', '.join(_jars.matrix())}, not pyspark {pyspark.__version__} "
            "(Iceberg publishes no Spark runtime for it): the session is left without eqdelete",
            stacklevel=2,
        )
        return builder
    if strategy is not None:
        builder.config("spark.eqdelete.strategy", strategy)
    if "spark.remote" in options and not starts_local_server(options):
        server = extension_options({}, catalog=catalog, warehouse=warehouse,
                                   iceberg_extensions=iceberg_extensions, iceberg_version=iceberg_version)
        warnings.warn(
            f"eqdelete: {options['spark.remote']} is a Spark Connect server; a client cannot add jars, "
            "extensions or catalogs to it, so only spark.eqdelete.* settings were set. Start the server "
            "with `python -m eqdelete connect-server`, or add these settings to its configuration:\n"
            + server_settings_text(server),
            RemoteSessionWarning,
            stacklevel=2,
        )
        return builder
    added = extension_options(options, catalog=catalog, warehouse=warehouse,
                              iceberg_extensions=iceberg_extensions, iceberg_version=iceberg_version)
    for key, value in added.items():
        builder.config(key, value)
    return builder


def server_settings_text(settings: dict[str, str]) -> str:
    """Settings as spark-defaults.conf lines."""
    return "\n".join(f"  {key}  {value}" for key, value in settings.items())


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

    With ``conf={"spark.remote": "sc://host:port"}`` the session is a Spark Connect client of
    a server started with eqdelete (``python -m eqdelete connect-server``): ``master``,
    ``catalog``, ``warehouse`` and ``iceberg_version`` are the server's then; the other
    ``conf`` values are set on the session, and a server without eqdelete raises RuntimeError.
    With ``conf={"spark.remote": "local[2]"}`` (or ``"spark.api.mode": "connect"``) pyspark starts
    a local Connect server in this process from the settings, and it gets eqdelete as a classic
    session does.
    """
    settings = dict(conf or {})
    remote = settings.get("spark.remote")
    if remote is not None and not starts_local_server(settings):
        settings.pop("spark.remote")
        return _remote_session(remote, settings, strategy)
    local_server = starts_local_server(settings)
    builder = SparkSession.builder.appName(app_name)
    if master is not None and remote is None:  # remote("local[...]") names the master itself
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    configure(builder, catalog=catalog, warehouse=warehouse, strategy=strategy, iceberg_version=iceberg_version)
    spark = builder.getOrCreate()
    if _jars.supported_line() is not None and not local_server:
        _jvm.validate_conf(spark)
    return spark


def _remote_session(url: str, settings: dict[str, str], strategy: str | None) -> SparkSession:
    """A Spark Connect session on ``url``, checked to reach a server with eqdelete loaded."""
    runtime = {**settings, **({"spark.eqdelete.strategy": strategy} if strategy is not None else {})}
    _conf.check(runtime)
    # pyspark's own builder, which also puts the process in Connect mode (pyspark.sql.functions
    # then build Connect columns): a process holds classic or Connect sessions, not both.
    spark = SparkSession.builder.remote(url).getOrCreate()
    for key, value in runtime.items():
        spark.conf.set(key, value)
    if not _remote.has_extension(spark):
        raise RuntimeError(
            f"eqdelete: the Spark Connect server at {url} does not have eqdelete loaded; "
            "start it with `python -m eqdelete connect-server`"
        )
    return spark
