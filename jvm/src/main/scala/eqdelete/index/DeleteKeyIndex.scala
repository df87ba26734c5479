package eqdelete.index

import java.util.{ArrayList => JArrayList, HashMap => JHashMap}

import eqdelete.planning.DeletePlan

import org.apache.spark.sql.types.{DataType, DateType, IntegerType, LongType, TimestampNTZType, TimestampType}

/**
 * The delete rows of one equality set, built on the driver for the filter strategy:
 * (scope, key) -> the newest (largest) delete sequence number, global deletes under scope -1.
 * For a fixed key and scope only the newest delete matters, so this is exact. Keys compare
 * with NULL equal to NULL, as Iceberg's delete sets do.
 */
sealed abstract class DeleteKeyIndex extends Serializable {
  protected var hasGlobal = false
  protected var scoped = false

  /** Whether some delete is partition-scoped; if not, lookups need no scope. */
  def hasScoped: Boolean = scoped
  def distinctKeys: Int

  final def add(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = {
    // Sequence numbers of delete files start at 1; 0 marks an empty slot below.
    require(sequenceNumber > 0, s"delete sequence number $sequenceNumber")
    if (scope == DeletePlan.GlobalScope) hasGlobal = true else scoped = true
    put(scope, values, sequenceNumber)
  }

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit

  /** Called once every key is added, before the index is shipped: it is read-only from then on. */
  def seal(): this.type = this

  override def toString: String = s"${getClass.getSimpleName}($distinctKeys keys)"
}

object DeleteKeyIndex {
  /** What `newest` returns when no delete row has the key. */
  val NoDelete: Long = Long.MinValue

  /**
   * A primitive table for one integral key column (int, long, date, timestamp), sized up front
   * for `records` delete rows (an upper bound of its keys), else a general one.
   */
  def forKeyTypes(types: Seq[DataType], records: Long): DeleteKeyIndex =
    if (primitive(types)) new LongKeyIndex(records) else new GeneralKeyIndex(types.size)

  /**
   * Bytes the index `forKeyTypes` builds for `records` delete rows takes at most, for sizing it
   * before reading any: exact for the primitive table, a rough per-key figure for Java maps.
   */
  def estimatedBytes(types: Seq[DataType], records: Long): Long =
    if (primitive(types)) LongKeyIndex.bytesFor(records) else records * GeneralKeyIndex.BytesPerKey

  def isPrimitive(types: Seq[DataType]): Boolean = primitive(types)

  private def primitive(types: Seq[DataType]): Boolean = types match {
    case Seq(t) => LongKeyIndex.supports(t)
    case _ => false
  }
}

/**
 * One integral key: open addressing over a single long array of (key, scope, seq) triples,
 * so a lookup usually touches one cache line and allocates nothing. NULL keys live apart.
 *
 * Almost every row's key has no delete, and a table of 100k keys or more outgrows the CPU's
 * L2 cache, where a probe is a cache miss: profiling the filter strategy showed those misses
 * as its largest cost. So a sealed index first checks a small blocked Bloom filter (16 bits
 * per key, two bits in one 64-bit word, about 2% false positives) that stays in cache.
 */
final class LongKeyIndex(expectedKeys: Long) extends DeleteKeyIndex {
  // Sized once for every key it may get, so building it never holds two tables at a time.
  private var slots = new Array[Long](3 * LongKeyIndex.capacityFor(expectedKeys))
  private var mask = slots.length / 3 - 1
  private var used = 0
  private val nullKeys = new JHashMap[java.lang.Long, java.lang.Long]()
  private var bloom: Array[Long] = _
  private var bloomMask = 0

  def distinctKeys: Int = used + nullKeys.size

  override def seal(): this.type = {
    var words = 1
    while (words < used / 4) words *= 2
    bloom = new Array[Long](words)
    bloomMask = words - 1
    var at = 0
    while (at < slots.length) {
      if (slots(at + 2) != 0) {
        val h = LongKeyIndex.bloomHash(slots(at))
        bloom((h >>> 32).toInt & bloomMask) |= LongKeyIndex.bloomBits(h)
      }
      at += 3
    }
    this
  }

  private def maybePresent(key: Long): Boolean = bloom == null || {
    val h = LongKeyIndex.bloomHash(key)
    val bits = LongKeyIndex.bloomBits(h)
    (bloom((h >>> 32).toInt & bloomMask) & bits) == bits
  }

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = values(0) match {
    case null => nullKeys.merge(scope, sequenceNumber, (a, b) => math.max(a, b))
    case value: Number =>
      require(bloom == null, "the index is sealed")
      insert(value.longValue(), scope, sequenceNumber)
    case other => throw new IllegalArgumentException(s"not an integral key: $other")
  }

  /** The newest delete of `key` in `scope` or globally, or NoDelete. */
  def newest(scope: Long, isNull: Boolean, key: Long): Long = {
    if (isNull) {
      val global = if (hasGlobal) nullKeys.get(DeletePlan.GlobalScope.toLong) else null
      val local = if (scoped) nullKeys.get(scope) else null
      def orNone(seq: java.lang.Long): Long = if (seq == null) DeleteKeyIndex.NoDelete else seq.longValue()
      math.max(orNone(global), orNone(local))
    } else if (!maybePresent(key)) {
      DeleteKeyIndex.NoDelete
    } else {
      val global = if (hasGlobal) lookup(key, DeletePlan.GlobalScope) else DeleteKeyIndex.NoDelete
      if (scoped && scope != DeletePlan.GlobalScope) math.max(global, lookup(key, scope)) else global
    }
  }

  private def slot(key: Long, scope: Long): Int = {
    var h = key * 0x9E3779B97F4A7C15L + scope * 0xC2B2AE3D27D4EB4FL
    h ^= h >>> 29
    h *= 0xBF58476D1CE4E5B9L
    (h ^ (h >>> 32)).toInt & mask
  }

  private def lookup(key: Long, scope: Long): Long = {
    var i = slot(key, scope)
    while (true) {
      val at = 3 * i
      val seq = slots(at + 2)
      if (seq == 0) return DeleteKeyIndex.NoDelete
      if (slots(at) == key && slots(at + 1) == scope) return seq
      i = (i + 1) & mask
    }
    DeleteKeyIndex.NoDelete
  }

  private def insert(key: Long, scope: Long, sequenceNumber: Long): Unit = {
    if ((used + 1) * 2 > mask + 1) grow()
    var i = slot(key, scope)
    while (slots(3 * i + 2) != 0 && !(slots(3 * i) == key && slots(3 * i + 1) == scope)) i = (i + 1) & mask
    val at = 3 * i
    if (slots(at + 2) == 0) {
      used += 1
      slots(at) = key
      slots(at + 1) = scope
      slots(at + 2) = sequenceNumber
    } else if (slots(at + 2) < sequenceNumber) {
      slots(at + 2) = sequenceNumber
    }
  }

  private def grow(): Unit = {
    val old = slots
    slots = new Array[Long](old.length * 2)
    mask = slots.length / 3 - 1
    used = 0
    var at = 0
    while (at < old.length) {
      if (old(at + 2) != 0) insert(old(at), old(at + 1), old(at + 2))
      at += 3
    }
  }
}

object LongKeyIndex {
  /** Slots for `keys` keys: a power of two, at most half full. */
  private def slotsFor(keys: Long): Long = {
    var capacity = 1024L
    while (capacity < 2 * keys) capacity *= 2
    capacity
  }

  private[index] def capacityFor(keys: Long): Int = {
    val capacity = slotsFor(keys)
    require(3 * capacity <= Int.MaxValue - 8, s"$keys keys are too many for one index")
    capacity.toInt
  }

  /** The table for `keys` keys (three longs a slot) and its Bloom filter, in bytes. */
  def bytesFor(keys: Long): Long = 24 * slotsFor(keys) + 2 * keys + 64

  private def bloomHash(key: Long): Long = {
    val h = key * 0x9E3779B97F4A7C15L
    h ^ (h >>> 31)
  }
  private def bloomBits(h: Long): Long = (1L << (h & 63)) | (1L << ((h >>> 6) & 63))

  def supports(dataType: DataType): Boolean = dataType match {
    case IntegerType | LongType | DateType | TimestampType | TimestampNTZType => true
    case _ => false
  }
}

/** Any supported key: Java maps per scope; one column is the value itself, several a list. */
final class GeneralKeyIndex(val columns: Int) extends DeleteKeyIndex {
  private val byScope = new JHashMap[java.lang.Long, JHashMap[Any, java.lang.Long]]()
  private var keys = 0

  def distinctKeys: Int = keys

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = {
    val map = byScope.computeIfAbsent(scope, _ => new JHashMap[Any, java.lang.Long]())
    val key = GeneralKeyIndex.key(values)
    val previous = map.get(key)
    if (previous == null) keys += 1
    if (previous == null || previous < sequenceNumber) map.put(key, sequenceNumber)
  }

  /** The newest delete of the key in `scope` or globally, or NoDelete. */
  def newest(scope: Long, values: Array[Any]): Long = newestOf(scope, GeneralKeyIndex.key(values))

  /** One-column form, without an array: the generated code calls this. */
  def newest(scope: Long, value: Any): Long = newestOf(scope, GeneralKeyIndex.normalize(value))

  private def newestOf(scope: Long, key: Any): Long = {
    val global = if (hasGlobal) seqOf(byScope.get(DeletePlan.GlobalScope.toLong), key) else DeleteKeyIndex.NoDelete
    if (scoped && scope != DeletePlan.GlobalScope) math.max(global, seqOf(byScope.get(scope), key)) else global
  }

  private def seqOf(map: JHashMap[Any, java.lang.Long], key: Any): Long = {
    val seq = if (map == null) null else map.get(key)
    if (seq == null) DeleteKeyIndex.NoDelete else seq
  }
}

object GeneralKeyIndex {
  /** Rough heap bytes per key: a map entry, the boxed sequence number and the key object. */
  val BytesPerKey = 160L

  private def normalize(value: Any): Any = value match {
    case bytes: Array[Byte] => BinaryKey(bytes) // arrays compare by reference
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

/**
 * A BINARY key value compared by content. (Not a `ByteBuffer`: the index is broadcast with
 * Java serialization, which buffers do not support.)
 */
final case class BinaryKey(bytes: Array[Byte]) {
  override def equals(other: Any): Boolean = other match {
    case that: BinaryKey => java.util.Arrays.equals(bytes, that.bytes)
    case _ => false
  }
  override def hashCode(): Int = java.util.Arrays.hashCode(bytes)
}
