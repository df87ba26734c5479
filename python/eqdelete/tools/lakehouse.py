"""A lakehouse on this machine, as users run one: an S3-compatible object store (s3proxy, on a
directory) and Iceberg's REST catalog server in front of it, each a JVM listening on 127.0.0.1,
on free ports, started and stopped here. Iceberg's and pyiceberg's integration tests model the
same set-up with the same two servers.

The catalog keeps its tables in ``s3://lake/warehouse`` and hands every client each table's S3
credentials in the table's FileIO configuration (as Polaris, Unity, Glue's REST endpoint or
Lakekeeper vend them): Spark, Flink and pyiceberg are given the catalog's address, the store's
endpoint and a region, never a key, so any read or write that does not go through the table's own
FileIO fails. ``spark_options``, ``flink_properties`` and ``pyiceberg_properties`` are each
engine's settings, as a user would write them in spark-defaults.conf, Flink SQL's CREATE CATALOG
and ``load_catalog``.

The jars come from Maven Central by coordinates (``scripts/setup.sh`` reads ``--pins``, and the REST
server's classpath from ``--rest-pom``) into build/deps/lakehouse; the REST server runs from
``LoopbackRestCatalog.java`` beside this file (Iceberg's own server binds every interface).

    python -m eqdelete lakehouse --root DIR     # run both until stopped, printing each engine's settings
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from eqdelete._processes import stop_group

#: s3proxy's release: 2.6 rejects the checksums the AWS SDK of Iceberg 1.11 and later sends by
#: default (aws-chunked uploads with a trailing CRC); 4.0 takes them.
S3PROXY = "org.gaul:s3proxy:4.0.0:jar:jar-with-dependencies"
#: Iceberg's REST catalog server comes from iceberg-open-api's test fixtures, published up to 1.11.0.
REST_ICEBERG = "1.11.0"
#: What the REST server's classes need beside Iceberg's (Iceberg's build pins these lines).
REST_DEPENDENCIES = (
    f"org.apache.iceberg:iceberg-open-api:{REST_ICEBERG}:test-fixtures",
    f"org.apache.iceberg:iceberg-core:{REST_ICEBERG}",
    f"org.apache.iceberg:iceberg-core:{REST_ICEBERG}:tests",      # RESTCatalogAdapter, RESTCatalogServlet
    f"org.apache.iceberg:iceberg-aws:{REST_ICEBERG}",             # S3FileIO
    f"org.apache.iceberg:iceberg-aws-bundle:{REST_ICEBERG}",      # the AWS SDK
    "org.xerial:sqlite-jdbc:3.50.3.0",                            # the catalog's JDBC backend, a file
    "org.eclipse.jetty.ee10:jetty-ee10-servlet:12.1.5",
    "org.apache.hadoop:hadoop-client-api:3.4.2",
    "org.apache.hadoop:hadoop-client-runtime:3.4.2",
    "org.slf4j:slf4j-simple:2.0.17",
)
BUCKET = "lake"
ACCESS_KEY = "eqdelete"
SECRET_KEY = "eqdelete-local-secret"  # a store on loopback, for tests and benchmarks
REGION = "us-east-1"

REPO = Path(__file__).resolve().parents[3]
JAR_DIR = REPO / "build" / "deps" / "lakehouse"
REST_CLASSPATH = JAR_DIR / "rest"
LAUNCHER = Path(__file__).resolve().parent / "LoopbackRestCatalog.java"


class LakehouseError(RuntimeError):
    """A server could not start; the message says which and shows its log's end."""


def aws_bundle(iceberg_version: str) -> str:
    """Maven coordinates of Iceberg's AWS bundle (the AWS SDK S3FileIO needs) for a release."""
    return f"org.apache.iceberg:iceberg-aws-bundle:{iceberg_version}"


def spark_jars(iceberg_version: str) -> list[str]:
    """The jar Spark needs for S3FileIO with ``iceberg_version``'s runtime: build/deps/lakehouse's
    copy (scripts/setup.sh fetches it for the releases the tests use), or [] when absent (then
    ``spark_packages``)."""
    jar = JAR_DIR / f"iceberg-aws-bundle-{iceberg_version}.jar"
    return [str(jar)] if jar.is_file() else []


def _jar_path(coordinates: str) -> Path:
    group, artifact, version, *rest = coordinates.split(":")
    classifier = f"-{rest[1]}" if len(rest) == 2 else ""
    return JAR_DIR / f"{artifact}-{version}{classifier}.jar"


def rest_pom() -> str:
    """A Maven project whose dependencies are the REST server's classpath (setup.sh copies them)."""
    deps = []
    for coordinates in REST_DEPENDENCIES:
        group, artifact, version, *classifier = coordinates.split(":")
        extra = f"<classifier>{classifier[0]}</classifier>" if classifier else ""
        deps.append(f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                     f"<version>{version}</version>{extra}</dependency>")
    return ("<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n  <modelVersion>4.0.0</modelVersion>\n"
            "  <groupId>eqdelete</groupId><artifactId>rest-catalog-server</artifactId><version>0</version>\n"
            "  <packaging>pom</packaging>\n  <dependencies>\n" + "\n".join(deps) + "\n  </dependencies>\n</project>\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Lakehouse:
    """s3proxy and Iceberg's REST catalog server under ``root``, on loopback, while started.

    >>> with Lakehouse(tmp) as lake:
    ...     spark_conf = lake.spark_options("lake")
    """

    def __init__(self, root: str | Path, *, log_requests: bool = False) -> None:
        self.root = Path(root).resolve()
        self.log_requests = log_requests
        self.s3_port = 0
        self.rest_port = 0
        self._processes: list[tuple[str, subprocess.Popen, Path]] = []

    # --- the settings each engine is given -------------------------------------------------

    @property
    def s3_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def rest_uri(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def warehouse(self) -> str:
        return f"s3://{BUCKET}/warehouse"

    def client_properties(self) -> dict[str, str]:
        """An Iceberg REST catalog client's properties: the catalog, S3FileIO, the store's endpoint
        and region. No credentials: the catalog hands them out with each table."""
        return {"uri": self.rest_uri, "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
                "s3.endpoint": self.s3_endpoint, "s3.path-style-access": "true", "client.region": REGION}

    def spark_options(self, catalog: str = "lake") -> dict[str, str]:
        """Spark's catalog settings (spark-defaults.conf lines); the session also needs Iceberg's
        AWS bundle (``spark_jars``)."""
        prefix = f"spark.sql.catalog.{catalog}"
        return {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.type": "rest",
                **{f"{prefix}.{k}": v for k, v in self.client_properties().items()}}

    def flink_properties(self) -> dict[str, str]:
        """Flink SQL's ``CREATE CATALOG ... WITH (...)`` options (besides 'type'='iceberg')."""
        return {"catalog-type": "rest", **self.client_properties()}

    def pyiceberg_properties(self) -> dict[str, str]:
        """``pyiceberg.catalog.load_catalog(name, **these)``."""
        return {"type": "rest", "uri": self.rest_uri, "s3.endpoint": self.s3_endpoint, "s3.region": REGION}

    def s3_filesystem(self) -> Any:
        """pyarrow's S3 filesystem on the store, with the keys: for tests that act on objects
        behind a table's back (a delete file lost or overwritten), as someone with the bucket's
        keys could."""
        from pyarrow import fs

        return fs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, endpoint_override=self.s3_endpoint,
                               scheme="http", region=REGION, force_virtual_addressing=False)

    # --- the servers -------------------------------------------------------------------------

    def start(self, timeout: float = 120) -> Lakehouse:
        missing = [str(p) for p in (_jar_path(S3PROXY), REST_CLASSPATH) if not p.exists()]
        if missing:
            raise LakehouseError(f"missing {', '.join(missing)}: run scripts/setup.sh")
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self._start_store(timeout)
            self._start_catalog(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_store(self, timeout: float) -> None:
        data = self.root / "s3"
        (data / BUCKET).mkdir(parents=True, exist_ok=True)  # a bucket is a directory of the filesystem store
        self.s3_port = free_port()
        conf = self.root / "s3proxy.conf"
        conf.write_text("\n".join([
            f"s3proxy.endpoint=http://127.0.0.1:{self.s3_port}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={ACCESS_KEY}",
            f"s3proxy.credential={SECRET_KEY}",
            "jclouds.provider=filesystem",
            f"jclouds.filesystem.basedir={data}",
        ]) + "\n")
        # With log_requests, s3proxy logs each request (its method and object) for requests_log.
        self._spawn("s3proxy", ["java", "-Xmx256m", "-jar", str(_jar_path(S3PROXY)), "--properties", str(conf)],
                    self.s3_port, {"LOG_LEVEL": "debug"} if self.log_requests else {}, timeout)

    def _start_catalog(self, timeout: float) -> None:
        self.rest_port = free_port()
        env = {
            "CATALOG_REST_PORT": str(self.rest_port),
            "CATALOG_CATALOG__IMPL": "org.apache.iceberg.jdbc.JdbcCatalog",
            "CATALOG_URI": f"jdbc:sqlite:{self.root / 'rest-catalog.db'}",
            "CATALOG_JDBC_SCHEMA__VERSION": "V1",
            "CATALOG_WAREHOUSE": self.warehouse,
            "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
            "CATALOG_S3_ENDPOINT": self.s3_endpoint,
            "CATALOG_S3_PATH__STYLE__ACCESS": "true",
            "CATALOG_S3_ACCESS__KEY__ID": ACCESS_KEY,
            "CATALOG_S3_SECRET__ACCESS__KEY": SECRET_KEY,
            "CATALOG_CLIENT_REGION": REGION,
            "CATALOG_INCLUDE__CREDENTIALS": "true",  # each table's FileIO gets the keys from the catalog
        }
        self._spawn("REST catalog", ["java", "-Xmx384m", "-cp", f"{REST_CLASSPATH}/*", str(LAUNCHER)],
                    self.rest_port, env, timeout)

    def _spawn(self, name: str, command: list[str], port: int, env: dict[str, str], timeout: float) -> None:
        from eqdelete._processes import die_with_parent

        log = self.root / f"{name.replace(' ', '-').lower()}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env},
                                       cwd=self.root, start_new_session=True, preexec_fn=die_with_parent)  # noqa: PLW1509
        self._processes.append((name, process, log))
        deadline = time.monotonic() + timeout
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                why = f"exited with {process.returncode}" if process.poll() is not None else f"did not listen in {timeout:.0f} s"
                raise LakehouseError(f"{name} {why} on 127.0.0.1:{port}; its log {log} ends:\n"
                                     + log.read_text(errors="replace")[-3000:])
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop both servers (SIGTERM, then SIGKILL after 20 s), the catalog first."""
        while self._processes:
            _, process, _ = self._processes.pop()
            stop_group(process, grace=20)

    def __enter__(self) -> Lakehouse:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def requests_log(self) -> Path:
        """s3proxy's log: with ``log_requests``, a line per request."""
        return self.root / "s3proxy.log"

    def object_key(self, location: str) -> str:
        """``bucket/key`` of an ``s3://`` location, as pyarrow's filesystem names it."""
        if not location.startswith("s3://"):
            raise ValueError(f"{location} is not on the object store")
        return location[len("s3://"):]


def committed_to(spark: Any, table: str) -> bool:
    """Whether ``catalog.namespace.table`` exists with a snapshot. Listed, not queried: a query of a
    table not there yet logs an error each time."""
    catalog, namespace, name = table.split(".")
    if namespace not in [r[0] for r in spark.sql(f"SHOW NAMESPACES IN {catalog}").collect()]:
        return False
    if name not in [r.tableName for r in spark.sql(f"SHOW TABLES IN {catalog}.{namespace}").collect()]:
        return False
    # Refreshed: a catalog caching the table (Iceberg's caches it until unused for 30 s) would
    # otherwise show the snapshots it had when first asked, none, for as long as it is asked.
    spark.sql(f"REFRESH TABLE {table}")
    return spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0] > 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--pins"]:  # for scripts/setup.sh: the jars, by coordinates
        print(f"jar {S3PROXY}")
        return 0
    if argv[:1] == ["--rest-pom"]:
        print(rest_pom(), end="")
        return 0
    print("usage: lakehouse.py --pins | --rest-pom (python -m eqdelete lakehouse runs the servers)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

