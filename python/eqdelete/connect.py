"""A Spark Connect server with eqdelete loaded: the command line that starts one.

Spark Connect clients hold no JVM: the server loads eqdelete's jar, extensions and catalogs
when it starts (``configure`` cannot add them from a client). ``python -m eqdelete
connect-server`` runs this command; ``--print`` shows it, to adapt for a cluster.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyspark

from eqdelete import _jars
from eqdelete._processes import die_with_parent
from eqdelete.config import DEFAULT_CATALOG, DEFAULT_WAREHOUSE, _append, extension_options

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def server_settings(
    *,
    port: int = 15002,
    catalog: str | None = DEFAULT_CATALOG,
    warehouse: str | Path = DEFAULT_WAREHOUSE,
    conf: dict[str, str] | None = None,
) -> dict[str, str]:
    """The server's settings: ``conf`` with eqdelete's added (as ``configure`` adds them: no
    embedded catalog when ``conf`` configures one) and the gRPC port. Spark 3.5's Python package
    ships no Connect server, so there it comes as a package too."""
    given = dict(conf or {})
    settings = {**given, **extension_options(given, catalog=catalog, warehouse=warehouse)}
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
    settings = server_settings(port=port, warehouse=warehouse, conf=conf)
    command = [str(spark_submit), "--class", SERVER_CLASS, "--name", "eqdelete Spark Connect server",
               "--master", master, "--driver-memory", driver_memory]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return command + ["spark-internal"]


def run_server(command: list[str], *, grace_seconds: float = 30.0) -> int:
    """Run the server ``command`` in the foreground until it exits or this process is told to stop.

    SIGTERM and SIGINT are passed on to the server as SIGTERM (its JVM stops Spark in its shutdown
    hooks), which gets ``grace_seconds`` to exit before it is killed; then this returns 0. Otherwise
    the server's own exit code."""
    server = subprocess.Popen(command, preexec_fn=die_with_parent)  # noqa: PLW1509 - only prctl, before exec
    stopping: list[int] = []

    def stop(signum: int, _frame: Any) -> None:
        if not stopping:
            print(f"eqdelete: {signal.Signals(signum).name}: stopping the Spark Connect server", file=sys.stderr)
            server.send_signal(signal.SIGTERM)
        stopping.append(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        deadline = None
        while True:
            try:
                code = server.wait(timeout=0.5)  # short, so a stop's grace period is kept
                return 0 if stopping else code
            except subprocess.TimeoutExpired:
                if stopping and deadline is None:
                    deadline = time.monotonic() + grace_seconds
                if deadline is not None and time.monotonic() > deadline:
                    print("eqdelete: the Spark Connect server did not stop in time: killed", file=sys.stderr)
                    server.kill()
                    server.wait()
                    return 0
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
