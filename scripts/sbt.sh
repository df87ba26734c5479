#!/usr/bin/env bash
# sbt with the project's settings: Maven Central only, no server, plain logs.
#   scripts/sbt.sh package            the extension jars (scripts/setup.sh runs this)
#   scripts/sbt.sh spark41/test       the Scala unit tests of one Spark line
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
launcher=$(ls build/tools/sbt-launch-*.jar 2>/dev/null | head -1)
[ -n "$launcher" ] || { echo "no sbt launcher in build/tools: run scripts/setup.sh" >&2; exit 2; }
exec java -Xmx2g -Xss4m \
  -Dsbt.repository.config="$root/project/repositories" \
  -Dsbt.override.build.repos=true \
  -Dsbt.server.autostart=false -Dsbt.ci=true -Dsbt.log.noformat=true -Dsbt.supershell=false \
  -jar "$launcher" "$@" </dev/null
