package eqdelete.commit

/**
 * A commit whose outcome the table could not show: it may have landed or may yet. Nothing it
 * wrote was deleted, so the table is readable either way; running the operation again settles it.
 */
final class CommitOutcomeUnknownException(message: String, val startingSnapshotId: Long, cause: Throwable)
  extends RuntimeException(message, cause)
