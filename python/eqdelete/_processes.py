"""Child processes that must not outlive the process that started them."""

from __future__ import annotations

import signal
import subprocess
import sys


def die_with_parent() -> None:
    """For ``subprocess.Popen(preexec_fn=...)``: in the child, before it execs, on Linux, ask for a
    SIGTERM when the process that started it dies, however it dies (SIGKILL included), so no
    server is left running behind a command or a test that was killed."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def stop_group(process: subprocess.Popen, grace: float) -> None:
    """Stop a server started with ``start_new_session=True``: SIGTERM to its process group (so
    a launcher's children go too, and the server may shut down cleanly), SIGKILL after ``grace``
    seconds. Nothing if it has already exited."""
    import os

    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def children() -> set[int]:
    """This process's child processes (on Linux; elsewhere none are known)."""
    import os
    from pathlib import Path

    found: set[int] = set()
    tasks = Path(f"/proc/{os.getpid()}/task")
    for task in tasks.iterdir() if tasks.is_dir() else ():
        try:
            found.update(int(child) for child in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue
    return found


def terminate_children(besides: set[int]) -> None:
    """SIGTERM to this process's child processes but ``besides`` (those it had before): a JVM
    pyspark is still starting, which would otherwise go on starting after this process exits (it
    watches its standard input only once it is up)."""
    import os

    for child in children() - besides:
        try:
            os.kill(child, signal.SIGTERM)
        except OSError:
            pass
