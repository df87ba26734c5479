package eqdelete.deleteindex.build

import eqdelete.deleteindex.KeyBytes

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.DataType

/**
 * One task's hashed keys: each row's key (the columns of `types` at the given ordinals) packed
 * ([[KeyBytes]]) after its length, one after the other, and hashed.
 */
private[build] final class HashedKeys(types: Array[DataType]) {
  private val key = new KeyBytes
  private var buffer = new Array[Byte](1 << 16)
  private var used = 0

  /** Packs `row`'s key, its columns at `ordinals`; returns its hash. */
  def add(row: InternalRow, ordinals: Array[Int]): Long = {
    val hash = key.reset().putKey(row, ordinals, types)
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
