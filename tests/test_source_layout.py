"""The JVM sources keep the shape docs/how-it-works.md states (its "Code layout" table): every
package and every file is named there, every import between packages runs in a direction the
table allows (so there is no cycle), and Iceberg classes outside the `iceberg-api` module, which
Iceberg does not promise as API, are named only in the compat package. No Spark session: these
read files."""

from __future__ import annotations

import re
import zipfile
from functools import cache
from pathlib import Path

import pytest
from conftest import REPO

MAIN = REPO / "jvm" / "src" / "main"
LAYOUT_DOC = REPO / "docs" / "how-it-works.md"
COMPAT = "org.apache.spark.sql.eqdelete.compat"
ROOT = "eqdelete"  # the entry point's own package: EqualityDeleteExtensions and what it injects


def _code(text: str) -> str:
    """`text` without comments and string literals, so only code is checked."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"""(?:.|\n)*?"""|"(?:\\.|[^"\\\n])*"', re.S)
    return pattern.sub(lambda m: "\n" * m.group(0).count("\n") if m.group(0).startswith("/") else '""', text)


@cache
def _all_sources() -> dict[Path, tuple[str, str]]:
    """Every main Scala or Java file: its package and its code."""
    found = {}
    for path in sorted([*MAIN.rglob("*.scala"), *MAIN.rglob("*.java")]):
        code = _code(path.read_text())
        declared = re.search(r"^package ([\w.]+)", code, re.M)
        assert declared, f"{path} declares no package"
        found[path] = (declared.group(1), code)
    return found


@cache
def _sources() -> dict[Path, tuple[str, str]]:
    """Every main file outside compat: its package ('eqdelete' or the part after it, a subpackage
    such as 'deleteindex.build' whole) and its code."""
    found = {}
    for path, (name, code) in _all_sources().items():
        if name.startswith(COMPAT):
            continue
        assert name == ROOT or name.startswith(ROOT + "."), f"{path}: package {name} is outside eqdelete"
        found[path] = (name.split(".", 1)[1] if "." in name else ROOT, code)
    return found


def _package_of(path: str, packages: set[str]) -> str:
    """The package a reference `eqdelete.<path>` names: its longest prefix that is a package
    ('deleteindex.build.X' -> 'deleteindex.build'), else its first part."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in packages:
            return ".".join(parts[:end])
    return parts[0]


@cache
def _layout() -> list[tuple[str, str, str]]:
    """The table's rows, in order: package, what it holds, the packages it uses."""
    section = LAYOUT_DOC.read_text().split("## Code layout", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows.append((cells[0].strip("`").split("`")[0], cells[1], cells[2]))
    assert rows, f"no layout table under '## Code layout' in {LAYOUT_DOC}"
    return rows


def _allowed() -> dict[str, set[str]]:
    """What each package may use, as the table states it ('everything below': every later row)."""
    rows = _layout()
    allowed = {}
    for i, (package, _, uses) in enumerate(rows):
        if "everything below" in uses:
            allowed[package] = {p for p, _, _ in rows[i + 1 :]}
        else:
            allowed[package] = set(re.findall(r"`([\w.]+)`", uses))
    return allowed


def _used(code: str, own: str) -> set[str]:
    """The eqdelete packages `code` names, its own excepted (the root package as 'eqdelete')."""
    packages = {package for package, _ in _sources().values()}
    used = set()
    for match in re.finditer(r"(?:(?<![\w.])|_root_\.)eqdelete\.(\w+(?:\.\w+)*)", code):
        name = match.group(1)
        used.add(ROOT if name[0].isupper() or name == "_" else _package_of(name, packages))
    for match in re.finditer(r"(?:(?<![\w.])|_root_\.)import eqdelete\.\{([^}]*)\}", code):
        for part in match.group(1).split(","):
            name = part.split("=>")[0].strip()
            used.add(ROOT if name[0].isupper() or name == "_" else name)
    return used - {own}


def test_every_package_and_file_is_in_the_layout_table() -> None:
    rows = {package: what for package, what, _ in _layout()}
    packages = {package for package, _ in _sources().values()}
    assert sorted(packages - rows.keys()) == [], "packages missing from the layout table"
    assert sorted(rows.keys() - packages) == [], "the layout table names packages that do not exist"
    unnamed = [
        str(path.relative_to(REPO))
        for path, (package, _) in _sources().items()
        if f"`{path.stem}`" not in rows[package]
    ]
    assert unnamed == [], f"files the layout table does not name in their package's row ({LAYOUT_DOC.name})"


def test_imports_run_in_the_stated_direction() -> None:
    allowed = _allowed()
    against = sorted(
        f"{path.relative_to(REPO)}: {package} uses {used}"
        for path, (package, code) in _sources().items()
        for used in _used(code, package)
        if used not in allowed[package]
    )
    assert against == [], "imports the layout table does not allow"


def test_compat_imports_nothing_of_eqdelete() -> None:
    """compat is the bottom: every package may use it, so it uses none of theirs."""
    upward = sorted(
        f"{path.relative_to(REPO)}: {used}"
        for path, (name, code) in _all_sources().items()
        if name.startswith(COMPAT)
        for used in _used(code, own="")
    )
    assert upward == []


def test_the_stated_direction_has_no_cycle() -> None:
    allowed = _allowed()

    def reaches(start: str, target: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(n == target or (n not in seen and reaches(n, target, seen | {n})) for n in allowed.get(start, ()))

    assert [p for p in allowed if reaches(p, p)] == []


@cache
def _iceberg_api() -> frozenset[str]:
    """The classes of Iceberg's `iceberg-api` module (the newest release the build fetched)."""
    jars = sorted((REPO / "build" / "deps").glob("iceberg-api-*.jar"), key=lambda p: [int(n) for n in re.findall(r"\d+", p.stem)])
    if not jars:
        pytest.fail("build/deps has no iceberg-api jar: run scripts/setup.sh, which fetches it")
    with zipfile.ZipFile(jars[-1]) as jar:
        return frozenset(
            n[: -len(".class")].replace("/", ".") for n in jar.namelist() if n.endswith(".class") and "$" not in n
        )


def _iceberg_names(code: str) -> set[str]:
    """Every org.apache.iceberg class `code` names: imported (one or a selection) or written out."""
    names = set()
    # A whole package (`._`, `{_}`) or a package by name (`import org.apache.iceberg.spark`) is
    # reported as the package: it cannot be checked class by class, so it is not allowed.
    for match in re.finditer(r"import (org\.apache\.iceberg[\w.]*?)\.(\{[^}]*\}|\w+)[ \t]*$", code, re.M):
        package, selected = match.groups()
        for part in selected.strip("{}").split(","):
            name = part.split("=>")[0].strip()
            names.add(f"{package}.{name}" if name[0].isupper() else f"{package}.{name} (a package)")
    names.update(re.findall(r"(?<!import )\b(org\.apache\.iceberg(?:\.[a-z]\w*)*\.[A-Z]\w*)", code))
    return {_outermost_class(name) for name in names}


def _outermost_class(name: str) -> str:
    """`a.b.Outer` for `a.b.Outer.Inner` (the jar lists the outer class's file)."""
    parts = name.split(".")
    first = next((i for i, p in enumerate(parts) if p[:1].isupper()), None)
    return name if first is None or "(a package)" in name else ".".join(parts[: first + 1])


def test_iceberg_internal_classes_are_named_only_in_compat() -> None:
    api = _iceberg_api()
    outside = sorted(
        f"{path.relative_to(REPO)}: {name}"
        for path, (_, code) in _sources().items()
        for name in _iceberg_names(code)
        if name not in api
    )
    assert outside == [], f"Iceberg classes outside iceberg-api named outside {COMPAT}"


def test_the_checks_see_what_they_check() -> None:
    """The scanners find real names, so an empty answer above means something."""
    code = _code(
        'import eqdelete.scan.{A, B}\nimport org.apache.iceberg.{BaseTable => T, Table}\n'
        '// eqdelete.rule in a comment\nval s = "eqdelete.join"\nnew org.apache.iceberg.io.OutputFileFactory()\n'
        'import _root_.eqdelete.read.X\nimport eqdelete.{index => i}\nimport eqdelete._\n'
        'import eqdelete.deleteindex.build.TaskKeys\nval k = eqdelete.deleteindex.KeyBits.of(1)\n'
        'import org.apache.iceberg.spark.source._\nimport org.apache.iceberg.spark\n'
        'import org.apache.iceberg.expressions.Expression.Operation\n'
    )
    assert _used(code, "cost") == {"scan", "read", "index", "deleteindex.build", "deleteindex", ROOT}
    assert _iceberg_names(code) == {
        "org.apache.iceberg.BaseTable",
        "org.apache.iceberg.Table",
        "org.apache.iceberg.io.OutputFileFactory",
        "org.apache.iceberg.spark.source._ (a package)",
        "org.apache.iceberg.spark (a package)",
        "org.apache.iceberg.expressions.Expression",
    }
    assert "org.apache.iceberg.Table" in _iceberg_api()
    assert "org.apache.iceberg.BaseTable" not in _iceberg_api()
    assert len(_sources()) > 50


def test_the_python_library_never_imports_its_tools() -> None:
    """``eqdelete`` is the library; ``eqdelete.tools`` (CLI, generator, benchmarks) builds on it.
    ``__main__`` only starts the command line (``python -m eqdelete``)."""
    library = REPO / "python" / "eqdelete"
    importing = sorted(
        path.name
        for path in library.glob("*.py")
        if path.name != "__main__.py" and re.search(r"^\s*(from eqdelete\.tools\b|from eqdelete import tools\b|import eqdelete\.tools\b)", path.read_text(), re.M)
    )
    assert importing == []
    assert list((library / "tools").glob("*.py")), "no tools package"
