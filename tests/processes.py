"""Spark jobs in fresh processes, for what one test session cannot show: driver memory, start-up
configuration, command-line tools, several JVMs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from eqdelete._jars import jar_paths

TESTS = Path(__file__).resolve().parent


def _env() -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}


def run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a command; stdout and stderr apart, so tests can tell a one-line error from a traceback."""
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                          timeout=timeout, cwd=cwd)


def python_job(script: str, tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``script`` (dedented) run by this interpreter, in ``tmp_path``."""
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    return run([sys.executable, str(path), *args], tmp_path, timeout)


def spark_submit(script: str, tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``script`` run by spark-submit on local[1], with eqdelete's jars on the classpath."""
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    submit = Path(sys.executable).parent / "spark-submit"
    return run([str(submit), "--master", "local[1]", "--jars", ",".join(jar_paths()), *args, str(path)], tmp_path, timeout)


def eqdelete_cli(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m eqdelete ...`` in ``tmp_path``."""
    return run([sys.executable, "-m", "eqdelete", *args], tmp_path, timeout)
