package eqdelete.state

/**
 * A kept store could not be loaded from its checkpoint (a file of it missing, cut short, damaged, or
 * not reachable) or read where it is held: its index is built again from the table; a caller that
 * can do without it goes on without it.
 */
class KeptStateLostException(message: String, cause: Throwable) extends RuntimeException(message, cause)

/**
 * A kept store's bytes are wrong (a block whose checksum does not match, a file cut short): its
 * saved versions cannot be trusted either, where a store that could not be reached may be whole.
 */
final class KeptStateDamagedException(message: String, cause: Throwable) extends KeptStateLostException(message, cause)
