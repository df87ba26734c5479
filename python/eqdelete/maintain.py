"""Keep a live table resolved while its writer commits: ``maintain`` runs rounds until stopped,
each resolving the equality deletes committed since the last (position deletes on format v2,
deletion vectors on v3), so readers that do not apply equality deletes well (Trino, DuckDB,
pyiceberg, Spark without eqdelete) see them minutes or seconds after the writer wrote them.

A round runs on the JVM (``eqdelete.maintain.MaintainRound``; over Spark Connect as
``CALL eqdelete.system.maintain(table => ...)``): it resolves, starts again from the newest
snapshot after a conflicting commit (waiting longer each time, ``spark.eqdelete.maintain.*``),
compacts piled-up position delete files on format v2, and reports the lag: the age of the oldest
equality delete still live. The loop is here, so a process that is told to stop (``stop`` set, or
SIGTERM/SIGINT in ``python -m eqdelete maintain``) stops the round under way at its next step,
its Spark jobs cancelled and what it had not sent for commit deleted, but never inside a commit.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Callable, Optional

from pyspark.sql import SparkSession

from eqdelete import _jvm, _remote
from eqdelete.config import PROCEDURE_CATALOG
from eqdelete.errors import CommitOutcomeUnknownError


@dataclass(frozen=True)
class MaintainRound:
    """What one round of ``maintain`` did.

    ``snapshot_id`` is its resolve's commit, None when nothing was committed: nothing was left to
    resolve, or every one of its ``attempts`` conflicted with a concurrent commit (``conflicts``
    counts the attempts that did; ``gave_up`` says all did). The round then left the table as it
    was. ``compaction_conflicted`` says the compaction of position delete files lost to a
    concurrent commit (the next round tries again); ``last_conflict`` is the last conflict's message. ``equality_delete_files_live`` and ``lag_seconds`` describe the table after the
    round: the equality delete files still live (those the writer committed meanwhile) and the age
    of the oldest of them, from its commit (0 when none is live). ``commit_note`` says what the
    client saw of a commit that landed although its answer was lost, or of a compaction whose
    outcome is unknown (None when neither happened). ``deferred`` says why the round left the live
    equality deletes to a later one (fewer than the table's ``eqdelete.maintain.min-equality-delete-files``),
    or data files due for compaction past the hour's byte budget. ``data_files_compacted`` data files
    whose deletes removed ``spark.eqdelete.maintain.compactDataDeadRatio`` of their rows were
    rewritten (``data_bytes_rewritten`` bytes) into ``data_files_written``, when
    ``spark.eqdelete.maintain.compactDataBytesPerHour`` allows it. A round of a long-running
    ``maintain`` finds the rows through the table's kept index of its live rows where that costs
    less than reading the data files (``spark.eqdelete.maintain.liveIndex``, auto):
    ``data_files_read`` are then only the files it read to come up to date,
    ``live_index_entries`` and ``live_index_bytes`` its size after the round, and
    ``live_index_note`` says when it was built from the table (and why), restored from a saved
    version (a restart), when the round read the data files instead (and why), or when a saved
    version could not be loaded; ``live_index_checkpoint_bytes`` the bytes the round wrote to
    durable storage for it, ``live_index_stored_bytes`` what its current version takes there
    (``spark.eqdelete.state.location``). ``stopped_at`` names the
    step at which a stop (``RoundStops``: SIGTERM to ``python -m eqdelete maintain``) ended the
    round: what it committed before that step stands, what it had not sent for commit is gone.
    """

    table: str
    starting_snapshot_id: int
    snapshot_id: Optional[int]
    attempts: int
    conflicts: int
    compaction_conflicted: bool
    last_conflict: Optional[str]
    equality_delete_files_removed: int
    rows_resolved: int
    data_files_read: int
    position_delete_files_written: int
    deletion_vectors_written: int
    position_delete_files_compacted: int
    compaction_files_written: int
    equality_delete_files_live: int
    lag_seconds: float
    seconds: float
    commit_note: Optional[str] = None
    deferred: Optional[str] = None
    data_files_compacted: int = 0
    data_files_written: int = 0
    data_bytes_rewritten: int = 0
    live_index_entries: int = 0
    live_index_bytes: int = 0
    live_index_note: Optional[str] = None
    stopped_at: Optional[str] = None
    live_index_checkpoint_bytes: int = 0
    live_index_stored_bytes: int = 0

    @property
    def live_index_bytes_per_key(self) -> Optional[float]:
        """The kept index's bytes per entry after the round; None without one."""
        return self.live_index_bytes / self.live_index_entries if self.live_index_entries else None

    @property
    def committed(self) -> bool:
        return self.snapshot_id is not None

    @property
    def gave_up(self) -> bool:
        """Every attempt conflicted: nothing was committed, the next round starts over."""
        return self.attempts > 0 and self.conflicts >= self.attempts

    def _deferred(self, *, resolving: bool) -> str:
        """What the round left to a later one: its resolve, or its data compaction."""
        parts = (self.deferred or "").split("; ") if self.deferred else []
        return "; ".join(p for p in parts if p.startswith("data compaction") != resolving)

    def render(self) -> str:
        """One line: what the round resolved, its conflicts and the lag after it."""
        if self.committed:
            written = (f"{self.deletion_vectors_written:,} deletion vector(s)" if self.deletion_vectors_written
                       else f"{self.position_delete_files_written:,} position delete file(s)")
            did = (f"resolved {self.rows_resolved:,} row(s) of {self.equality_delete_files_removed:,} equality delete "
                   f"file(s) into {written}, snapshot {self.snapshot_id}")
        elif self._deferred(resolving=True):
            did = f"resolve deferred: {self._deferred(resolving=True)}"
        elif self.gave_up:
            did = f"committed nothing: all {self.attempts} attempt(s) conflicted"
        else:
            did = "nothing to resolve"
        compacted = (f"; compacted {self.position_delete_files_compacted:,} position delete file(s) into "
                     f"{self.compaction_files_written:,}" if self.position_delete_files_compacted else "")
        if self.data_files_compacted:
            compacted += (f"; rewrote {self.data_files_compacted:,} data file(s) past the dead-row share "
                          f"({self.data_bytes_rewritten / 1e6:,.1f} MB) into {self.data_files_written:,}")
        conflicts = f"; {self.conflicts} conflict(s), retried" if self.conflicts and self.committed else ""
        if self.compaction_conflicted:
            conflicts += "; the compaction conflicted, left to the next round"
        if self.commit_note:
            conflicts += f"; {self.commit_note}"
        if self._deferred(resolving=False):
            conflicts += f"; {self._deferred(resolving=False)}"
        if self.live_index_note:
            conflicts += f"; live index {self.live_index_note}"
        if self.live_index_entries:
            conflicts += (f"; {self.data_files_read:,} data file(s) read, live index {self.live_index_entries:,} keys "
                          f"({self.live_index_bytes_per_key:.1f} bytes each)")
        if self.stopped_at:
            conflicts += f"; stopped at: {self.stopped_at}"
        return (f"{self.table}: {did}{compacted}{conflicts}; {self.equality_delete_files_live:,} equality delete file(s) "
                f"live, lag {self.lag_seconds:.1f} s; {self.seconds:.1f} s")

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class MaintainSummary:
    """What a ``maintain`` run did over all its rounds."""

    table: str
    rounds: int
    rounds_committed: int
    rows_resolved: int
    conflicts: int
    rounds_without_commit_after_conflicts: int
    last_lag_seconds: float
    seconds: float
    unknown_outcomes: int = 0
    last_unknown_outcome: Optional[str] = None

    def render(self) -> str:
        unknown = (f", {self.unknown_outcomes} round(s) whose commit's outcome is unknown (nothing deleted)"
                   if self.unknown_outcomes else "")
        return (f"maintained {self.table}: {self.rounds} round(s), {self.rounds_committed} committed, "
                f"{self.rows_resolved:,} row(s) resolved, {self.conflicts} conflict(s) "
                f"({self.rounds_without_commit_after_conflicts} round(s) left to the next after them){unknown}, "
                f"lag {self.last_lag_seconds:.1f} s at the end; {self.seconds:.0f} s")


class RoundStops:
    """Stops the rounds under way once ``stop`` is set, rather than letting them run to their end.

    Each round runs in a Spark job group of its own (``with stops.round(table):``). A watcher
    thread asks the JVM to stop every group still running (``eqdelete.maintain.RoundStop``): its
    jobs are cancelled and the round ends at its next step, deleting what it had not sent for
    commit; a commit being sent finishes. It asks again each second while they run, for a job
    started between two asks. Over Spark Connect rounds are not stopped: ``stop`` is seen between
    them."""

    def __init__(self, spark: SparkSession, stop: threading.Event) -> None:
        self._spark, self._stop = spark, stop
        self._groups: set[str] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="eqdelete-round-stops", daemon=True)
        if not _remote.is_remote(spark):
            self._watcher.start()

    @contextlib.contextmanager
    def round(self, table: str) -> Iterator[None]:
        """The calling thread's Spark jobs in the round's own job group, for as long as the block runs."""
        if _remote.is_remote(self._spark):
            yield
            return
        group = f"eqdelete-maintain-{uuid.uuid4().hex}"
        # interruptOnCancel: a task that is cancelled stops at once, not at its end.
        self._spark.sparkContext.setJobGroup(group, f"eqdelete maintain {table}", interruptOnCancel=True)
        with self._lock:
            self._groups.add(group)
        try:
            yield
        finally:
            with self._lock:
                self._groups.discard(group)
            _jvm.clear_job_group(self._spark)

    def _watch(self) -> None:
        while not self._closed.wait(1.0 if self._stop.is_set() else 0.2):
            if not self._stop.is_set():
                continue
            with self._lock:
                groups = list(self._groups)
            for group in groups:
                with contextlib.suppress(Exception):  # the JVM going down: nothing left to stop
                    _jvm.stop_round(self._spark, group)

    def close(self) -> None:
        self._closed.set()

    def __enter__(self) -> RoundStops:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def maintain_round(spark: SparkSession, table: str, *, keep_index: bool = False) -> MaintainRound:
    """Run one round on ``table``: resolve its live equality deletes (retrying after conflicts),
    compact piled-up position delete files (format v2), and report the lag. A delete file that
    cannot be read raises ``ResolveFailedError``, a commit whose outcome the table cannot show
    ``CommitOutcomeUnknownError`` (nothing deleted: the next round settles it); a round whose every
    attempt conflicted returns with ``committed`` False and the table as it was. ``keep_index``: the
    round is one of many, and keeps the table's index of its live rows on the executors for the
    next (as ``maintain`` does); over Spark Connect a round keeps nothing."""
    if not isinstance(table, str) or not table.strip():
        raise ValueError(f"table must name an Iceberg table, not {table!r}")
    if _remote.is_remote(spark):
        raw = _remote.call(spark, f"{PROCEDURE_CATALOG}.system.maintain", table=table)
    else:
        raw = _jvm.maintain_round(spark, table, keep_index)
    return MaintainRound(**{f.name: raw[f.name] for f in fields(MaintainRound)})


def maintain(
    spark: SparkSession,
    table: str,
    *,
    interval: float = 60.0,
    rounds: Optional[int] = None,
    stop: Optional[threading.Event] = None,
    on_round: Optional[Callable[[MaintainRound], None]] = None,
    on_unknown: Optional[Callable[[CommitOutcomeUnknownError], None]] = None,
) -> MaintainSummary:
    """Keep ``table`` resolved: run a round (``maintain_round``), wait ``interval`` seconds from
    its start, and again, until ``rounds`` rounds ran (None: no limit) or ``stop`` is set, which is
    also stops the round under way (``RoundStops``: at its next step, never inside a commit). ``on_round`` gets each round's
    result as it ends. A round whose commit's outcome is unknown goes to ``on_unknown`` and the
    loop goes on (the next round starts from the table as it is, so it settles it); the summary
    counts them. Any other error ends the loop. Returns what the rounds did in all."""
    if interval < 0:
        raise ValueError(f"interval must be zero or more seconds, not {interval}")
    if rounds is not None and rounds < 1:
        raise ValueError(f"rounds must be at least 1 or None, not {rounds}")
    stop = stop or threading.Event()
    started = time.monotonic()
    done: list[MaintainRound] = []
    unknown: list[CommitOutcomeUnknownError] = []
    # One round of a run keeps nothing: an index built for no next round costs more than it saves.
    keep_index = rounds != 1
    stops = RoundStops(spark, stop)
    try:
        while not stop.is_set() and (rounds is None or len(done) + len(unknown) < rounds):
            began = time.monotonic()
            try:
                with stops.round(table):
                    result = maintain_round(spark, table, keep_index=keep_index)
            except CommitOutcomeUnknownError as error:
                unknown.append(error)
                if on_unknown is not None:
                    on_unknown(error)
            else:
                done.append(result)
                if on_round is not None:
                    on_round(result)
            if rounds is not None and len(done) + len(unknown) >= rounds:
                break
            stop.wait(max(0.0, interval - (time.monotonic() - began)))
    finally:
        stops.close()
        if keep_index and not _remote.is_remote(spark):
            # The kept index leaves the executors' disks; a JVM already gone has nothing to free, and
            # the error that ended the loop is the one to raise.
            with contextlib.suppress(Exception):
                _jvm.forget_kept_indexes(spark, table)
    return MaintainSummary(
        table=done[-1].table if done else table,
        rounds=len(done) + len(unknown),
        rounds_committed=sum(r.committed for r in done),
        rows_resolved=sum(r.rows_resolved for r in done),
        conflicts=sum(r.conflicts + r.compaction_conflicted for r in done),
        rounds_without_commit_after_conflicts=sum(r.gave_up for r in done),
        last_lag_seconds=done[-1].lag_seconds if done else 0.0,
        seconds=time.monotonic() - started,
        unknown_outcomes=len(unknown),
        last_unknown_outcome=str(unknown[-1]) if unknown else None,
    )
