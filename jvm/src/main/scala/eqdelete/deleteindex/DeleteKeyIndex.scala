package eqdelete.deleteindex

import org.apache.spark.sql.types.DataType

/**
 * The delete rows of one equality set, built on the driver for the filter strategy:
 * (scope, key) -> the newest (largest) delete sequence number, global deletes under scope -1.
 * For a fixed key and scope only the newest delete matters, so this is exact. Keys compare
 * with NULL equal to NULL, as Iceberg's delete sets do.
 */
abstract class DeleteKeyIndex private[deleteindex] () extends Serializable {
  protected var hasGlobal = false
  protected var scoped = false

  /** Whether some delete is partition-scoped; if not, lookups need no scope. */
  def hasScoped: Boolean = scoped
  def distinctKeys: Int

  final def add(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = {
    noteScope(scope, sequenceNumber)
    put(scope, values, sequenceNumber)
  }

  protected final def noteScope(scope: Long, sequenceNumber: Long): Unit = {
    // Sequence numbers of delete files start at 1; 0 marks an empty slot in the tables.
    require(sequenceNumber > 0, s"delete sequence number $sequenceNumber")
    if (scope == DeleteKeyIndex.GlobalScope) hasGlobal = true else scoped = true
  }

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit

  /**
   * The newest delete of the key `values` (Catalyst values) in `scope` or globally, or NoDelete:
   * the interpreted lookup (generated code calls the subclasses' own).
   */
  def newestOf(scope: Long, values: Array[Any]): Long

  /**
   * Whether a delete row of `values` with `sequenceNumber` in `scope` is covered: this index
   * deletes the same key at the same or a newer sequence number, in that scope or globally.
   */
  final def covers(scope: Long, values: Array[Any], sequenceNumber: Long): Boolean = {
    val newest = newestOf(scope, values)
    newest != DeleteKeyIndex.NoDelete && sequenceNumber <= newest
  }

  /** Called once every key is added, before the index is shipped: it is read-only from then on. */
  def seal(): this.type = this

  override def toString: String = s"${getClass.getSimpleName}($distinctKeys keys)"
}

object DeleteKeyIndex {
  /** The scope whose keys delete in every scope (a delete file written under an unpartitioned spec). */
  val GlobalScope: Int = -1

  /** What `newest` returns when no delete row has the key. */
  val NoDelete: Long = Long.MinValue

  /**
   * A primitive table for one integral or floating-point key column (int, long, date,
   * timestamp, float, double; see [[KeyBits]]) whose delete files' sequence numbers are at most
   * `LongKeyIndex.MaxSequenceNumber` (`newestSequenceNumber`), sized up front for `records`
   * delete rows (an upper bound of its keys), else a general one.
   */
  def forKeyTypes(types: Seq[DataType], records: Long, newestSequenceNumber: Long): DeleteKeyIndex =
    if (isPrimitive(types, newestSequenceNumber)) new LongKeyIndex(records) else new HashedKeyIndex(types, records)

  /**
   * Bytes the index `forKeyTypes` builds for `records` delete rows takes at most, for sizing it
   * before reading any: exact for the primitive table, a guess for the length of strings and
   * binary values in the hashed one.
   */
  def estimatedBytes(types: Seq[DataType], records: Long, newestSequenceNumber: Long): Long =
    if (isPrimitive(types, newestSequenceNumber)) LongKeyIndex.bytesFor(records) else HashedKeyIndex.bytesFor(types, records)

  /** Whether `forKeyTypes` builds the primitive table. */
  def isPrimitive(types: Seq[DataType], newestSequenceNumber: Long): Boolean =
    primitive(types) && newestSequenceNumber <= LongKeyIndex.MaxSequenceNumber

  private def primitive(types: Seq[DataType]): Boolean = types match {
    case Seq(t) => LongKeyIndex.supports(t)
    case _ => false
  }
}

