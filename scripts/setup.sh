#!/usr/bin/env bash
# Idempotent set-up on a machine with Java 17, Maven, Python 3.11 and pip:
#   1. a virtualenv in .venv with the eqdelete package (editable) and its dependencies;
#   2. the Iceberg Spark runtime and SQLite JDBC jars in build/deps, fetched by coordinates;
#   3. sbt's launcher from Maven Central, resolving from Maven Central only;
#   4. the extension jar build/jars/eqdelete.jar, rebuilt only when a source changed.
# A second run does nothing heavy.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

ICEBERG_RUNTIME=org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0
SQLITE_JDBC=org.xerial:sqlite-jdbc:3.50.3.0
SBT_LAUNCHER=org.scala-sbt:sbt-launch:1.11.7

log() { echo "[setup] $*" >&2; }

# 1. Python.
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  python3 -m venv .venv
fi
if [ ! -f .venv/.installed ] || [ pyproject.toml -nt .venv/.installed ]; then
  log "installing the eqdelete package and its dependencies"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[test,bench]"
  touch .venv/.installed
fi

# 2. Maven jars, by coordinates.
fetch_jar() { # coordinates, output directory
  local coords=$1 out=$2 artifact version
  artifact=$(echo "$coords" | cut -d: -f2)
  version=$(echo "$coords" | cut -d: -f3)
  if [ ! -f "$out/$artifact-$version.jar" ]; then
    log "fetching $coords"
    mvn --batch-mode --quiet -Dstyle.color=never dependency:copy -Dartifact="$coords" -DoutputDirectory="$out" \
      -Dmdep.overWriteIfNewer=true >&2
  fi
}
fetch_jar "$ICEBERG_RUNTIME" build/deps
fetch_jar "$SQLITE_JDBC" build/deps
fetch_jar "$SBT_LAUNCHER" build/tools

# 3 + 4. The extension jar, through sbt, only when a source is newer than the jar.
jar=build/jars/eqdelete.jar
if [ ! -f "$jar" ] || [ -n "$(find jvm build.sbt project/build.properties -newer "$jar" -type f 2>/dev/null | head -1)" ]; then
  log "building $jar with sbt"
  spark_jars=$(.venv/bin/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
  java -Xmx2g -Xss4m \
    -Dsbt.repository.config="$root/project/repositories" \
    -Dsbt.override.build.repos=true \
    -Dsbt.server.autostart=false -Dsbt.ci=true -Dsbt.log.noformat=true -Dsbt.supershell=false \
    -Deqdelete.sparkJars="$spark_jars" \
    -Deqdelete.icebergJars="$root/build/deps" \
    -jar "build/tools/sbt-launch-${SBT_LAUNCHER##*:}.jar" package </dev/null >&2
  touch "$jar"
fi
log "ready"
