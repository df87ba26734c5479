"""Child processes that must not outlive the process that started them."""

from __future__ import annotations

import signal
import sys


def die_with_parent() -> None:
    """For ``subprocess.Popen(preexec_fn=...)``: in the child, before it execs, on Linux, ask for a
    SIGTERM when the process that started it dies, however it dies (SIGKILL included), so no
    server is left running behind a command or a test that was killed."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
