"""Every error the package raises for what happened on the JVM side, in one module (the
modules that raise them import this one, never each other).

Each message is one line that says what happened, the table's state, and what to do."""

from __future__ import annotations

import re
from typing import Optional


class ExtensionNotLoadedError(RuntimeError):
    """The session has no eqdelete: its SQL functions and rule are not there."""


class ResolveConflictError(RuntimeError):
    """A commit made while resolving changed the files involved; nothing was committed."""


class ResolveFailedError(RuntimeError):
    """Resolving failed for another reason than a conflict (a delete file it could not read, a
    write to the object store that failed, a catalog it could not reach); nothing was committed."""


class CommitOutcomeUnknownError(RuntimeError):
    """A commit whose outcome the table could not show: it may have landed or may yet. Nothing it
    wrote was deleted, so the table reads right either way; running it again settles it."""


class ApplyChangesError(RuntimeError):
    """apply_changes cannot apply the changes to the copy as it is (a row the copy lacks, a NULL a
    NOT NULL column refuses, a change of an unknown type, a commit refused); nothing was committed."""


class ApplyConflictError(RuntimeError):
    """apply_changes lost every try to other writers' commits to the copy; nothing was committed."""


#: The JVM exception classes (their simple names) and the Python error each becomes.
_BY_JVM_CLASS = {
    "ResolveConflictException": ResolveConflictError,
    "ResolveFailedException": ResolveFailedError,
    "CommitOutcomeUnknownException": CommitOutcomeUnknownError,
    "ApplyRefusedException": ApplyChangesError,
    "ApplyConflictException": ApplyConflictError,
}
#: The same, told from the message alone (a Spark Connect server sends the message, not always the class).
_BY_MESSAGE = (
    (re.compile(r"eqdelete: resolving the equality deletes of \S+ conflicts with a commit"), ResolveConflictError),
    (re.compile(r"eqdelete: the commit resolving the equality deletes of \S+ has an unknown outcome"),
     CommitOutcomeUnknownError),
    (re.compile(r"eqdelete: (resolving the equality deletes of \S+ failed before its commit|"
                r"the commit resolving the equality deletes of \S+ failed)"), ResolveFailedError),
    (re.compile(r"eqdelete: the commit applying changes to \S+ has an unknown outcome"), CommitOutcomeUnknownError),
    (re.compile(r"eqdelete: applying changes to \S+ conflicted with other commits"), ApplyConflictError),
    (re.compile(r"eqdelete: (the changes delete \d+ row\(s\) that \S+ does not hold|the changes add a row with NULL in|"
                r"applying changes to \S+ failed:|apply_changes cannot apply a change of type)"), ApplyChangesError),
)


def from_jvm(class_name: str, message: str) -> Optional[RuntimeError]:
    """The Python error for a JVM exception of ``class_name`` with ``message``, or None."""
    error = _BY_JVM_CLASS.get(class_name.rsplit(".", 1)[-1].rsplit("$", 1)[-1])
    return error(message.strip()) if error is not None else None


def from_message(text: str) -> Optional[RuntimeError]:
    """The Python error for an error whose text carries one of eqdelete's messages, or None:
    the message itself, from its "eqdelete: " on, as one line."""
    for pattern, error in _BY_MESSAGE:
        found = pattern.search(text)
        if found is not None:
            line = text[found.start():].splitlines()[0].strip()
            return error(line)
    return None


def one_line(error: BaseException) -> str:
    """What went wrong, in one line: the JVM exception's own message for errors from Spark."""
    from py4j.protocol import Py4JJavaError

    if isinstance(error, Py4JJavaError):
        text = str(error.java_exception.toString())
    else:
        text = str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
