"""Keep every table of a lakehouse resolved from one Spark application:
``maintain_tables(spark, "lake.db.*")`` and ``python -m eqdelete maintain --tables 'lake.db.*'``.

The service lists the tables the pattern names (``status``) at its start and every ``rescan``
seconds, so tables created meanwhile are picked up and dropped ones let go. Each table gets a
round (``maintain_round``, the same as ``maintain TABLE`` runs) every interval: its
``eqdelete.maintain.interval-seconds`` table property, or the service's. At most
``concurrency`` rounds run at once, each on a thread of its own whose Spark jobs run beside the
others'. Among the tables due, the one overdue longest plus lagging most, weighted by its debt
(native's estimated cost over the floor, from ``status``), goes first; a table with a small debt
still rises as it waits, so a big one never starves the rest.
A table whose round fails (dropped, a delete file lost, a catalog error) is reported and tried
again after a wait that doubles with each failure in a row (up to ``max_backoff``); the others
go on. A table whose ``eqdelete.maintain.enabled`` property is false is let be. Each round reads
the table's current metadata first, so a property changed meanwhile counts at its next round.

One table wants one ``maintain``: the service claims each table before its round
(``MaintainLease``: a small file beside the table's kept state, renewed each round), and a table
another process renewed within three of its intervals plus a minute is left to it (``held``,
said once) and taken over once that one stops renewing it. Its leases go when it stops.

Nothing of this schedule needs keeping: after a restart it starts from the tables as they are
(their lag is in their metadata), so the service holds no state of its own.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Optional

from pyspark.sql import SparkSession

from eqdelete import _jvm, _remote
from eqdelete.errors import CommitOutcomeUnknownError, one_line
from eqdelete.maintain import MaintainRound, RoundStops, maintain_round
from eqdelete.status import TableStatus, status


@dataclass
class TableService:
    """What the service did for one table, and where it stands in the schedule."""

    table: str
    due: float                      # time.monotonic() at which its next round may start
    interval: Optional[float] = None  # its own interval (table property), None: the service's
    lag_seconds: float = 0.0
    debt: float = 1.0               # native's estimated cost of a read over the floor, from its last status
    rounds: int = 0
    rounds_committed: int = 0
    rows_resolved: int = 0
    failures: int = 0               # failed rounds in all
    failures_in_a_row: int = 0
    unknown_outcomes: int = 0
    last_error: Optional[str] = None
    longest_wait_seconds: float = 0.0  # the longest a due round waited for a free slot
    let_go: Optional[str] = None    # why the service stopped serving it (dropped, disabled)
    dropped: bool = False           # let go because it is gone: its kept state goes with it
    held_by: Optional[str] = None   # another maintain process that keeps it (its lease), while it does


@dataclass(frozen=True)
class ServiceEvent:
    """Something the service did that is not a round's result: a table picked up, let go, or failed."""

    table: str
    kind: str  # "picked up", "let go", "held", "failed"
    message: str

    def render(self) -> str:
        return f"{self.table}: {self.kind}: {self.message}"


@dataclass
class ServiceSummary:
    """What a ``maintain_tables`` run did, per table."""

    tables: dict[str, TableService] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def rounds(self) -> int:
        return sum(t.rounds for t in self.tables.values())

    @property
    def longest_wait_seconds(self) -> float:
        return max((t.longest_wait_seconds for t in self.tables.values()), default=0.0)

    def render(self) -> str:
        failed = [t for t in self.tables.values() if t.failures]
        lines = [f"maintained {len(self.tables)} table(s): {self.rounds} round(s), "
                 f"{sum(t.rounds_committed for t in self.tables.values())} committed, "
                 f"{sum(t.rows_resolved for t in self.tables.values()):,} row(s) resolved, "
                 f"{sum(t.failures for t in failed)} failed round(s) on {len(failed)} table(s), "
                 f"longest wait for a slot {self.longest_wait_seconds:.1f} s; {self.seconds:.0f} s"]
        for t in sorted(self.tables.values(), key=lambda t: t.table):
            state = (f"let go ({t.let_go})" if t.let_go else f"held by another maintain ({t.held_by})" if t.held_by
                     else f"lag {t.lag_seconds:.1f} s")
            error = f", last error: {t.last_error}" if t.failures else ""
            lines.append(f"  {t.table}: {t.rounds} round(s), {t.rounds_committed} committed, {t.rows_resolved:,} row(s), "
                         f"{t.failures} failure(s){error}; {state}")
        return "\n".join(lines)


def maintain_tables(
    spark: SparkSession,
    tables: str,
    *,
    interval: float = 60.0,
    concurrency: int = 2,
    rescan: float = 60.0,
    max_backoff: float = 900.0,
    stop: Optional[threading.Event] = None,
    on_round: Optional[Callable[[MaintainRound], None]] = None,
    on_event: Optional[Callable[[ServiceEvent], None]] = None,
) -> ServiceSummary:
    """Keep every table ``tables`` names resolved (a pattern as ``status`` takes), until ``stop``
    is set; rounds under way then stop at their next step (``RoundStops``), a commit being sent finishing. ``on_round`` gets each round's result, ``on_event``
    each table picked up, let go or failed. Returns what it did per table."""
    if interval < 0 or rescan <= 0 or max_backoff < 0:
        raise ValueError(f"interval and max_backoff must be zero or more and rescan more than zero seconds, "
                         f"not {interval}, {max_backoff}, {rescan}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, not {concurrency}")
    stop = stop or threading.Event()
    started = time.monotonic()
    summary = ServiceSummary()
    served: dict[str, TableService] = {}
    running: dict[Future, tuple[TableService, float]] = {}

    def every(table: TableService) -> float:
        """The table's interval: its own property's, else the service's."""
        return table.interval if table.interval is not None else interval

    def tell(table: str, kind: str, message: str) -> None:
        if on_event is not None:
            on_event(ServiceEvent(table, kind, message))

    def forget_index(table: TableService) -> None:
        """Its kept index of the live rows, if any, leaves the executors' disks; its checkpoints stay
        for the next start, unless the table is gone (dropped or renamed away), whose state goes with it."""
        if not _remote.is_remote(spark):
            _jvm.forget_kept_indexes(spark, table.table, checkpoints=table.dropped)

    def let_go(table: TableService, why: str, dropped: bool = False) -> None:
        table.let_go = why
        table.dropped = dropped
        served.pop(table.table, None)
        if not any(t is table for t, _ in running.values()):  # else once its round ends (finish)
            forget_index(table)
        tell(table.table, "let go", why)

    def fail(table: TableService, error: BaseException) -> None:
        table.failures += 1
        table.failures_in_a_row += 1
        table.last_error = one_line(error)
        backoff = min(max_backoff, max(1.0, every(table)) * 2 ** (table.failures_in_a_row - 1))
        table.due = time.monotonic() + backoff
        tell(table.table, "failed", f"{table.last_error}; tried again in {backoff:.0f} s")

    def look() -> None:
        listed: list[TableStatus] = status(spark, tables)
        names = {s.table for s in listed}
        for name in [n for n in served if n not in names]:
            if not any(t is served[name] for t, _ in running.values()):
                let_go(served[name], "no longer listed (dropped or renamed)", dropped=True)
        for s in listed:
            known = served.get(s.table)
            if not s.maintain_enabled and s.error is None:
                if known is not None:
                    let_go(known, "eqdelete.maintain.enabled=false")
                continue
            if known is None:
                known = summary.tables.get(s.table)
                if known is None or known.let_go:
                    known = TableService(s.table, due=time.monotonic())
                    summary.tables[s.table] = known
                    tell(s.table, "picked up", s.next if s.error is None else f"error: {s.error}")
                known.let_go = None
                served[s.table] = known
            known.interval = None if s.interval_seconds is None else float(s.interval_seconds)
            if s.error is None:
                known.lag_seconds, known.debt = s.lag_seconds, s.native_over_floor

    def round_of(table: TableService) -> tuple[TableStatus, Optional[MaintainRound], Optional[str]]:
        """Its status from the table's current metadata, then its round unless its properties now
        say to let it be (a property changed since the last look counts at this round) or another
        maintain process holds it (who). Its jobs in a job group of its own, named after the table
        in Spark's UI, which a stop cancels."""
        with stops.round(table.table):
            [now] = status(spark, table.table)
            if now.error is None and not now.maintain_enabled:
                return now, None, None
            if leases:
                held = _jvm.claim_maintain_lease(spark, table.table, holder, 3 * max(1.0, every(table)) + 60)
                if held is not None:
                    return now, None, held
            return now, maintain_round(spark, table.table, keep_index=True), None

    def finish(future: Future) -> None:
        table, began = running.pop(future)
        if table.let_go:
            forget_index(table)
        try:
            now, result, held = future.result()
        except CommitOutcomeUnknownError as error:  # the next round settles it
            table.rounds += 1
            table.unknown_outcomes += 1
            table.due = began + every(table)
            tell(table.table, "failed", f"{error}")
        except Exception as error:  # noqa: BLE001 - one table's failure never stops the others
            table.rounds += 1
            fail(table, error)
        else:
            if now.error is None:
                table.interval = None if now.interval_seconds is None else float(now.interval_seconds)
            if held is not None:  # another process keeps it: asked again next interval
                if table.held_by is None:
                    tell(table.table, "held", f"by another maintain ({held}); taken over once it stops renewing its lease")
                table.held_by = held
                table.due = began + every(table)
                return
            if table.held_by is not None:
                tell(table.table, "picked up", f"the other maintain let it go ({table.held_by})")
                table.held_by = None
            if result is None:  # no round ran
                if not table.let_go:
                    let_go(table, "eqdelete.maintain.enabled=false")
                return
            table.rounds += 1
            table.failures_in_a_row = 0
            table.rounds_committed += result.committed
            table.rows_resolved += result.rows_resolved
            table.lag_seconds = result.lag_seconds
            table.due = began + every(table)
            if on_round is not None:
                on_round(result)

    next_look = started
    stops = RoundStops(spark, stop)
    # Leases live beside the tables' kept state, which a Spark Connect client does not reach.
    leases = not _remote.is_remote(spark)
    holder = f"{socket.gethostname()}:{os.getpid()}:{spark.sparkContext.applicationId}" if leases else ""
    with stops, ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="eqdelete-maintain") as pool:
        while not stop.is_set():
            now = time.monotonic()
            if now >= next_look:
                try:
                    look()
                except Exception as error:  # noqa: BLE001 - a catalog that does not answer now may later
                    tell(tables, "failed", f"listing the tables failed: {one_line(error)}")
                next_look = now + rescan
            busy = {id(t) for t, _ in running.values()}
            due = [t for t in served.values() if id(t) not in busy and t.due <= now]
            # Overdue plus lagging, weighted by debt: the most urgent first; a table with a small debt
            # still rises as it waits, so none waits behind a big one for long.
            due.sort(key=lambda t: ((now - t.due) + t.lag_seconds) * max(1.0, t.debt), reverse=True)
            for table in due[:concurrency - len(running)]:
                table.longest_wait_seconds = max(table.longest_wait_seconds, now - table.due)
                running[pool.submit(round_of, table)] = (table, now)
            busy = {id(t) for t, _ in running.values()}
            free = len(running) < concurrency
            waiting = [t.due for t in served.values() if free and id(t) not in busy] + [next_look]
            timeout = max(0.05, min(waiting) - time.monotonic())
            if running:
                done, _ = wait(list(running), timeout=timeout, return_when=FIRST_COMPLETED)
                for future in done:
                    finish(future)
            else:
                stop.wait(timeout)
        done, _ = wait(list(running))  # rounds under way end at their next step (stops), a commit being sent finishes
        for future in done:
            finish(future)
    for table in summary.tables.values():
        forget_index(table)
        if leases and not table.dropped:
            _jvm.release_maintain_lease(spark, table.table, holder)
    summary.seconds = time.monotonic() - started
    return summary
