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
    case hashed: HashedKeyIndex =>
      // As generated code does: the key is packed only when the Bloom filter may hold it.
      val hash = KeyHash.of(values)
      if (hashed.mightContain(hash)) hashed.newest(scope, hash, hashed.pack(values)) else DeleteKeyIndex.NoDelete
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

/**
 * One integral or floating-point key, as [[KeyBits]]: open addressing over a single long array
 * of (key, scope and sequence number) pairs, the scope in the upper and the sequence number in
 * the lower half of the second long, so a lookup usually touches one cache line and allocates
 * nothing. NULL keys live apart. Sequence numbers up to [[LongKeyIndex.MaxSequenceNumber]] only:
 * a table past it gets the general index (see `DeleteKeyIndex.forKeyTypes`).
 *
 * Almost every row's key has no delete, and a table of 100k keys or more outgrows the CPU's
 * L2 cache, where a probe is a cache miss: profiling the filter strategy showed those misses
 * as its largest cost. So a sealed index first checks a small blocked Bloom filter (16 bits
 * per key, two bits in one 64-bit word, about 2% false positives) that stays in cache. Past the
 * cache, every probe is a miss, and what it costs is the bytes it reads: 16 a slot, not 24 as
 * with the scope in a long of its own (the scale benchmark's delete axis, PERFORMANCE.md).
 */
final class LongKeyIndex(expectedKeys: Long) extends DeleteKeyIndex {
  import LongKeyIndex.{Empty, SequenceBits}

  // Sized once for every key it may get, so building it never holds two tables at a time; any
  // number of slots (not a power of two), so the table is as small as its load allows.
  private var capacity = LongKeyIndex.tableSlotsFor(expectedKeys)
  private var slots = new Array[Long](2 * capacity)
  private var used = 0
  private val nullKeys = new JHashMap[java.lang.Long, java.lang.Long]()
  // Filled as keys are added, so sealing needs no second pass over the table. Only while it is
  // small enough to stay in cache: a Bloom filter that misses the cache costs every row the miss
  // it was to save the rows without deletes (the scale benchmark, PERFORMANCE.md).
  private val bloom: BlockedBloom =
    if (expectedKeys <= LongKeyIndex.MaxBloomKeys) BlockedBloom.forKeys(expectedKeys.toInt) else null
  private var isSealed = false

  def distinctKeys: Int = used + nullKeys.size

  override def seal(): this.type = { isSealed = true; this }

  private def maybePresent(key: Long): Boolean = bloom == null || bloom.mightContain(LongKeyIndex.bloomHash(key))

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = values(0) match {
    case null => nullKeys.merge(scope, sequenceNumber, (a, b) => math.max(a, b))
    case value =>
      require(!isSealed, "the index is sealed")
      insert(KeyBits.of(value), scope, sequenceNumber)
  }

  /** `add` of a non-NULL key given as its [[KeyBits]], without boxing it. */
  def addBits(scope: Long, key: Long, sequenceNumber: Long): Unit = {
    require(!isSealed, "the index is sealed")
    noteScope(scope, sequenceNumber)
    insert(key, scope, sequenceNumber)
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

  private def slot(key: Long, scope: Long): Int = LongKeyIndex.homeSlot(key, scope, capacity)

  /**
   * Which of the table's `LongKeyIndex.Stretches` stretches the key's home slot lies in: keys
   * added stretch by stretch fill the table front to back (see `LongKeyIndex.orderForInsert`).
   */
  def stretchOf(key: Long, scope: Long): Int = LongKeyIndex.stretch(slot(key, scope), capacity)

  private def next(i: Int): Int = if (i + 1 == capacity) 0 else i + 1

  private def lookup(key: Long, scope: Long): Long = {
    var i = slot(key, scope)
    while (true) {
      val entry = slots(2 * i + 1)
      if (entry == Empty) return DeleteKeyIndex.NoDelete
      if (slots(2 * i) == key && (entry >> SequenceBits) == scope) return LongKeyIndex.sequenceOf(entry)
      i = next(i)
    }
    DeleteKeyIndex.NoDelete
  }

  private def insert(key: Long, scope: Long, sequenceNumber: Long): Unit = {
    if (sequenceNumber > LongKeyIndex.MaxSequenceNumber || scope != scope.toInt) {
      // forKeyTypes gives such sets the general index; reaching here is a bug, never a wrong row.
      throw new IndexCapacityException(s"delete sequence number $sequenceNumber or scope $scope is past the primitive index")
    }
    if (used + 1 > capacity * LongKeyIndex.MaxLoad) grow()
    val entry = (scope << SequenceBits) | sequenceNumber
    var i = slot(key, scope)
    while (slots(2 * i + 1) != Empty && !(slots(2 * i) == key && (slots(2 * i + 1) >> SequenceBits) == scope)) i = next(i)
    val at = 2 * i
    if (slots(at + 1) == Empty) {
      used += 1
      slots(at) = key
      slots(at + 1) = entry
      if (bloom != null) bloom.add(LongKeyIndex.bloomHash(key))
    } else if (LongKeyIndex.sequenceOf(slots(at + 1)) < sequenceNumber) {
      slots(at + 1) = entry
    }
  }

  private def grow(): Unit = {
    val old = slots
    capacity = LongKeyIndex.checked(2L * capacity)
    slots = new Array[Long](2 * capacity)
    used = 0
    var at = 0
    while (at < old.length) {
      if (old(at + 1) != Empty) insert(old(at), old(at + 1) >> SequenceBits, LongKeyIndex.sequenceOf(old(at + 1)))
      at += 2
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

  private[index] def capacityFor(keys: Long, slotLongs: Int): Int = {
    val capacity = slotsFor(keys)
    require(slotLongs * capacity <= Int.MaxValue - 8, s"$keys keys are too many for one index")
    capacity.toInt
  }

  /** The newest sequence number a slot holds: its lower 32 bits, unsigned. */
  val MaxSequenceNumber: Long = 0xFFFFFFFFL
  private val SequenceBits = 32
  // Sequence numbers of delete files start at 1, so a used slot's second long is never 0.
  private val Empty = 0L

  private def sequenceOf(entry: Long): Long = entry & MaxSequenceNumber

  /** The key's home slot: the hash's upper half scaled to the capacity (no power of two needed). */
  private def homeSlot(key: Long, scope: Long, capacity: Int): Int = {
    var h = key * 0x9E3779B97F4A7C15L + scope * 0xC2B2AE3D27D4EB4FL
    h ^= h >>> 29
    h *= 0xBF58476D1CE4E5B9L
    (((h ^ (h >>> 32)) >>> 32) * capacity >>> 32).toInt
  }

  /** The stretches a table is ordered by, for adding keys front to back. */
  val Stretches: Int = 1 << 16

  private def stretch(slot: Int, capacity: Int): Int = ((slot.toLong << 16) / capacity).toInt

  /**
   * Reorders `keys(from until until)`, all of `scope`, by their home slot in an index sized for
   * `expectedKeys`: added in that order, they fill its table front to back, where keys in the
   * order they were read each miss the cache once the table outgrows it (at 10^7 keys, adding
   * them took 0.7 s on the driver). Only the order changes, never what the index holds. Two
   * passes of a radix sort on the upper 16 bits of the slot; within one of those 65,536 stretches
   * of the table, order does not matter, as it stays in cache.
   */
  def orderForInsert(keys: Array[Long], from: Int, until: Int, scope: Long, expectedKeys: Long): Unit = {
    val n = until - from
    if (n < 2) return
    val capacity = tableSlotsFor(expectedKeys)
    def stretchOf(key: Long): Int = stretch(homeSlot(key, scope, capacity), capacity)
    val sorted = new Array[Long](n)
    def pass(source: Array[Long], sourceFrom: Int, target: Array[Long], targetFrom: Int, shift: Int): Unit = {
      val starts = new Array[Int](257)
      var i = 0
      while (i < n) { starts(((stretchOf(source(sourceFrom + i)) >>> shift) & 0xFF) + 1) += 1; i += 1 }
      var b = 0
      while (b < 256) { starts(b + 1) += starts(b); b += 1 }
      i = 0
      while (i < n) {
        val key = source(sourceFrom + i)
        val digit = (stretchOf(key) >>> shift) & 0xFF
        target(targetFrom + starts(digit)) = key
        starts(digit) += 1
        i += 1
      }
    }
    pass(keys, from, sorted, 0, 0)
    pass(sorted, 0, keys, from, 8)
  }

  /** Linear probing stays short (about 2 probes for a key present, 3-4 for one absent) up to this load. */
  private val MaxLoad = 0.65

  /** Keys up to which a Bloom filter (16-32 bits a key) stays within a few MB of cache. */
  private val MaxBloomKeys = 2000000L

  /** Slots of the primitive table for `keys` keys, at most MaxLoad full. */
  private def tableSlotsFor(keys: Long): Int = checked(math.max(1024L, math.ceil(keys / MaxLoad).toLong + 1))

  private def checked(capacity: Long): Int = {
    require(2 * capacity <= Int.MaxValue - 8, s"${(capacity * MaxLoad).toLong} keys are too many for one index")
    capacity.toInt
  }

  /** The table for `keys` keys (two longs a slot), its Bloom filter and their headers, in bytes. */
  def bytesFor(keys: Long): Long = 4096 + 16L * tableSlotsFor(keys) + (if (keys <= MaxBloomKeys) BlockedBloom.bytesFor(keys) else 0L)

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
 * Any other key (strings, decimals, booleans, binary, several columns of `types`), behind the
 * same Bloom filter as the primitive table. Each (scope, key) is one record, and the records lie
 * one after the other in one byte array: hash, scope, newest sequence number, the key's length
 * and the key packed ([[KeyBytes]]). An open-addressing table of longs finds them: per slot the
 * hash's upper 32 bits and the record's offset, 8 bytes, so the table stays small enough for the
 * CPU's caches.
 *
 * A row whose key has no delete (almost every row) costs its hash, computed from the column
 * values without allocating ([[KeyHash]]), and one cache-resident Bloom check. A row whose key
 * may have one costs its key packed into a reused buffer, a slot, and the record, where scope,
 * sequence number and key bytes share a cache line or two. Profiling multi_key showed those two
 * loads as the lookup's cost; boxed keys had cost one more load per column.
 *
 * Keys compare as Iceberg's equality does: NULL equals NULL, binary by content, floats and
 * doubles as Java's `equals` (NaN equals NaN, -0.0 is not 0.0).
 */
final class HashedKeyIndex(
    types: Seq[DataType],
    expectedKeys: Long,
    maxRecordBytes: Long = HashedKeyIndex.MaxRecordBytes) // smaller in tests only
  extends DeleteKeyIndex {
  import HashedKeyIndex.{Hash, KeyAt, Scope, Sequence}

  private val keyTypes = types.toArray
  // 0 is an empty slot; else (hash >>> 32) << 32 | (record offset + 1).
  private var slots = new Array[Long](LongKeyIndex.capacityFor(expectedKeys, slotLongs = 1))
  private var mask = slots.length - 1
  // Sized up front for the estimate (exact for fixed-width keys), as the driver's budget counts it.
  private var records = new Array[Byte](math.max(64L, math.min(expectedKeys * HashedKeyIndex.recordBytes(types), maxRecordBytes)).toInt)
  private var recordsEnd = 0
  private var used = 0
  private var bloom: BlockedBloom = _

  require(keyTypes.forall(KeyBytes.supports), s"no packed form for key types ${types.mkString(", ")}")

  def distinctKeys: Int = used

  override def seal(): this.type = {
    // Shipped to every executor as it is, by whichever serializer Spark uses: without spare room.
    if (records.length != recordsEnd) records = java.util.Arrays.copyOf(records, recordsEnd)
    bloom = BlockedBloom.forKeys(used)
    var at = 0
    while (at < recordsEnd) {
      bloom.add(KeyBytes.readLong(records, at + Hash))
      at = next(at)
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
    val at = find(hash, scope, packed, offset, length)
    if (at >= 0) {
      if (KeyBytes.readLong(records, at + Sequence) < sequenceNumber) KeyBytes.writeLong(records, at + Sequence, sequenceNumber)
    } else {
      place(hash, scope, append(hash, scope, sequenceNumber, packed, offset, length))
      used += 1
    }
  }

  /**
   * The newest delete of the key (of `hash`, see [[KeyHash]]) in `scope` or globally, or
   * NoDelete; callers check `mightContain(hash)` first, before packing the key.
   */
  def newest(scope: Long, hash: Long, key: KeyBytes): Long = {
    val global = if (hasGlobal) sequenceOf(find(hash, DeletePlan.GlobalScope, key.bytes, 0, key.length)) else DeleteKeyIndex.NoDelete
    if (scoped && scope != DeletePlan.GlobalScope) math.max(global, sequenceOf(find(hash, scope, key.bytes, 0, key.length))) else global
  }

  private def sequenceOf(record: Int): Long = if (record < 0) DeleteKeyIndex.NoDelete else KeyBytes.readLong(records, record + Sequence)

  private def slot(hash: Long, scope: Long): Int = {
    val h = hash + scope * 0xC2B2AE3D27D4EB4FL
    ((h ^ (h >>> 29)) * 0xBF58476D1CE4E5B9L >>> 32).toInt & mask
  }

  /** The offset of the record of (scope, key), or -1. */
  private def find(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int): Int = {
    val fingerprint = hash >>> 32
    var i = slot(hash, scope)
    while (true) {
      val entry = slots(i)
      if (entry == 0) return -1
      if (entry >>> 32 == fingerprint) {
        val at = (entry & 0xFFFFFFFFL).toInt - 1
        if (KeyBytes.readLong(records, at + Scope) == scope && sameKey(at, packed, offset, length)) return at
      }
      i = (i + 1) & mask
    }
    -1
  }

  private def sameKey(at: Int, packed: Array[Byte], offset: Int, length: Int): Boolean = {
    val start = at + KeyAt
    KeyBytes.readLength(records, start) == length &&
      java.util.Arrays.equals(records, start + KeyBytes.LengthBytes, start + KeyBytes.LengthBytes + length, packed, offset, offset + length)
  }

  private def place(hash: Long, scope: Long, record: Int): Unit = {
    var i = slot(hash, scope)
    while (slots(i) != 0) i = (i + 1) & mask
    slots(i) = ((hash >>> 32) << 32) | (record + 1L)
  }

  private def next(record: Int): Int = record + KeyAt + KeyBytes.LengthBytes + KeyBytes.readLength(records, record + KeyAt)

  /** Appends a record; returns where it starts. */
  private def append(hash: Long, scope: Long, sequenceNumber: Long, packed: Array[Byte], offset: Int, length: Int): Int = {
    val need = recordsEnd.toLong + KeyAt + KeyBytes.LengthBytes + length
    if (need > maxRecordBytes) {
      throw new IndexCapacityException(s"the delete keys take more than ${maxRecordBytes} bytes packed, " +
        s"more than one index holds (after $used keys)")
    }
    if (need > records.length) {
      records = java.util.Arrays.copyOf(records, math.min(maxRecordBytes, math.max(need, 2L * records.length)).toInt)
    }
    val at = recordsEnd
    KeyBytes.writeLong(records, at + Hash, hash)
    KeyBytes.writeLong(records, at + Scope, scope)
    KeyBytes.writeLong(records, at + Sequence, sequenceNumber)
    KeyBytes.writeLength(records, at + KeyAt, length)
    System.arraycopy(packed, offset, records, at + KeyAt + KeyBytes.LengthBytes, length)
    recordsEnd = need.toInt
    at
  }

  private def grow(): Unit = {
    slots = new Array[Long](slots.length * 2)
    mask = slots.length - 1
    var at = 0
    while (at < recordsEnd) {
      place(KeyBytes.readLong(records, at + Hash), KeyBytes.readLong(records, at + Scope), at)
      at = next(at)
    }
  }
}

object HashedKeyIndex {
  /** The most bytes of records one index holds: one Java array. */
  val MaxRecordBytes: Long = Int.MaxValue - 8L

  // A record's layout: where its fields start.
  private val Hash = 0
  private val Scope = 8
  private val Sequence = 16
  private val KeyAt = 24

  /**
   * Bytes `keys` keys of `types` take at most: the index's fixed parts, its slots, Bloom filter
   * and records (a guess for the length of strings and binary values).
   */
  def bytesFor(types: Seq[DataType], keys: Long): Long =
    4096 + 8 * LongKeyIndex.slotsFor(keys) + BlockedBloom.bytesFor(keys) + keys * recordBytes(types)

  private def recordBytes(types: Seq[DataType]): Long = KeyAt + KeyBytes.LengthBytes + types.map(t => KeyBytes.estimatedBytes(t).toLong).sum
}

/** The delete keys do not fit one index, however much memory there is: the query should take the join. */
final class IndexCapacityException(message: String) extends RuntimeException(message)
