package eqdelete.planning

import java.nio.ByteBuffer
import java.util.{ArrayList => JArrayList, HashMap => JHashMap, UUID}

/**
 * The delete rows of one equality set, held on the driver for the filter strategy:
 * per scope, key -> the largest delete sequence number (global deletes under scope -1). For a
 * fixed key and scope only the largest sequence number matters, so this is exact. Keys
 * compare with NULL equal to NULL, as Iceberg's delete sets do. A single-column key is the
 * value itself; several columns make a list.
 */
final class DeleteKeyIndex(val columns: Int) extends Serializable {
  private val id = UUID.randomUUID().toString
  private val byScope = new JHashMap[java.lang.Long, JHashMap[Any, java.lang.Long]]()
  private var global: JHashMap[Any, java.lang.Long] = _
  private var keys = 0

  def add(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = {
    val map = byScope.computeIfAbsent(scope, _ => new JHashMap[Any, java.lang.Long]())
    if (scope == DeletePlan.GlobalScope) global = map
    val key = DeleteKeyIndex.key(values)
    val previous = map.get(key)
    if (previous == null) keys += 1
    if (previous == null || previous < sequenceNumber) map.put(key, sequenceNumber)
  }

  def distinctKeys: Int = keys

  /** Whether a row of a data file with this scope and sequence number is deleted. */
  def isDeleted(scope: Long, dataSequence: Long, values: Array[Any]): Boolean = {
    val key = DeleteKeyIndex.key(values)
    DeleteKeyIndex.newer(global, key, dataSequence) || DeleteKeyIndex.newer(byScope.get(scope), key, dataSequence)
  }

  /** One-column form, without an array: the generated code calls this. */
  def isDeleted(scope: Long, dataSequence: Long, value: Any): Boolean = {
    val key = DeleteKeyIndex.normalize(value)
    DeleteKeyIndex.newer(global, key, dataSequence) || DeleteKeyIndex.newer(byScope.get(scope), key, dataSequence)
  }

  override def equals(other: Any): Boolean = other match {
    case that: DeleteKeyIndex => that.id == id
    case _ => false
  }
  override def hashCode(): Int = id.hashCode
  override def toString: String = s"DeleteKeyIndex($keys keys)"
}

object DeleteKeyIndex {
  private def newer(map: JHashMap[Any, java.lang.Long], key: Any, dataSequence: Long): Boolean =
    map != null && {
      val seq = map.get(key)
      seq != null && dataSequence < seq
    }

  private def normalize(value: Any): Any = value match {
    case bytes: Array[Byte] => ByteBuffer.wrap(bytes) // arrays compare by reference
    case other => other
  }

  private def key(values: Array[Any]): Any =
    if (values.length == 1) normalize(values(0))
    else {
      val list = new JArrayList[Any](values.length)
      values.foreach(v => list.add(normalize(v)))
      list
    }
}
