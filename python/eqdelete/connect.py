"""A Spark Connect server with eqdelete loaded: the command line that starts one.

Spark Connect clients hold no JVM: the server loads eqdelete's jar, extensions and catalogs
when it starts (``configure`` cannot add them from a client). ``python -m eqdelete
connect-server`` runs this command; ``--print`` shows it, to adapt for a cluster.
"""

from __future__ import annotations

from pathlib import Path

import pyspark

from eqdelete import _jars
from eqdelete.config import DEFAULT_CATALOG, DEFAULT_WAREHOUSE, _append, extension_options

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def server_settings(
    *, port: int = 15002, catalog: str | None = DEFAULT_CATALOG, warehouse: str | Path = DEFAULT_WAREHOUSE
) -> dict[str, str]:
    """The server's settings: eqdelete's (as ``configure`` adds them) and the gRPC port. Spark
    3.5's Python package ships no Connect server, so there it comes as a package too."""
    settings = extension_options({}, catalog=catalog, warehouse=warehouse)
    line = _jars.supported_line()
    if line is not None and line.spark == "3.5":
        settings["spark.jars.packages"] = _append(
            settings, "spark.jars.packages", [f"org.apache.spark:spark-connect_{line.scala}:{pyspark.__version__}"])
    settings["spark.connect.grpc.binding.port"] = str(port)
    return settings


def server_command(
    *,
    port: int = 15002,
    master: str = "local[*]",
    warehouse: str | Path = DEFAULT_WAREHOUSE,
    driver_memory: str = "4g",
    conf: dict[str, str] | None = None,
) -> list[str]:
    """``spark-submit`` of the installed pyspark running a Connect server with eqdelete, in the
    foreground, on the embedded catalog in ``warehouse``; ``conf`` adds or overrides settings."""
    spark_submit = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"
    settings = {**server_settings(port=port, warehouse=warehouse), **(conf or {})}
    command = [str(spark_submit), "--class", SERVER_CLASS, "--name", "eqdelete Spark Connect server",
               "--master", master, "--driver-memory", driver_memory]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return command + ["spark-internal"]
