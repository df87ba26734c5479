package eqdelete.deleteindex

/** The delete keys do not fit one index, however much memory there is: the query should take the join. */
final class IndexCapacityException(message: String) extends RuntimeException(message)
