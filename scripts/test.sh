#!/usr/bin/env bash
# Set up (idempotent) and run every test. Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
exec .venv/bin/python -m pytest "$@"
