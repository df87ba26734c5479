package eqdelete.planning

import java.nio.ByteBuffer
import java.util.{ArrayList => JArrayList, HashMap => JHashMap, UUID}

/**
 * The delete rows of one equality set, held on the driver for the filter strategy:
 * (scope, key) -> the largest delete sequence number, global deletes under scope -1. For a
 * fixed key and scope only the largest sequence number matters, so this is exact.
 * Keys compare with NULL equal to NULL, as Iceberg's delete sets do.
 */
final class DeleteKeyIndex(val rows: Long) extends Serializable {
  private val id = UUID.randomUUID().toString
  private val maxSequence = new JHashMap[JArrayList[Any], java.lang.Long]()

  def add(scope: Long, keys: Array[Any], sequenceNumber: Long): Unit = {
    val key = DeleteKeyIndex.key(scope, keys)
    val previous = maxSequence.get(key)
    if (previous == null || previous < sequenceNumber) maxSequence.put(key, sequenceNumber)
  }

  def distinctKeys: Int = maxSequence.size

  /** Whether a row of a data file with this scope and sequence number is deleted. */
  def isDeleted(scope: Long, dataSequence: Long, keys: Array[Any]): Boolean = {
    def deletedUnder(s: Long): Boolean = {
      val seq = maxSequence.get(DeleteKeyIndex.key(s, keys))
      seq != null && dataSequence < seq
    }
    deletedUnder(DeletePlan.GlobalScope) || deletedUnder(scope)
  }

  override def equals(other: Any): Boolean = other match {
    case that: DeleteKeyIndex => that.id == id
    case _ => false
  }
  override def hashCode(): Int = id.hashCode
  override def toString: String = s"DeleteKeyIndex($distinctKeys keys)"
}

object DeleteKeyIndex {
  private def key(scope: Long, keys: Array[Any]): JArrayList[Any] = {
    val key = new JArrayList[Any](keys.length + 1)
    key.add(scope)
    keys.foreach {
      case bytes: Array[Byte] => key.add(ByteBuffer.wrap(bytes)) // arrays compare by reference
      case value => key.add(value)
    }
    key
  }
}
