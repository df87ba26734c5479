package eqdelete.deleteindex.build

import eqdelete.deleteindex.{KeyBits, KeyBytes, KeyHash, LongKeyIndex}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.{DataType, StringType}

/**
 * One task's hashed keys: each row's key (the columns of `types` at the given ordinals) packed
 * ([[KeyBytes]]) after its length, one after the other, and hashed as [[KeyHash]] hashes the
 * same values boxed, without boxing the common types.
 */
private[build] final class HashedKeys(types: Array[DataType]) {
  private val key = new KeyBytes
  private var buffer = new Array[Byte](1 << 16)
  private var used = 0

  /** Packs `row`'s key, its columns at `ordinals`; returns its hash. */
  def add(row: InternalRow, ordinals: Array[Int]): Long = {
    key.reset()
    var hash = KeyHash.Seed
    var i = 0
    while (i < types.length) {
      val t = types(i)
      val at = ordinals(i)
      if (row.isNullAt(at)) {
        hash = KeyHash.ofNull(hash)
        key.putNull()
      } else if (t == StringType) {
        val s = row.getUTF8String(at)
        hash = KeyHash.ofLong(hash, s.hashCode())
        key.putUTF8String(s)
      } else if (LongKeyIndex.supports(t)) {
        val bits = KeyBits.at(row, at, t)
        hash = KeyHash.ofLong(hash, bits)
        key.putLong(bits)
      } else {
        val value = row.get(at, t)
        hash = KeyHash.ofValue(hash, value)
        key.put(t, value)
      }
      i += 1
    }
    room(KeyBytes.LengthBytes + key.length)
    KeyBytes.writeLength(buffer, used, key.length)
    System.arraycopy(key.bytes, 0, buffer, used + KeyBytes.LengthBytes, key.length)
    used += KeyBytes.LengthBytes + key.length
    hash
  }

  /** The packed keys: the first `length` bytes of `bytes` (the buffer itself, not copied: `hashed` reorders them into an exact array). */
  def bytes: Array[Byte] = buffer
  def length: Int = used

  private def room(n: Int): Unit = if (used + n > buffer.length) {
    buffer = java.util.Arrays.copyOf(buffer, math.max(used + n, math.min(Int.MaxValue - 8L, 2L * buffer.length).toInt))
  }
}
