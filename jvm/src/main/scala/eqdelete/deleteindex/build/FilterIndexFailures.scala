package eqdelete.deleteindex.build

import eqdelete.deleteindex.IndexCapacityException
import eqdelete.planning.EqualityDeleteSet

/** The driver ran out of memory building a filter index; the query fails, the session stays. */
final class FilterIndexMemoryException(set: EqualityDeleteSet, estimatedBytes: Long, cause: OutOfMemoryError)
  extends RuntimeException(
    s"eqdelete: the driver ran out of memory building the filter strategy's index of ${set.records} delete " +
      s"row(s) on ${set.describeKeys} (estimated ${estimatedBytes >> 20} MB); use spark.eqdelete.strategy=join, " +
      "unset spark.eqdelete.filter.force, or give the driver more memory", cause)

/** The delete keys do not fit one filter index; the query fails saying so, the session stays. */
final class FilterIndexCapacityException(set: EqualityDeleteSet, cause: IndexCapacityException)
  extends RuntimeException(
    s"eqdelete: the filter strategy's index of ${set.records} delete row(s) on ${set.describeKeys} cannot be " +
      s"built: ${cause.getMessage}; use spark.eqdelete.strategy=join or unset spark.eqdelete.filter.force", cause)
