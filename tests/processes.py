"""Spark jobs in fresh processes, for what one test session cannot show: driver memory, start-up
configuration, command-line tools, several JVMs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from eqdelete import _jars

TESTS = Path(__file__).resolve().parent


def _env(python: Path, extra: dict[str, str] | None) -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python),
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]), **(extra or {})}


def run(args: list[str], cwd: Path, timeout: float = 300, *, python: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run a command; stdout and stderr apart, so tests can tell a one-line error from a traceback."""
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=_env(python or Path(sys.executable), env), timeout=timeout, cwd=cwd)


def python_job(script: str, tmp_path: Path, *args: str, timeout: float = 300, python: Path | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``script`` (dedented) run in ``tmp_path`` by ``python`` (this interpreter by default), with ``env`` added."""
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    return run([str(python or sys.executable), str(path), *args], tmp_path, timeout, python=python, env=env)


def spark_submit(script: str, tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``script`` run by spark-submit on local[1], with eqdelete's jars on the classpath."""
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    submit = Path(sys.executable).parent / "spark-submit"
    line = _jars.supported_line()
    needed = _jars.session_jars({}, line, os.environ.get("EQDELETE_TEST_ICEBERG") or line.default_iceberg, sqlite=True)
    packages = ["--packages", ",".join(needed.packages)] if needed.packages else []
    return run([str(submit), "--master", "local[1]", "--jars", ",".join(needed.jars), *packages, *args, str(path)],
               tmp_path, timeout)


def eqdelete_cli(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m eqdelete ...`` in ``tmp_path``."""
    return run([sys.executable, "-m", "eqdelete", *args], tmp_path, timeout)
