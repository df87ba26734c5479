package eqdelete.planning

import java.util.UUID

import org.apache.spark.unsafe.types.UTF8String

/**
 * Data file path -> (data sequence number, partition scope), looked up per row through the
 * `_file` metadata column. Equality is by identity (a random id) so Catalyst can compare and
 * hash expressions holding it cheaply, whatever its size.
 */
final class DataFileScopes(entries: Map[String, (Long, Int)]) extends Serializable {
  private val id = UUID.randomUUID().toString
  private val byPath: java.util.HashMap[UTF8String, Array[Long]] = {
    val map = new java.util.HashMap[UTF8String, Array[Long]](entries.size * 2)
    entries.foreach { case (path, (seq, scope)) => map.put(UTF8String.fromString(path), Array(seq, scope.toLong)) }
    map
  }

  def size: Int = entries.size

  /** The largest data sequence number of any file, or Long.MinValue for none. */
  val newestSequenceNumber: Long = if (entries.isEmpty) Long.MinValue else entries.valuesIterator.map(_._1).max

  private def lookup(path: UTF8String): Array[Long] = {
    val found = byPath.get(path)
    if (found == null) {
      // The scan read a file the planning did not see: never guess which deletes apply.
      throw new IllegalStateException(s"eqdelete: data file $path was not part of the delete planning")
    }
    found
  }

  def sequenceNumber(path: UTF8String): Long = lookup(path)(0)
  def scope(path: UTF8String): Long = lookup(path)(1)

  override def equals(other: Any): Boolean = other match {
    case that: DataFileScopes => that.id == id
    case _ => false
  }
  override def hashCode(): Int = id.hashCode
  override def toString: String = s"DataFileScopes(${entries.size} files)"
}
