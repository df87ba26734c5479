#!/usr/bin/env bash
# sbt with the project's settings: Maven Central only, no server, plain logs.
#   scripts/sbt.sh package            the extension jars (scripts/setup.sh runs this)
#   scripts/sbt.sh spark41/test       the Scala unit tests of one Spark line
#
# sbt's compiled output (build/sbt-target/<project>, project/target) is kept outside the checkout
# (EQDELETE_CACHE, default ~/.cache/eqdelete, in sbt-targets/), saved after each run that succeeds
# and copied into a checkout that has none: a fresh clone then compiles only what changed since
# (zinc compares every source by its hash, wherever the checkout is), not its ~150 sources from
# cold (~150 s of the Scala tests' stage on 2 cores).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
launcher=$(ls build/tools/sbt-launch-*.jar 2>/dev/null | head -1)
[ -n "$launcher" ] || { echo "no sbt launcher in build/tools: run scripts/setup.sh" >&2; exit 2; }

kept=${EQDELETE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eqdelete}/sbt-targets
outputs() { # sbt's output directories of this checkout, each with its name in the cache
  local dir
  for dir in build/sbt-target/*/; do [ -d "$dir" ] && echo "${dir%/} $(basename "$dir")"; done
  echo "project/target project"
}
if [ ! -d build/sbt-target ] && [ -d "$kept" ]; then
  echo "[sbt] sbt's compiled output from $kept (only what changed since is compiled)" >&2
  mkdir -p build/sbt-target
  for dir in "$kept"/*/; do
    [ -d "$dir" ] || continue  # none saved yet (an interrupted first save leaves only a hidden part)
    name=$(basename "$dir")
    if [ "$name" = project ]; then [ -d project/target ] || cp -a "$dir" project/target
    else cp -a "$dir" "build/sbt-target/$name"; fi
  done
fi

java -Xmx2g -Xss4m \
  -Dsbt.repository.config="$root/project/repositories" \
  -Dsbt.override.build.repos=true \
  -Dsbt.server.autostart=false -Dsbt.ci=true -Dsbt.log.noformat=true -Dsbt.supershell=false \
  -jar "$launcher" "$@" </dev/null

# Saved only after a run that succeeded (a failed compile's output is no better start).
mkdir -p "$kept"
while read -r dir name; do
  [ -d "$dir" ] || continue
  part=$(mktemp -d "$kept/.$name.XXXXXX")
  cp -a "$dir/." "$part"
  rm -rf "${kept:?}/$name"
  mv -T "$part" "$kept/$name" 2>/dev/null || rm -rf "$part"  # another run's may have got there first
done < <(outputs)
