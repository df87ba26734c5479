#!/usr/bin/env bash
# Set up (idempotent) and run the main job on the embedded default catalog in ./warehouse.
# Extra arguments go to `python -m eqdelete demo` (see --help).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
exec .venv/bin/python -m eqdelete demo "$@"
