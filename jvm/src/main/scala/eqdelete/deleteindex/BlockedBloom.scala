package eqdelete.deleteindex

/**
 * A blocked Bloom filter over 64-bit hashes: two bits in one 64-bit word, 16 bits per key,
 * about 2% false positives. Small enough to stay in the CPU's cache where the table behind it
 * does not, so most rows (whose key has no delete) pay one cache-resident load.
 */
final class BlockedBloom private (words: Array[Long]) extends Serializable {
  private val mask = words.length - 1

  def add(hash: Long): Unit = words((hash >>> 32).toInt & mask) |= BlockedBloom.bits(hash)

  def mightContain(hash: Long): Boolean = {
    val bits = BlockedBloom.bits(hash)
    (words((hash >>> 32).toInt & mask) & bits) == bits
  }
}

object BlockedBloom {
  def forKeys(keys: Int): BlockedBloom = new BlockedBloom(new Array[Long](wordsFor(keys)))

  /** Its size for `keys` keys: two to four bytes a key (a power of two of words). */
  def bytesFor(keys: Long): Long = 8L * wordsFor(keys) + 64

  private def wordsFor(keys: Long): Int = {
    var words = 1
    while (words < keys / 4) words *= 2
    words
  }

  private def bits(hash: Long): Long = (1L << (hash & 63)) | (1L << ((hash >>> 6) & 63))
}
