package eqdelete.state

/**
 * A kept store could not be loaded from its checkpoint (a file of it missing or cut short): its
 * index is built again from the table; a caller that can do without it goes on without it.
 */
final class KeptStateLostException(message: String, cause: Throwable) extends RuntimeException(message, cause)
