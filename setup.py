"""Puts the extension jars of every Spark line into the wheel (``eqdelete/jars/``).

Everything else is declared in pyproject.toml. The jars are built by scripts/setup.sh into
build/jars; building a wheel without them fails, naming the missing jars, rather than
producing a package that cannot start its extension. Editable installs read them from build/.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithJars(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        version = re.search(r'(?m)^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
        matrix = ROOT / "python" / "eqdelete" / "matrix.txt"
        rows = [line.split("#", 1)[0].split() for line in matrix.read_text().splitlines()]
        names = [f"eqdelete-spark-{row[0]}_{row[1]}-{version}.jar" for row in rows if row]
        missing = [n for n in names if not (ROOT / "build" / "jars" / n).is_file()]
        if missing:
            raise SystemExit(f"cannot build the wheel: {', '.join(missing)} not built; run scripts/setup.sh first")
        target = Path(self.build_lib) / "eqdelete" / "jars"
        target.mkdir(parents=True, exist_ok=True)
        for name in names:
            shutil.copy2(ROOT / "build" / "jars" / name, target / name)


setup(cmdclass={"build_py": BuildPyWithJars})
