package eqdelete.index

import java.util.{HashMap => JHashMap}

import eqdelete.planning.DeletePlan

import org.apache.spark.sql.types.{DataType, DateType, DoubleType, FloatType, IntegerType, LongType, TimestampNTZType, TimestampType}

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

  /**
   * The newest delete of the key `values` (Catalyst values) in `scope` or globally, or NoDelete:
   * the interpreted lookup (generated code calls the subclasses' own).
   */
  final def newestOf(scope: Long, values: Array[Any]): Long = this match {
    case longs: LongKeyIndex =>
      val value = values(0)
      longs.newest(scope, value == null, if (value == null) 0L else KeyBits.of(value))
    case hashed: HashedKeyIndex => hashed.newest(scope, KeyHash.of(values), values)
  }

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
  /** What `newest` returns when no delete row has the key. */
  val NoDelete: Long = Long.MinValue

  /**
   * A primitive table for one integral or floating-point key column (int, long, date,
   * timestamp, float, double; see [[KeyBits]]), sized up front
   * for `records` delete rows (an upper bound of its keys), else a general one.
   */
  def forKeyTypes(types: Seq[DataType], records: Long): DeleteKeyIndex =
    if (primitive(types)) new LongKeyIndex(records) else new HashedKeyIndex(records)

  /**
   * Bytes the index `forKeyTypes` builds for `records` delete rows takes at most, for sizing it
   * before reading any: exact for the primitive table, a rough per-key figure for Java maps.
   */
  def estimatedBytes(types: Seq[DataType], records: Long): Long =
    if (primitive(types)) LongKeyIndex.bytesFor(records) else records * HashedKeyIndex.BytesPerKey

  def isPrimitive(types: Seq[DataType]): Boolean = primitive(types)

  private def primitive(types: Seq[DataType]): Boolean = types match {
    case Seq(t) => LongKeyIndex.supports(t)
    case _ => false
  }
}

/**
 * One integral or floating-point key, as [[KeyBits]]: open addressing over a single long array of (key, scope, seq) triples,
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
  private var bloom: BlockedBloom = _

  def distinctKeys: Int = used + nullKeys.size

  override def seal(): this.type = {
    bloom = BlockedBloom.forKeys(used)
    var at = 0
    while (at < slots.length) {
      if (slots(at + 2) != 0) bloom.add(LongKeyIndex.bloomHash(slots(at)))
      at += 3
    }
    this
  }

  private def maybePresent(key: Long): Boolean = bloom == null || bloom.mightContain(LongKeyIndex.bloomHash(key))

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = values(0) match {
    case null => nullKeys.merge(scope, sequenceNumber, (a, b) => math.max(a, b))
    case value =>
      require(bloom == null, "the index is sealed")
      insert(KeyBits.of(value), scope, sequenceNumber)
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
  private[index] def slotsFor(keys: Long): Long = {
    var capacity = 1024L
    while (capacity < 2 * keys) capacity *= 2
    capacity
  }

  private[index] def capacityFor(keys: Long, slotLongs: Int = 3): Int = {
    val capacity = slotsFor(keys)
    require(slotLongs * capacity <= Int.MaxValue - 8, s"$keys keys are too many for one index")
    capacity.toInt
  }

  /** The table for `keys` keys (three longs a slot) and its Bloom filter, in bytes. */
  def bytesFor(keys: Long): Long = 24 * slotsFor(keys) + BlockedBloom.bytesFor(keys)

  private def bloomHash(key: Long): Long = {
    val h = key * 0x9E3779B97F4A7C15L
    h ^ (h >>> 31)
  }

  def supports(dataType: DataType): Boolean = dataType match {
    case IntegerType | LongType | DateType | TimestampType | TimestampNTZType | FloatType | DoubleType => true
    case _ => false
  }
}

/**
 * Any other key (strings, decimals, booleans, binary, several columns): open addressing over
 * (hash, scope, seq, key number) in one long array, behind the same Bloom filter as the
 * primitive table, with the keys themselves kept apart and compared only on a hash hit. A row
 * whose key has no delete (almost every row) costs its hash, computed from the column values
 * without allocating ([[KeyHash]]), and one cache-resident Bloom check.
 *
 * Keys compare as Iceberg's equality does: NULL equals NULL, binary by content, floats and
 * doubles as Java's `equals` (NaN equals NaN, -0.0 is not 0.0).
 */
final class HashedKeyIndex(expectedKeys: Long) extends DeleteKeyIndex {
  private var slots = new Array[Long](4 * LongKeyIndex.capacityFor(expectedKeys, slotLongs = 4))
  private var mask = slots.length / 4 - 1
  private var keys = new Array[Array[Any]](math.max(16, math.min(expectedKeys, 1L << 20).toInt))
  private var used = 0
  private var bloom: BlockedBloom = _

  def distinctKeys: Int = used

  override def seal(): this.type = {
    bloom = BlockedBloom.forKeys(used)
    var at = 0
    while (at < slots.length) {
      if (slots(at + 2) != 0) bloom.add(slots(at))
      at += 4
    }
    this
  }

  /** False when no delete has a key of this hash: the common case, without touching the table. */
  def mightContain(hash: Long): Boolean = bloom == null || bloom.mightContain(hash)

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = {
    require(bloom == null, "the index is sealed")
    if ((used + 1) * 2 > mask + 1) grow()
    val hash = KeyHash.of(values)
    var i = slot(hash, scope)
    while (slots(4 * i + 2) != 0) {
      val at = 4 * i
      if (slots(at) == hash && slots(at + 1) == scope && HashedKeyIndex.sameKey(keys(slots(at + 3).toInt), values)) {
        if (slots(at + 2) < sequenceNumber) slots(at + 2) = sequenceNumber
        return
      }
      i = (i + 1) & mask
    }
    if (used == keys.length) keys = java.util.Arrays.copyOf(keys, keys.length * 2)
    keys(used) = values.clone()
    val at = 4 * i
    slots(at) = hash
    slots(at + 1) = scope
    slots(at + 2) = sequenceNumber
    slots(at + 3) = used
    used += 1
  }

  /** The newest delete of the key (of `hash`, see [[KeyHash]]) in `scope` or globally, or NoDelete. */
  def newest(scope: Long, hash: Long, values: Array[Any]): Long = {
    if (!mightContain(hash)) return DeleteKeyIndex.NoDelete
    val global = if (hasGlobal) lookup(hash, DeletePlan.GlobalScope, values) else DeleteKeyIndex.NoDelete
    if (scoped && scope != DeletePlan.GlobalScope) math.max(global, lookup(hash, scope, values)) else global
  }

  private def slot(hash: Long, scope: Long): Int = {
    val h = hash + scope * 0xC2B2AE3D27D4EB4FL
    ((h ^ (h >>> 29)) * 0xBF58476D1CE4E5B9L >>> 32).toInt & mask
  }

  private def lookup(hash: Long, scope: Long, values: Array[Any]): Long = {
    var i = slot(hash, scope)
    while (true) {
      val at = 4 * i
      val seq = slots(at + 2)
      if (seq == 0) return DeleteKeyIndex.NoDelete
      if (slots(at) == hash && slots(at + 1) == scope && HashedKeyIndex.sameKey(keys(slots(at + 3).toInt), values)) return seq
      i = (i + 1) & mask
    }
    DeleteKeyIndex.NoDelete
  }

  private def grow(): Unit = {
    val old = slots
    slots = new Array[Long](old.length * 2)
    mask = slots.length / 4 - 1
    var at = 0
    while (at < old.length) {
      if (old(at + 2) != 0) {
        var i = slot(old(at), old(at + 1))
        while (slots(4 * i + 2) != 0) i = (i + 1) & mask
        System.arraycopy(old, at, slots, 4 * i, 4)
      }
      at += 4
    }
  }
}

object HashedKeyIndex {
  /** Rough heap bytes per key: its slots (half full), the key's array and values. */
  val BytesPerKey = 160L

  private def sameKey(stored: Array[Any], values: Array[Any]): Boolean = {
    var i = 0
    while (i < stored.length) {
      val same = (stored(i), values(i)) match {
        case (null, null) => true
        case (null, _) | (_, null) => false
        case (a: Array[Byte], b: Array[Byte]) => java.util.Arrays.equals(a, b)
        case (a: AnyRef, b: AnyRef) => a.equals(b)
      }
      if (!same) return false
      i += 1
    }
    true
  }
}
