package eqdelete.planning

import java.nio.charset.StandardCharsets
import java.util.UUID

import org.apache.spark.unsafe.types.UTF8String

/**
 * Data file path -> (data sequence number, partition scope), looked up per row through the
 * `_file` metadata column. Equality is by identity (a random id) so Catalyst can compare and
 * hash expressions holding it cheaply, whatever its size.
 *
 * It travels inside the scan's plan, so every read task deserializes it: it is shipped as flat
 * arrays (each path's UTF-8 bytes, and its two numbers), not as maps of objects, and each task
 * builds its lookup map on its first row.
 */
final class DataFileScopes private (
    paths: Array[Array[Byte]],
    values: Array[Long],
    /** The largest data sequence number of any file, or Long.MinValue for none. */
    val newestSequenceNumber: Long) extends Serializable {

  def this(entries: Map[String, (Long, Int)]) = this(
    entries.keys.toArray.map(_.getBytes(StandardCharsets.UTF_8)),
    entries.values.toArray.flatMap { case (seq, scope) => Array(seq, scope.toLong) },
    if (entries.isEmpty) Long.MinValue else entries.valuesIterator.map(_._1).max)

  private val id = UUID.randomUUID().toString

  val size: Int = paths.length

  @transient private lazy val byPath: java.util.HashMap[UTF8String, Array[Long]] = {
    val map = new java.util.HashMap[UTF8String, Array[Long]](paths.length * 2)
    paths.indices.foreach(i => map.put(UTF8String.fromBytes(paths(i)), Array(values(2 * i), values(2 * i + 1))))
    map
  }

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
  override def toString: String = s"DataFileScopes($size files)"
}
