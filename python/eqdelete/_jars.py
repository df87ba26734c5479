"""Where the JVM jars live: the extension, Iceberg's Spark runtime and SQLite's JDBC driver."""

from __future__ import annotations

import os
from pathlib import Path

#: Set to an ``os.pathsep``-separated list of jars to use instead of the checkout's ``build/``.
JARS_ENV = "EQDELETE_JARS"

_REPO_ROOT = Path(__file__).resolve().parents[2]


def jar_paths() -> list[str]:
    """The jars a session needs, as absolute paths; raises if any is missing."""
    override = os.environ.get(JARS_ENV)
    if override:
        paths = [Path(p) for p in override.split(os.pathsep) if p]
    else:
        paths = [_REPO_ROOT / "build" / "jars" / "eqdelete.jar"]
        paths += sorted((_REPO_ROOT / "build" / "deps").glob("*.jar"))
    missing = [str(p) for p in paths if not p.is_file()]
    names = " ".join(p.name for p in paths)
    if missing or "iceberg-spark-runtime" not in names or "eqdelete" not in names:
        raise FileNotFoundError(
            "eqdelete's jars are not built: run scripts/setup.sh in the eqdelete checkout, "
            f"or set {JARS_ENV} to the extension, Iceberg runtime and sqlite-jdbc jars "
            f"(missing: {', '.join(missing) or 'the extension or the Iceberg runtime'})"
        )
    return [str(p.resolve()) for p in paths]
