#!/usr/bin/env bash
# Idempotent set-up on a machine with Java 17, Maven, Python 3.11 and pip, for every Spark line
# of the support matrix (python/eqdelete/matrix.txt):
#   1. a virtualenv per line with that line's pyspark, the eqdelete package (editable) and the
#      test dependencies: .venv for the primary line (the newest), build/venvs/spark-<line> else;
#   2. Iceberg's Spark runtime of every tested release for every line, Iceberg's API module of
#      the primary line's newest release (tests/test_source_layout.py checks that Iceberg classes
#      outside it are named only in the compat package), and SQLite's JDBC driver, in
#      build/deps, fetched by Maven coordinates;
#   3. sbt's launcher from Maven Central, resolving from Maven Central only;
#   4. one extension jar per line, build/jars/eqdelete-spark-<line>_<scala>-<version>.jar,
#      compiled against that line's pyspark jars and the oldest tested Iceberg release,
#      rebuilt only when a source changed;
#   5. the Flink virtualenv (build/venvs/flink) and Flink's jars (build/deps/flink) with which
#      python/eqdelete/tools/flink.py writes tables through Flink's Iceberg sink, the real producer of
#      equality deletes; the versions are that file's pins (its --pins), not repeated here;
#   6. the lakehouse's jars (build/deps/lakehouse): s3proxy, Iceberg's REST catalog server and
#      Iceberg's AWS bundle, pinned in python/eqdelete/tools/lakehouse.py;
#   7. a class archive of each line's Spark JVM (scripts/class_archive.py) in its virtualenv,
#      with which the tests' JVMs start faster.
# A second run does nothing heavy.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

SBT_LAUNCHER=org.scala-sbt:sbt-launch:1.11.7
MATRIX=python/eqdelete/matrix.txt
matrix_rows() { sed 's/#.*//' "$MATRIX" | awk 'NF'; }  # line scala iceberg...
PRIMARY_LINE=$(matrix_rows | awk '{line=$1} END {print line}')

CACHE=${EQDELETE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eqdelete}  # what set-up keeps outside the checkout
began=$SECONDS
log() { echo "[setup $((SECONDS - began)) s] $*" >&2; }

venv_of() { # Spark line -> its virtualenv
  if [ "$1" = "$PRIMARY_LINE" ]; then echo .venv; else echo "build/venvs/spark-$1"; fi
}

# 1. Python, one virtualenv per Spark line, filled by uv (itself installed by pip, from PyPI by
#    name, pinned here): it links the files of what it installs from its cache (~/.cache/uv), so a
#    fresh clone's virtualenvs take seconds where pip unpacked pyspark's 300-400 MB each time.
#    Each keeps pip (the wheel test builds and installs with it).
UV_PIN=uv==0.13.9
UV_HOME=$CACHE/tools/${UV_PIN/==/-}  # outside the checkout: a fresh clone finds it there
if [ ! -x "$UV_HOME/bin/uv" ]; then
  log "installing $UV_PIN into $UV_HOME"
  mkdir -p "$CACHE/tools"
  scratch=$(mktemp -d "$CACHE/tools/.uv.XXXXXX")
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --target "$scratch" "$UV_PIN"
  mv -T "$scratch" "$UV_HOME" 2>/dev/null || rm -rf "$scratch"  # another set-up may have put it there first
fi
uv() { "$UV_HOME/bin/uv" --quiet "$@"; }
# pyspark and apache-flink-libraries are published as sources only, and uv downloaded and built
# each again for every fresh virtualenv (400 MB fetched, a build, 1.4 GB more in its cache each
# time): each release is built once by pip into a wheel kept in the cache, which uv links.
WHEELS=$CACHE/wheels
wheel_of() { # package, exact version -> its wheel in $WHEELS, built the first time
  local name=${1//-/_} built
  built=$(ls "$WHEELS/$name-$2-"*.whl 2>/dev/null | head -1)
  if [ -z "$built" ]; then
    log "building a wheel of $1 $2 into $WHEELS (once)"
    mkdir -p "$WHEELS"
    local scratch
    scratch=$(mktemp -d "$WHEELS/.building.XXXXXX")
    python3 -m pip wheel --quiet --no-deps "$1==$2" -w "$scratch" >&2
    mv "$scratch"/*.whl "$WHEELS/" && rmdir "$scratch"
    built=$(ls "$WHEELS/$name-$2-"*.whl | head -1)
  fi
  echo "$built"
}
pyspark_of() { # Spark line -> what to install: the wheel of its newest release on the index; the
               # newest one built before when the index cannot say; else the requirement itself
  local newest
  newest=$(python3 -m pip index versions pyspark 2>/dev/null | sed -n 's/^Available versions: //p' | tr ',' '\n' |
    tr -d ' ' | grep -E "^${1//./\\.}\.[0-9]+$" | head -1 || true)
  if [ -z "$newest" ]; then
    newest=$(ls "$WHEELS"/pyspark-"$1".*.whl 2>/dev/null | sed 's/.*pyspark-\([^-]*\)-.*/\1/' | sort -V | tail -1 || true)
  fi
  if [ -n "$newest" ]; then wheel_of pyspark "$newest"; else echo "pyspark==$1.*"; fi
}
new_venv() { # path: a virtualenv of this machine's python3, with pip
  log "creating $1"
  mkdir -p "$(dirname "$1")"
  uv venv --seed --python "$(command -v python3)" "$1"
}
while read -r line scala icebergs; do
  venv=$(venv_of "$line")
  [ -x "$venv/bin/python" ] || new_venv "$venv"
  if [ ! -f "$venv/.installed" ] || [ pyproject.toml -nt "$venv/.installed" ]; then
    log "installing pyspark $line.x, the eqdelete package and its dependencies into $venv"
    extras="test"
    [ "$line" = "$PRIMARY_LINE" ] && extras="$extras,bench"
    [ "${line%%.*}" -ge 4 ] && extras="$extras,connect"  # the Connect tier runs on Spark 4.x
    uv pip install --python "$venv/bin/python" "$(pyspark_of "$line")" -e ".[$extras]"
    touch "$venv/.installed"
  fi
done < <(matrix_rows)

# 2. Maven jars, by coordinates.
# Maven's local repository (its default; another one set in settings.xml is found by Maven itself).
MAVEN_LOCAL=${MAVEN_LOCAL_REPOSITORY:-$HOME/.m2/repository}
fetch_jar() { # coordinates (group:artifact:version[:type:classifier]), output directory
  local coords=$1 out=$2 group artifact version classifier file local_copy
  group=$(echo "$coords" | cut -d: -f1)
  artifact=$(echo "$coords" | cut -d: -f2)
  version=$(echo "$coords" | cut -d: -f3)
  classifier=$(echo "$coords" | cut -s -d: -f5)
  file="$artifact-$version${classifier:+-$classifier}.jar"
  [ ! -f "$out/$file" ] || return 0
  # Already in Maven's local repository: copied from there, without starting Maven (~4 s each).
  local_copy="$MAVEN_LOCAL/${group//.//}/$artifact/$version/$file"
  if [ -s "$local_copy" ]; then
    mkdir -p "$out"
    cp "$local_copy" "$out/$file.part" && mv "$out/$file.part" "$out/$file"
    return 0
  fi
  log "fetching $coords"
  mvn --batch-mode --quiet -Dstyle.color=never dependency:copy -Dartifact="$coords" -DoutputDirectory="$out" \
    -Dmdep.overWriteIfNewer=true >&2
}
while read -r line scala icebergs; do
  for iceberg in $icebergs; do
    fetch_jar "org.apache.iceberg:iceberg-spark-runtime-${line}_${scala}:$iceberg" build/deps
  done
done < <(matrix_rows)
PRIMARY_ICEBERG=$(matrix_rows | awk '{iceberg=$NF} END {print iceberg}')
fetch_jar "org.apache.iceberg:iceberg-api:$PRIMARY_ICEBERG" build/deps
# The SQLite driver's coordinates are the Python package's (sessions name the same release).
fetch_jar "$(.venv/bin/python -c 'from eqdelete._jars import SQLITE_JDBC; print(SQLITE_JDBC)')" build/deps
fetch_jar "$SBT_LAUNCHER" build/tools

# 3 + 4. The extension jars, through sbt, only when a source is newer than the oldest jar; and
#    kept in a cache outside the checkout (EQDELETE_CACHE, default ~/.cache/eqdelete) by a hash of
#    what they are built from (the sources, the build's definition, the matrix, each line's pyspark
#    and the JDK), so a fresh clone of sources already built on this machine copies them (sbt's
#    start and three compiles, ~150 s).
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
jars=()
while read -r line scala icebergs; do jars+=("build/jars/eqdelete-spark-${line}_${scala}-$version.jar"); done \
  < <(matrix_rows)
stale=
for jar in "${jars[@]}"; do
  if [ ! -f "$jar" ] || [ -n "$(find jvm/src/main build.sbt project/build.properties "$MATRIX" -newer "$jar" -type f 2>/dev/null | head -1)" ]; then
    stale=1
  fi
done
if [ -n "$stale" ]; then
  built_from() {
    # Every source at any depth (a -maxdepth here once hashed none of them: a changed source then
    # got the jars of the sources before it), and sbt's own project files.
    { find jvm/src/main -type f; find project -maxdepth 1 -type f; } | LC_ALL=C sort | xargs sha256sum
    sha256sum build.sbt "$MATRIX" pyproject.toml
    while read -r line scala icebergs; do
      echo "$line $("$(venv_of "$line")/bin/python" -c 'import pyspark; print(pyspark.__version__)')"
    done < <(matrix_rows)
    java -version 2>&1
  }
  jar_cache="$CACHE/jars/$(built_from | sha256sum | cut -c1-24)"
  mkdir -p build/jars
  if [ -f "$jar_cache/.complete" ]; then
    log "extension jars of these sources from $jar_cache"
    for jar in "${jars[@]}"; do cp "$jar_cache/$(basename "$jar")" "$jar"; done
  else
    log "building ${jars[*]} with sbt"
    "$root/scripts/sbt.sh" package >&2
    mkdir -p "$jar_cache"
    cp "${jars[@]}" "$jar_cache/" && touch "$jar_cache/.complete"
  fi
  touch "${jars[@]}"
fi

# 7 (started here, in the background, finished at the end). A class archive per Spark line for
#    the tests' JVMs (scripts/class_archive.py, a 180 MB file in each virtualenv, which
#    tests/conftest.py hands to them): a test module of command-line runs took 189 s with it and
#    242 s without. It is valid for its virtualenv's jars (their paths, sizes and times: uv links
#    them from its cache, so a clone at the same path gets the same ones), so it is kept in the
#    cache by a hash of those; dumping one takes a session's run (~60 s). Without one the tests
#    run, only slower: a failed dump warns.
ARCHIVE=eqdelete-classes.jsa  # tests/conftest.py's CLASS_ARCHIVE
archive_key() { # virtualenv -> what its archive is valid for
  { realpath "$1"; find "$1"/lib/python*/site-packages/pyspark/jars -name '*.jar' -printf '%f %s %T@\n' | LC_ALL=C sort
    sha256sum scripts/class_archive.py; java -version 2>&1; } | sha256sum | cut -c1-24
}
link_or_copy() { ln -f "$1" "$2" 2>/dev/null || cp "$1" "$2"; }  # a hard link where both are on one file system
dumps=()
while read -r line scala icebergs; do
  venv=$(venv_of "$line")
  cached="$CACHE/class-archives/$(archive_key "$venv").jsa"
  if [ -f "$cached" ]; then
    [ "$venv/$ARCHIVE" -ef "$cached" ] || cmp -s "$cached" "$venv/$ARCHIVE" 2>/dev/null ||
      { rm -f "$venv/$ARCHIVE"; link_or_copy "$cached" "$venv/$ARCHIVE"; }
    touch "$cached"  # in use: pruned when unused for a week
    continue
  fi
  log "dumping Spark $line's class archive for the tests ($venv/$ARCHIVE), in the background"
  rm -f "$venv/$ARCHIVE"
  mkdir -p "$CACHE/class-archives"
  ( if "$venv/bin/python" scripts/class_archive.py "$venv/$ARCHIVE" > "$venv/$ARCHIVE.log" 2>&1; then
      link_or_copy "$venv/$ARCHIVE" "$cached.part" && mv "$cached.part" "$cached"
    else
      echo "[setup] WARNING: no class archive for Spark $line (the tests run, slower): $(tail -3 "$venv/$ARCHIVE.log")" >&2
    fi ) &
  dumps+=($!)
done < <(matrix_rows)
find "$CACHE/class-archives" -name '*.jsa' -mtime +7 -delete 2>/dev/null || true

# 5. Flink, for the tests' real producer (python/eqdelete/tools/flink.py, tests/lakehouse/test_flink_tables.py): a
#    virtualenv with the pinned apache-flink, and the pinned jars (Iceberg's Flink runtime, Hadoop's
#    client for the Hadoop catalog) by Maven coordinates. The marker holds the installed pin, so a
#    changed pin reinstalls and an unchanged one does nothing.
FLINK_VENV=build/venvs/flink
flink_pins=$(python3 python/eqdelete/tools/flink.py --pins)
flink_pip=$(echo "$flink_pins" | awk '$1 == "pip" {print $2}')
[ -x "$FLINK_VENV/bin/python" ] || new_venv "$FLINK_VENV"
if [ "$(cat "$FLINK_VENV/.installed" 2>/dev/null)" != "$flink_pip" ]; then
  log "installing $flink_pip into $FLINK_VENV"
  # apache-flink requires apache-flink-libraries of its own release.
  uv pip install --python "$FLINK_VENV/bin/python" "$flink_pip" "$(wheel_of apache-flink-libraries "${flink_pip##*==}")"
  echo "$flink_pip" > "$FLINK_VENV/.installed"
fi
for coords in $(echo "$flink_pins" | awk '$1 == "jar" {print $2}'); do
  fetch_jar "$coords" build/deps/flink
done
# 6. The lakehouse (python/eqdelete/tools/lakehouse.py, tests/lakehouse): s3proxy, Iceberg's REST
#    catalog server's classpath (a Maven project of its dependencies, copied once), and Iceberg's
#    AWS bundle (S3FileIO's SDK) for the oldest and newest Iceberg release of each Spark line (the
#    fault tier runs on the oldest pair too: Iceberg 1.10's commit differs from later releases').
LAKEHOUSE=build/deps/lakehouse
for coords in $(.venv/bin/python python/eqdelete/tools/lakehouse.py --pins | awk '$1 == "jar" {print $2}'); do
  fetch_jar "$coords" "$LAKEHOUSE"
done
while read -r line scala icebergs; do
  fetch_jar "org.apache.iceberg:iceberg-aws-bundle:${icebergs%% *}" "$LAKEHOUSE"
  fetch_jar "org.apache.iceberg:iceberg-aws-bundle:${icebergs##* }" "$LAKEHOUSE"
done < <(matrix_rows)
rest_pom=$(.venv/bin/python python/eqdelete/tools/lakehouse.py --rest-pom)
if [ "$(cat "$LAKEHOUSE/rest/.pom" 2>/dev/null)" != "$rest_pom" ]; then
  # Maven resolves them once per pom; a fresh clone copies them from the cache.
  rest_cache="$CACHE/lakehouse-rest/$(echo "$rest_pom" | sha256sum | cut -c1-24)"
  if [ ! -f "$rest_cache/.pom" ]; then
    log "fetching Iceberg's REST catalog server and its dependencies"
    rm -rf "$rest_cache"
    mkdir -p "$rest_cache"
    echo "$rest_pom" > "$rest_cache/../rest-pom.xml.$$"
    mvn --batch-mode --quiet -Dstyle.color=never -f "$rest_cache/../rest-pom.xml.$$" dependency:copy-dependencies \
      -DoutputDirectory="$rest_cache" -DincludeScope=runtime >&2
    rm -f "$rest_cache/../rest-pom.xml.$$"
    echo "$rest_pom" > "$rest_cache/.pom"
  fi
  rm -rf "$LAKEHOUSE/rest"
  mkdir -p "$LAKEHOUSE"
  cp -r "$rest_cache" "$LAKEHOUSE/rest"
fi
[ ${#dumps[@]} -eq 0 ] || { log "waiting for the class archives"; wait "${dumps[@]}"; }
log "ready"
