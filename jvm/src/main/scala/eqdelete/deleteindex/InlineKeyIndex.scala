package eqdelete.deleteindex

import org.apache.spark.sql.types.DataType
import org.apache.spark.unsafe.Platform

/**
 * Keys whose packed form ([[KeyBytes]]) takes at most `width` longs, held in the slots
 * themselves: an open-addressing table of (`width` longs of packed key, zero past its end; scope
 * and sequence number) slots. A short string (`key-<n>`: 16 bytes packed) or a (long, string,
 * date) key (about 35) then costs a lookup one slot, where the hashed index loaded a slot and
 * then the record it points at: two cache misses in a row per row whose key may have a delete,
 * and at 10^7 such keys past any cache, most of the query.
 *
 * Packing is self-delimiting for one list of types (a NULL flag per column, then a fixed width
 * or a length and the bytes), so two keys with equal padded words are equal; a data key whose
 * packed form is longer than `width` longs equals no delete key. A key's home slot follows its
 * home slot in the hashed index of the same size (`HashedKeyIndex.slotOf`, scaled down to this
 * table), so the read tasks' order for that index (`HashedKeyIndex.insertOrder`) fills this one
 * front to back too, and the builder picks between them only once every task has shipped its
 * keys ([[eqdelete.deleteindex.build.DeleteIndexBuilder]]).
 *
 * Sized once for every key it may get (the set's delete rows): it never grows, which would need
 * every key's hash again.
 */
final class InlineKeyIndex(types: Seq[DataType], expectedKeys: Long, val width: Int) extends DeleteKeyIndex with PackedKeyTable {
  import InlineKeyIndex.{Empty, LineLongs, MaxSequenceNumber, SequenceBits}

  type Region = InlineKeyIndex.Region

  require(width >= 1 && width <= InlineKeyIndex.MaxWidth, s"keys of $width longs")
  private val keyTypes = types.toArray
  // The hashed index's table for as many keys, whose home slots this table's follow.
  private val hashedMask = HashedKeyIndex.capacityFor(expectedKeys) - 1
  private val hashedBits = Integer.numberOfTrailingZeros(hashedMask + 1)
  private val capacity = math.min(hashedMask + 1L, InlineKeyIndex.slotsFor(expectedKeys)).toInt
  private val stride = width + 1
  private val slots = new Array[Long](InlineKeyIndex.checked(stride.toLong * capacity))
  private var used = 0
  // As the hashed index's, over the same hashes; filled as keys are added, so only where one thread adds them all (`regionBounds`).
  private val bloom: BlockedBloom =
    if (expectedKeys <= HashedKeyIndex.MaxBloomKeys) BlockedBloom.forKeys(expectedKeys.toInt) else null
  private var isSealed = false

  require(keyTypes.forall(KeyBytes.supports), s"no packed form for key types ${types.mkString(", ")}")

  def distinctKeys: Int = used

  override def seal(): this.type = { isSealed = true; this }

  def mightContain(hash: Long): Boolean = bloom == null || bloom.mightContain(hash)

  def newestOf(scope: Long, values: Array[Any]): Long = {
    val hash = KeyHash.of(values)
    if (mightContain(hash)) newest(scope, hash, KeyBytes.pack(keyTypes, values, new KeyBytes)) else DeleteKeyIndex.NoDelete
  }

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit = {
    val key = KeyBytes.pack(keyTypes, values, new KeyBytes)
    addPacked(KeyHash.of(values), scope, key.bytes, 0, key.length, sequenceNumber)
  }

  /** A delete row already hashed and packed in `length` bytes of `packed` from `offset`, at most `width` longs. */
  def addPacked(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int, sequenceNumber: Long): Unit = {
    require(!isSealed, "the index is sealed")
    require(length <= 8 * width, s"a key of $length bytes packed in an index of $width longs a key") // the builder checks every key
    noteScope(scope, sequenceNumber)
    insert(hash, scope, packed, offset, length, sequenceNumber)
  }

  def newest(scope: Long, hash: Long, key: KeyBytes): Long = newestPacked(scope, hash, key.bytes, 0, key.length)

  private def newestPacked(scope: Long, hash: Long, packed: Array[Byte], offset: Int, length: Int): Long =
    if (length > 8 * width) DeleteKeyIndex.NoDelete
    else {
      val global = if (hasGlobal) lookup(hash, DeleteKeyIndex.GlobalScope, packed, offset, length) else DeleteKeyIndex.NoDelete
      if (scoped && scope != DeleteKeyIndex.GlobalScope) math.max(global, lookup(hash, scope, packed, offset, length)) else global
    }

  def newestAll(scope: Long, hashes: Array[Long], packed: Array[Byte], offsets: Array[Int], n: Int,
      out: Array[Long], entries: Array[Long]): Unit = {
    if (hasGlobal) prefetch(DeleteKeyIndex.GlobalScope, hashes, n, entries)
    if (scoped && scope != DeleteKeyIndex.GlobalScope) prefetch(scope, hashes, n, entries)
    var i = 0
    while (i < n) {
      val hash = hashes(i)
      out(i) =
        if (!mightContain(hash)) DeleteKeyIndex.NoDelete
        else newestPacked(scope, hash, packed, offsets(i), offsets(i + 1) - offsets(i))
      i += 1
    }
  }

  // The home slot's line and the next, for keys the Bloom filter (if any) lets through, in a loop
  // of loads that do not wait on one another (see `HashedKeyIndex.newestAll`). What a load read
  // goes to `entries`, which nothing reads after, so that the JIT keeps the load.
  private def prefetch(scope: Long, hashes: Array[Long], n: Int, entries: Array[Long]): Unit = {
    var i = 0
    while (i < n) {
      val hash = hashes(i)
      entries(i) =
        if (!mightContain(hash)) 0L
        else {
          val at = stride * home(hash, scope)
          slots(at) + slots(math.min(at + LineLongs, slots.length - 1))
        }
      i += 1
    }
  }

  private def home(hash: Long, scope: Long): Int =
    ((HashedKeyIndex.slotOf(hash, scope, hashedMask).toLong * capacity) >>> hashedBits).toInt

  def stretchOf(hash: Long, scope: Long): Int = HashedKeyIndex.slotOf(hash, scope, hashedMask) >>> HashedKeyIndex.stretchShift(hashedMask)

  def sizedFor: Long = expectedKeys

  def reserveRecords(keys: Long, packedBytes: Long): Unit = () // no records

  /** The first slot a key of `stretch` or later may be homed in (`capacity` from `Stretches`). */
  private def firstSlotOf(stretch: Int): Int =
    if (stretch >= HashedKeyIndex.Stretches) capacity
    else (((stretch.toLong << HashedKeyIndex.stretchShift(hashedMask)) * capacity) >>> hashedBits).toInt

  /**
   * As the hashed index's: one region unless the table is empty, split by whole stretches (from
   * 65,536 hashed slots), keeps no Bloom filter (shared by every region) and has room for `keys`.
   */
  def regionBounds(parts: Int, keys: Long): IndexedSeq[Int] = {
    val n =
      if (parts <= 1 || used > 0 || bloom != null || hashedMask + 1 < HashedKeyIndex.Stretches ||
        used + keys > capacity * InlineKeyIndex.MaxLoad) 1
      else parts
    (0 to n).map(k => (k.toLong * HashedKeyIndex.Stretches / n).toInt)
  }

  def regions(bounds: IndexedSeq[Int], recordBytes: IndexedSeq[Long], runs: Seq[(Long, Long)]): IndexedSeq[InlineKeyIndex.Region] = {
    require(!isSealed, "the index is sealed")
    runs.foreach { case (scope, seq) => noteScope(scope, seq) }
    if (bounds.size <= 2) IndexedSeq(new InlineKeyIndex.Region(this, 0, capacity, whole = true))
    else bounds.sliding(2).map { case Seq(first, end) =>
      new InlineKeyIndex.Region(this, firstSlotOf(first), firstSlotOf(end), whole = false)
    }.toIndexedSeq
  }

  def absorb(regions: Seq[InlineKeyIndex.Region]): Unit = {
    used += regions.map(_.added).sum
    regions.foreach(_.keptAside.foreach { case (hash, scope, key, seq) => insert(hash, scope, key, 0, key.length, seq) })
  }

  private def next(i: Int): Int = if (i + 1 == capacity) 0 else i + 1

  /** Word `j` of the key packed in `length` bytes of `packed` from `offset`: zero past its end. */
  private def word(packed: Array[Byte], offset: Int, length: Int, j: Int): Long = {
    val start = 8 * j
    val left = length - start
    if (left >= 8) Platform.getLong(packed, Platform.BYTE_ARRAY_OFFSET + offset + start)
    else if (left <= 0) 0L
    else {
      // Only its own bytes, in the order the 8-byte read puts them (little-endian).
      var value = 0L
      var k = left - 1
      while (k >= 0) {
        value = (value << 8) | (packed(offset + start + k) & 0xFFL)
        k -= 1
      }
      value
    }
  }

  private def holds(i: Int, scope: Long, packed: Array[Byte], offset: Int, length: Int): Boolean = {
    val at = stride * i
    if ((slots(at + width) >> SequenceBits) != scope) false
    else {
      var j = 0
      while (j < width && slots(at + j) == word(packed, offset, length, j)) j += 1
      j == width
    }
  }

  private def lookup(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int): Long = {
    var i = home(hash, scope)
    while (true) {
      val entry = slots(stride * i + width)
      if (entry == Empty) return DeleteKeyIndex.NoDelete
      if (holds(i, scope, packed, offset, length)) return entry & MaxSequenceNumber
      i = next(i)
    }
    DeleteKeyIndex.NoDelete
  }

  /** The key's slot, or the empty one it goes to, probing from `start`; -1 on reaching `until` (-1: the whole table, never). */
  private def probe(scope: Long, packed: Array[Byte], offset: Int, length: Int, start: Int, until: Int): Int = {
    var i = start
    while (slots(stride * i + width) != Empty && !holds(i, scope, packed, offset, length)) {
      i += 1
      if (i == until) return -1
      if (i == capacity) i = 0
    }
    i
  }

  /** Puts the key into slot `i` (from `probe`): true for a new key, else raises its sequence number. */
  private def write(i: Int, hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int, sequenceNumber: Long): Boolean = {
    val at = stride * i
    val entry = (scope << SequenceBits) | sequenceNumber
    if (slots(at + width) == Empty) {
      var j = 0
      while (j < width) { slots(at + j) = word(packed, offset, length, j); j += 1 }
      slots(at + width) = entry
      if (bloom != null) bloom.add(hash)
      true
    } else {
      if ((slots(at + width) & MaxSequenceNumber) < sequenceNumber) slots(at + width) = entry
      false
    }
  }

  private def checkPacks(scope: Long, sequenceNumber: Long): Unit =
    if (sequenceNumber > MaxSequenceNumber || scope != scope.toInt) {
      // The builder gives such sets the hashed index; reaching here is a bug, never a wrong row.
      throw new IndexCapacityException(s"delete sequence number $sequenceNumber or scope $scope is past the inline index")
    }

  private def insert(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int, sequenceNumber: Long): Unit = {
    checkPacks(scope, sequenceNumber)
    val i = probe(scope, packed, offset, length, home(hash, scope), -1)
    if (slots(stride * i + width) == Empty && used + 1 > capacity * InlineKeyIndex.MaxLoad) {
      throw new IndexCapacityException(s"more than $expectedKeys keys in an index sized for them")
    }
    if (write(i, hash, scope, packed, offset, length, sequenceNumber)) used += 1
  }

  private[deleteindex] def addWithin(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int,
      sequenceNumber: Long, from: Int, until: Int): Int = {
    checkPacks(scope, sequenceNumber)
    val start = home(hash, scope)
    if (start < from || start >= until) return -1
    val i = probe(scope, packed, offset, length, start, until)
    if (i < 0) -1 else if (write(i, hash, scope, packed, offset, length, sequenceNumber)) 1 else 0
  }
}

object InlineKeyIndex {
  /** Slots `from until until` of `index`'s table, which one thread fills while others fill other regions, as `HashedKeyIndex.Region`. */
  final class Region private[InlineKeyIndex] (index: InlineKeyIndex, from: Int, until: Int, whole: Boolean) extends PackedKeyTable.Region {
    private val aside = scala.collection.mutable.ArrayBuffer[(Long, Long, Array[Byte], Long)]()
    private[InlineKeyIndex] var added = 0

    def add(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int, sequenceNumber: Long): Unit =
      if (whole) index.addPacked(hash, scope, packed, offset, length, sequenceNumber)
      else index.addWithin(hash, scope, packed, offset, length, sequenceNumber, from, until) match {
        case 1 => added += 1
        case 0 =>
        case _ => aside += ((hash, scope, java.util.Arrays.copyOfRange(packed, offset, offset + length), sequenceNumber))
      }

    private[InlineKeyIndex] def keptAside: Seq[(Long, Long, Array[Byte], Long)] = aside.toSeq
  }

  /** The newest sequence number a slot holds, as LongKeyIndex's. */
  val MaxSequenceNumber: Long = 0xFFFFFFFFL
  private val SequenceBits = 32
  private val Empty = 0L
  private val LineLongs = 8
  // Half full, as the UUID index: a probe for a key not there walks ~2.5 slots.
  private val MaxLoad = 0.5

  /** The longest keys held inline, in longs: a (long, string of up to 11 bytes, date) key packs into 35 bytes. */
  val MaxWidth = 5

  /** The longs a key of `packedBytes` bytes takes, if it is held inline at all. */
  def widthFor(packedBytes: Int): Option[Int] = {
    val width = math.max(1, (packedBytes + 7) / 8)
    if (width <= MaxWidth) Some(width) else None
  }

  /** Whether a set of this newest sequence number may get this index, once its keys are read. */
  def mayIndex(newestSequenceNumber: Long): Boolean = newestSequenceNumber <= MaxSequenceNumber

  private def slotsFor(keys: Long): Long = math.max(1024L, math.ceil(keys / MaxLoad).toLong + 1)

  private def checked(longs: Long): Int = {
    require(longs <= Int.MaxValue - 8, s"$longs longs are too many for one index")
    longs.toInt
  }

  /** The table for `keys` keys of `width` longs and its Bloom filter, in bytes. */
  def bytesFor(keys: Long, width: Int): Long = {
    val capacity = math.min(HashedKeyIndex.capacityFor(keys).toLong, slotsFor(keys))
    4096 + 8L * (width + 1) * capacity + (if (keys <= HashedKeyIndex.MaxBloomKeys) BlockedBloom.bytesFor(keys) else 0L)
  }
}
