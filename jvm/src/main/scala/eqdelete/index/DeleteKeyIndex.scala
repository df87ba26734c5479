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
    noteScope(scope, sequenceNumber)
    put(scope, values, sequenceNumber)
  }

  protected final def noteScope(scope: Long, sequenceNumber: Long): Unit = {
    // Sequence numbers of delete files start at 1; 0 marks an empty slot below.
    require(sequenceNumber > 0, s"delete sequence number $sequenceNumber")
    if (scope == DeletePlan.GlobalScope) hasGlobal = true else scoped = true
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
    case hashed: HashedKeyIndex => hashed.newest(scope, KeyHash.of(values), hashed.pack(values))
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
    if (primitive(types)) new LongKeyIndex(records) else new HashedKeyIndex(types, records)

  /**
   * Bytes the index `forKeyTypes` builds for `records` delete rows takes at most, for sizing it
   * before reading any: exact for the primitive table, a guess for the length of strings and
   * binary values in the hashed one.
   */
  def estimatedBytes(types: Seq[DataType], records: Long): Long =
    if (primitive(types)) LongKeyIndex.bytesFor(records) else HashedKeyIndex.bytesFor(types, records)

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
 * Any other key (strings, decimals, booleans, binary, several columns of `types`): open
 * addressing over (hash, scope, seq, key offset) in one long array, behind the same Bloom
 * filter as the primitive table, with the keys themselves packed ([[KeyBytes]]) one after the
 * other in one byte array and compared only on a hash hit. A row whose key has no delete
 * (almost every row) costs its hash, computed from the column values without allocating
 * ([[KeyHash]]), and one cache-resident Bloom check; a row whose key may have one, its key
 * packed into a reused buffer and two cache lines: its slot and the stored key's bytes.
 *
 * Keys compare as Iceberg's equality does: NULL equals NULL, binary by content, floats and
 * doubles as Java's `equals` (NaN equals NaN, -0.0 is not 0.0).
 */
final class HashedKeyIndex(types: Seq[DataType], expectedKeys: Long) extends DeleteKeyIndex {
  private val keyTypes = types.toArray
  private var slots = new Array[Long](4 * LongKeyIndex.capacityFor(expectedKeys, slotLongs = 4))
  private var mask = slots.length / 4 - 1
  // Each key as a 4-byte length and its packed bytes; a slot holds its key's offset.
  private var keys = new Array[Byte](math.max(64L, math.min(expectedKeys * (KeyBytes.LengthBytes + HashedKeyIndex.packedBytes(types)), 1L << 24)).toInt)
  private var keysUsed = 0
  private var used = 0
  private var bloom: BlockedBloom = _

  require(keyTypes.forall(KeyBytes.supports), s"no packed form for key types ${types.mkString(", ")}")

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

  /** `values` packed, in a fresh buffer: for the interpreted paths. */
  def pack(values: Array[Any]): KeyBytes = KeyBytes.pack(keyTypes, values, new KeyBytes)

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = {
    val key = pack(values)
    putPacked(KeyHash.of(values), scope, key.bytes, 0, key.length, sequenceNumber)
  }

  /**
   * A delete row already hashed and packed (`length` bytes of `packed` from `offset`), as the
   * tasks reading delete files ship them.
   */
  def addPacked(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int, sequenceNumber: Long): Unit = {
    noteScope(scope, sequenceNumber)
    putPacked(hash, scope, packed, offset, length, sequenceNumber)
  }

  private def putPacked(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int, sequenceNumber: Long): Unit = {
    require(bloom == null, "the index is sealed")
    if ((used + 1) * 2 > mask + 1) grow()
    var i = slot(hash, scope)
    while (slots(4 * i + 2) != 0) {
      val at = 4 * i
      if (slots(at) == hash && slots(at + 1) == scope && storedEquals(slots(at + 3).toInt, packed, offset, length)) {
        if (slots(at + 2) < sequenceNumber) slots(at + 2) = sequenceNumber
        return
      }
      i = (i + 1) & mask
    }
    val at = 4 * i
    slots(at) = hash
    slots(at + 1) = scope
    slots(at + 2) = sequenceNumber
    slots(at + 3) = store(packed, offset, length)
    used += 1
  }

  /** The newest delete of the key (of `hash`, see [[KeyHash]]) in `scope` or globally, or NoDelete. */
  def newest(scope: Long, hash: Long, key: KeyBytes): Long = {
    if (!mightContain(hash)) return DeleteKeyIndex.NoDelete
    val global = if (hasGlobal) lookup(hash, DeletePlan.GlobalScope, key) else DeleteKeyIndex.NoDelete
    if (scoped && scope != DeletePlan.GlobalScope) math.max(global, lookup(hash, scope, key)) else global
  }

  private def slot(hash: Long, scope: Long): Int = {
    val h = hash + scope * 0xC2B2AE3D27D4EB4FL
    ((h ^ (h >>> 29)) * 0xBF58476D1CE4E5B9L >>> 32).toInt & mask
  }

  private def lookup(hash: Long, scope: Long, key: KeyBytes): Long = {
    var i = slot(hash, scope)
    while (true) {
      val at = 4 * i
      val seq = slots(at + 2)
      if (seq == 0) return DeleteKeyIndex.NoDelete
      if (slots(at) == hash && slots(at + 1) == scope && storedEquals(slots(at + 3).toInt, key.bytes, 0, key.length)) return seq
      i = (i + 1) & mask
    }
    DeleteKeyIndex.NoDelete
  }

  private def storedEquals(at: Int, packed: Array[Byte], offset: Int, length: Int): Boolean = {
    val start = at + KeyBytes.LengthBytes
    KeyBytes.readLength(keys, at) == length && java.util.Arrays.equals(keys, start, start + length, packed, offset, offset + length)
  }

  /** Appends a key's length and bytes to `keys`; returns where they start. */
  private def store(packed: Array[Byte], offset: Int, length: Int): Int = {
    val need = keysUsed.toLong + KeyBytes.LengthBytes + length
    require(need <= Int.MaxValue - 8, s"the delete keys take more than 2 GB packed; too many for one index")
    if (need > keys.length) keys = java.util.Arrays.copyOf(keys, math.min(Int.MaxValue - 8L, math.max(need, 2L * keys.length)).toInt)
    val at = keysUsed
    KeyBytes.writeLength(keys, at, length)
    System.arraycopy(packed, offset, keys, at + KeyBytes.LengthBytes, length)
    keysUsed = need.toInt
    at
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

  // Shipped to every executor: without the spare room the key bytes were grown with.
  private def writeObject(out: java.io.ObjectOutputStream): Unit = {
    if (keys.length != keysUsed) keys = java.util.Arrays.copyOf(keys, keysUsed)
    out.defaultWriteObject()
  }
}

object HashedKeyIndex {
  /** Bytes `keys` keys of `types` take at most: their slots, Bloom filter and packed bytes (a guess for strings). */
  def bytesFor(types: Seq[DataType], keys: Long): Long =
    32 * LongKeyIndex.slotsFor(keys) + BlockedBloom.bytesFor(keys) + keys * (KeyBytes.LengthBytes + packedBytes(types))

  private[index] def packedBytes(types: Seq[DataType]): Long = types.map(t => KeyBytes.estimatedBytes(t).toLong).sum
}
