package eqdelete.deleteindex

/**
 * Which values of one integral key (int, long or date) some delete row holds: a bit per value
 * of the range `first .. first + 64 * words - 1`, for an equality set the cost model found
 * needs no sequence numbers (`cost.IndexKind.KeyBitmap`): its delete files are all global and
 * all newer than every data file the scan reads, so a row whose key has a delete is deleted,
 * whichever delete it is. The index keeps only the oldest of its files' sequence numbers and
 * `newest` returns that for a key present: a lower bound of the key's newest delete, larger
 * than every row's the scan checks, and enough for `covers` (a delete row at or below it is
 * covered).
 *
 * Where [[LongKeyIndex]] holds 16 bytes a slot at most 65% full (about 200 bits a key) and a
 * probe of a key present misses the cache past a few MB, this is at most 64 bits a key (2.5 MB
 * at 10^7 keys over 2x10^7 values, 25 MB at 10^7 keys over 2x10^8), and
 * has no table to build: each read task sets the bits of its own keys ([[KeyBitmapIndex.Part]])
 * and the driver ORs the parts.
 */
final class KeyBitmapIndex private (val first: Long, words: Array[Long], oldestSequenceNumber: Long, nullDeleted: Boolean)
  extends DeleteKeyIndex {
  import KeyBitmapIndex.contains

  hasGlobal = true
  override val distinctKeys: Int = {
    var n = 0L
    words.foreach(w => n += java.lang.Long.bitCount(w))
    math.min(Int.MaxValue.toLong, n + (if (nullDeleted) 1 else 0)).toInt
  }

  protected def put(scope: Long, values: Array[Any], sequenceNumber: Long): Unit =
    throw new UnsupportedOperationException("a key bitmap is built from parts (KeyBitmapIndex.of)")

  def newestOf(scope: Long, values: Array[Any]): Long = {
    val value = values(0)
    newest(scope, value == null, if (value == null) 0L else KeyBits.of(value))
  }

  /** The oldest delete file's sequence number when the key (or NULL) has a delete, else NoDelete; any scope. */
  def newest(scope: Long, isNull: Boolean, key: Long): Long =
    if (if (isNull) nullDeleted else contains(words, first, key)) oldestSequenceNumber else DeleteKeyIndex.NoDelete
}

object KeyBitmapIndex {
  /**
   * A bitmap index is chosen where the keys' range is at most this many bits a key: under a third
   * of [[LongKeyIndex]]'s table, so never larger than what it replaces, and a key present costs
   * one bit where the table's slot is a miss. Up to 16 bits a key it also fits the Bloom filter's
   * budget; past that, data files read in key order still walk it front to back, in cache.
   */
  val MaxBitsPerKey = 64L

  /** Words a bitmap may have (one Java array). */
  val MaxWords: Long = Int.MaxValue - 8L

  /** Bytes of the index over `bits` values, headers included. */
  def bytesFor(bits: Long): Long = 8 * ((bits + 63) >>> 6) + 256

  /** Whether `key`'s bit is set in `words`, a bitmap of the values from `first` on; false outside it. */
  private[deleteindex] def contains(words: Array[Long], first: Long, key: Long): Boolean = {
    val offset = key - first // as unsigned: below the range's length exactly when the key is in it
    java.lang.Long.compareUnsigned(offset >>> 6, words.length.toLong) < 0 && (words((offset >>> 6).toInt) & (1L << offset)) != 0
  }

  /** Sets `key`'s bit in `words`, a bitmap of the values from `first` on, which holds it. */
  private[deleteindex] def setBit(words: Array[Long], first: Long, key: Long): Unit = {
    val offset = key - first
    words((offset >>> 6).toInt) |= 1L << offset
  }

  /**
   * The keys one read task found: a bitmap of their own range, from a multiple of 64 on (so the
   * driver ORs it word by word), or, where fewer bytes, the same keys ascending, each as its
   * distance from the one before (from `first` for the first), in 7-bit groups, low first, the
   * high bit set on all but a distance's last (where a task's keys are spread over the whole
   * range, its bitmap is mostly empty words: at 3x10^7 delete keys over 6x10^7 values, 10^6 keys
   * a task shipped a 7.5 MB bitmap, 226 MB a query, where their distances take ~1 MB). Keys
   * sparser than 64 bits a key are walked in a bitmap of their range too (in place of sorting
   * them) up to `SparseWalkWordsPerKey` words a key, and ship as distances: over at most 128
   * values a key, ~1-2 bytes a key, never more than the bitmap. Sparser still, the keys
   * themselves, as read. And whether a NULL key was among them.
   */
  final class Part private (val first: Long, val words: Array[Long], val distances: Array[Byte],
      val keys: Array[Long], val nullDeleted: Boolean) extends Serializable

  object Part {
    /**
     * Up to how many bitmap words a key a task's sparse keys are still walked in a bitmap of their
     * range for their distances (16 bytes a key at most, for a moment): at 10^8 data rows under
     * 10^7 delete rows, 2.5M keys a task over 2x10^8 values shipped 20 MB of keys each, where
     * their distances take ~3 MB.
     */
    private val SparseWalkWordsPerKey = 2L

    /** The part of `keys(0 until n)`. */
    def of(keys: Array[Long], n: Int, nullDeleted: Boolean): Part = {
      if (n == 0) return new Part(0L, Array.emptyLongArray, Array.emptyByteArray, Array.emptyLongArray, nullDeleted)
      var (min, max) = (keys(0), keys(0))
      var i = 1
      while (i < n) {
        if (keys(i) < min) min = keys(i)
        if (keys(i) > max) max = keys(i)
        i += 1
      }
      val first = min & ~63L // floor to a multiple of 64, also for negative keys
      val wordCount = ((max - first) >>> 6) + 1 // as unsigned: exact for any two longs
      if (java.lang.Long.compareUnsigned(wordCount, SparseWalkWordsPerKey * n) > 0) {
        return new Part(0L, Array.emptyLongArray, Array.emptyByteArray, java.util.Arrays.copyOf(keys, n), nullDeleted)
      }
      val words = new Array[Long](wordCount.toInt)
      i = 0
      while (i < n) {
        setBit(words, first, keys(i))
        i += 1
      }
      val distances = distancesOf(words, first, math.min(8L * words.length, Int.MaxValue - 8L).toInt)
      if (distances == null) new Part(first, words, Array.emptyByteArray, Array.emptyLongArray, nullDeleted)
      else new Part(first, Array.emptyLongArray, distances, Array.emptyLongArray, nullDeleted)
    }

    /**
     * The keys of `words` (a bitmap from `first` on) as distances, in one pass, or null when
     * they take `limit` bytes or more.
     */
    private def distancesOf(words: Array[Long], first: Long, limit: Int): Array[Byte] = {
      var into = new Array[Byte](math.min(limit, 1024 + words.length / 4))
      var (at, previous) = (0, first)
      var i = 0
      while (i < words.length) {
        var word = words(i)
        while (word != 0) {
          val key = first + 64L * i + java.lang.Long.numberOfTrailingZeros(word)
          var distance = key - previous
          val bytes = math.max(1, (70 - java.lang.Long.numberOfLeadingZeros(distance)) / 7) // 7 bits a byte
          if (at + bytes > into.length) {
            if (at + bytes >= limit) return null
            into = java.util.Arrays.copyOf(into, math.min(limit.toLong, math.max(at + bytes, 2L * into.length)).toInt)
          }
          while ((distance & ~0x7FL) != 0) {
            into(at) = ((distance & 0x7F) | 0x80).toByte
            distance >>>= 7
            at += 1
          }
          into(at) = distance.toByte
          at += 1
          previous = key
          word &= word - 1
        }
        i += 1
      }
      if (at >= limit) null else java.util.Arrays.copyOf(into, at)
    }
  }

  /**
   * The index of `parts` over `lower .. upper`, the bounds the delete files' metadata states for
   * the key: a key outside them means that metadata is wrong, and the query fails naming it
   * rather than drop a delete. `describe` names the key columns for that message.
   */
  def of(lower: Long, upper: Long, oldestSequenceNumber: Long, parts: Seq[Part], describe: String): KeyBitmapIndex = {
    require(lower <= upper, s"key range $lower .. $upper")
    val first = lower & ~63L
    val wordCount = ((upper - first) >>> 6) + 1
    require(java.lang.Long.compareUnsigned(wordCount, MaxWords) <= 0, s"key range $lower .. $upper is too wide for one bitmap")
    val words = new Array[Long](wordCount.toInt)
    // A key within the bounds, else the query fails naming it.
    def checked(key: Long): Long = if (key >= lower && key <= upper) key else throw new IllegalStateException(
      s"eqdelete: a delete row of $describe holds key $key, outside the bounds $lower .. $upper its delete files' metadata states")
    def add(key: Long): Unit = setBit(words, first, checked(key))
    parts.foreach { part =>
      if (part.words.nonEmpty) {
        val at = (part.first - first) >> 6 // both multiples of 64: whole words apart
        // A part's range spans its own keys only: its first and last set bits are keys.
        checked(part.first + java.lang.Long.numberOfTrailingZeros(part.words.head))
        checked(part.first + 64L * (part.words.length - 1) + 63 - java.lang.Long.numberOfLeadingZeros(part.words.last))
        var i = 0
        while (i < part.words.length) {
          words((at + i).toInt) |= part.words(i)
          i += 1
        }
      }
      // Distances: 7 bits a byte, low first, the high bit set on all but a distance's last.
      var at = 0
      var key = part.first
      while (at < part.distances.length) {
        var distance = 0L
        var shift = 0
        var byte = 0x80
        while ((byte & 0x80) != 0) {
          byte = part.distances(at)
          distance |= (byte & 0x7FL) << shift
          shift += 7
          at += 1
        }
        key += distance
        add(key)
      }
      part.keys.foreach(add)
    }
    new KeyBitmapIndex(first, words, oldestSequenceNumber, parts.exists(_.nullDeleted))
  }
}
