package eqdelete.deleteindex

/**
 * An index of keys packed ([[KeyBytes]]) and hashed ([[KeyHash]]), as the read tasks ship them
 * for any key but a primitive one or UUIDs: [[HashedKeyIndex]] (keys of any length, in
 * records) or [[InlineKeyIndex]] (short keys, in the slots). Both place a key by the hashed
 * table's home slot, so the tasks' order (`HashedKeyIndex.insertOrder`) fills either front to
 * back, region by region on several threads (`build.DeleteRowBatchFilling`); both look up a
 * batch's keys together (`filter.DeletedRowsOfBatch`) or one row's (generated code).
 */
trait PackedKeyTable {
  /** A part of the table one thread fills (see `regions`). */
  type Region <: PackedKeyTable.Region

  /** Sizes what the keys arriving packed in `packedBytes` bytes take, where it matters, before any is added. */
  def reserveRecords(keys: Long, packedBytes: Long): Unit

  /** The keys its table is sized for: a batch ordered for another size is not in its slot order. */
  def sizedFor: Long

  /** Which of the table's `HashedKeyIndex.Stretches` stretches a key of `hash` in `scope` lands in. */
  def stretchOf(hash: Long, scope: Long): Int

  /** Where to split the table into at most `parts` regions of whole stretches for `keys` keys: the first stretch of each, then `Stretches`. */
  def regionBounds(parts: Int, keys: Long): IndexedSeq[Int]

  /**
   * The regions between `bounds`, region i taking `recordBytes(i)` bytes of records where the
   * table keeps records, for keys in runs of the given (scope, sequence number) pairs; `absorb`
   * them once every thread is done.
   */
  def regions(bounds: IndexedSeq[Int], recordBytes: IndexedSeq[Long], runs: Seq[(Long, Long)]): IndexedSeq[Region]

  /** Takes in what `regions` filled, then adds the keys each kept aside. */
  def absorb(regions: Seq[Region]): Unit

  /** False when no delete has a key of this hash (always true where there is no Bloom filter). */
  def mightContain(hash: Long): Boolean

  /** The newest delete of the key of `hash` packed in `key`, in `scope` or globally, or NoDelete. */
  def newest(scope: Long, hash: Long, key: KeyBytes): Long

  /**
   * `newest` of `n` keys at once, key i of hash `hashes(i)` packed in `packed` from `offsets(i)`
   * until `offsets(i + 1)`, into `out(i)`, their cache misses overlapped; `out` and `entries`
   * (scratch room of at least `n` longs) are the caller's own.
   */
  def newestAll(scope: Long, hashes: Array[Long], packed: Array[Byte], offsets: Array[Int], n: Int,
      out: Array[Long], entries: Array[Long]): Unit
}

object PackedKeyTable {
  trait Region {
    /** Adds a key of `hash` packed in `length` bytes of `packed` from `offset`. */
    def add(hash: Long, scope: Long, packed: Array[Byte], offset: Int, length: Int, sequenceNumber: Long): Unit
  }
}
