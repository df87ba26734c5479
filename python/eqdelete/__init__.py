"""eqdelete: fast Spark reads of Apache Iceberg tables that carry equality deletes.

>>> import eqdelete
>>> spark = eqdelete.session()                       # or:
>>> spark = eqdelete.configure(SparkSession.builder).getOrCreate()

The tools (``eqdelete.tools``: the command line, the CDC table generator, the benchmarks and
sweeps, the Flink writer) build on this API and are ``python -m eqdelete`` commands; the API
never imports them.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from eqdelete.changes import changes, changes_stream
from eqdelete.compare import Comparison, NoEqualityDeletesError, ResultsDifferError, compare
from eqdelete.config import STRATEGIES, RemoteSessionWarning, configure, session
from eqdelete.decisions import Decision, decisions, last_decisions
from eqdelete.deletes import Commit, write_equality_deletes
from eqdelete.errors import (
    ApplyChangesError,
    ApplyConflictError,
    CommitOutcomeUnknownError,
    ExtensionNotLoadedError,
    ResolveConflictError,
    ResolveFailedError,
)
from eqdelete.maintain import MaintainRound, MaintainSummary, maintain, maintain_round
from eqdelete.resolve import ResolveResult, resolve_equality_deletes
from eqdelete.service import ServiceEvent, ServiceSummary, maintain_tables
from eqdelete.sink import AppliedChanges, apply_changes, apply_changes_from
from eqdelete.status import TableStatus, status
from eqdelete.summary import TableSummary, summarize
from eqdelete.toggles import get_strategy, set_enabled, set_strategy, use_conf, use_strategy

try:
    __version__ = version("eqdelete")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"

__all__ = [
    "STRATEGIES",
    "AppliedChanges",
    "ApplyChangesError",
    "ApplyConflictError",
    "Commit",
    "CommitOutcomeUnknownError",
    "Comparison",
    "Decision",
    "ExtensionNotLoadedError",
    "MaintainRound",
    "MaintainSummary",
    "NoEqualityDeletesError",
    "RemoteSessionWarning",
    "ResolveConflictError",
    "ResolveFailedError",
    "ResolveResult",
    "ResultsDifferError",
    "ServiceEvent",
    "ServiceSummary",
    "TableStatus",
    "TableSummary",
    "__version__",
    "apply_changes",
    "apply_changes_from",
    "changes",
    "changes_stream",
    "compare",
    "configure",
    "decisions",
    "get_strategy",
    "last_decisions",
    "maintain",
    "maintain_round",
    "maintain_tables",
    "session",
    "resolve_equality_deletes",
    "set_enabled",
    "set_strategy",
    "status",
    "summarize",
    "use_conf",
    "use_strategy",
    "write_equality_deletes",
]
