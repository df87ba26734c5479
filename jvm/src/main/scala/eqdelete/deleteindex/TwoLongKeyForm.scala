package eqdelete.deleteindex

import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String

/**
 * A form of string key that is exactly two longs: `read` fills them where a key is in the form,
 * `write` gives the string back. Each is injective both ways (one string per pair of longs), so
 * two keys of one form are equal exactly when their longs are, and a key not in the form equals
 * none that is. The forms do not overlap (a canonical UUID has 36 bytes), so the read tasks know
 * a set's form from its first key ([[eqdelete.deleteindex.build.DeleteRowBatch]]).
 */
sealed abstract class TwoLongKeyForm(val id: Int, val describe: String) extends Serializable {
  /** `key`'s two longs into `out(highAt)` and `out(lowAt)`; false (`out` untouched) where it is not in this form, or NULL. */
  def read(key: UTF8String, out: Array[Long], highAt: Int, lowAt: Int): Boolean

  /** The key of these two longs: what `read` reads back into them. */
  def write(high: Long, low: Long): UTF8String
}

object TwoLongKeyForm {
  /** The form `key` is in, if any. */
  def of(key: UTF8String, out: Array[Long]): Option[TwoLongKeyForm] =
    Seq(Uuid, Short).find(_.read(key, out, 0, 1))

  /**
   * A UUID in canonical form: 36 characters, lowercase hex and dashes, as `java.util.UUID` writes
   * them and as Spark reads Iceberg's `uuid` type; its 128 bits.
   */
  case object Uuid extends TwoLongKeyForm(1, "UUIDs") {
    // Per byte, its value as a lowercase hex digit, else -1.
    private val HexValue: Array[Byte] = {
      val table = Array.fill[Byte](256)(-1)
      for (c <- '0' to '9') table(c) = (c - '0').toByte
      for (c <- 'a' to 'f') table(c) = (c - 'a' + 10).toByte
      table
    }
    private val Dashes = Array(8, 13, 18, 23)
    // Where the 32 hex digits lie in the 36 characters.
    private val DigitAt: Array[Int] = (0 until 36).filterNot(Dashes.contains).toArray

    /** Reads its bytes where they lie. */
    def read(key: UTF8String, out: Array[Long], highAt: Int, lowAt: Int): Boolean = {
      if (key == null || key.numBytes != 36) return false
      // Plain locals: a tuple here would be built (and its longs boxed) for every row.
      val base = key.getBaseObject
      val offset = key.getBaseOffset
      if (Platform.getByte(base, offset + 8) != '-' || Platform.getByte(base, offset + 13) != '-' ||
        Platform.getByte(base, offset + 18) != '-' || Platform.getByte(base, offset + 23) != '-') return false
      var high = 0L
      var low = 0L
      var bad = 0
      var i = 0
      while (i < 16) {
        val digit = HexValue(Platform.getByte(base, offset + DigitAt(i)) & 0xFF)
        bad |= digit
        high = (high << 4) | (digit & 0xF)
        i += 1
      }
      while (i < 32) {
        val digit = HexValue(Platform.getByte(base, offset + DigitAt(i)) & 0xFF)
        bad |= digit
        low = (low << 4) | (digit & 0xF)
        i += 1
      }
      if (bad < 0) false
      else {
        out(highAt) = high
        out(lowAt) = low
        true
      }
    }

    def write(high: Long, low: Long): UTF8String = UTF8String.fromString(new java.util.UUID(high, low).toString)
  }

  /**
   * A string of at most 15 bytes (order numbers, codes, short ids): its first 8 bytes in the high
   * long, the next 7 and its length (top byte) in the low one, zeros past its end. The length
   * makes it injective (a trailing zero byte is not padding). Read a byte at a time: a wider load
   * could reach past the end of an off-heap vector's memory.
   */
  case object Short extends TwoLongKeyForm(2, "strings of at most 15 bytes") {
    val MaxBytes = 15

    def read(key: UTF8String, out: Array[Long], highAt: Int, lowAt: Int): Boolean = {
      if (key == null) return false
      val n = key.numBytes
      if (n > MaxBytes) return false
      val base = key.getBaseObject
      val offset = key.getBaseOffset
      var high = 0L
      var low = n.toLong << 56
      var i = 0
      while (i < n && i < 8) {
        high |= (Platform.getByte(base, offset + i) & 0xFFL) << (8 * i)
        i += 1
      }
      while (i < n) {
        low |= (Platform.getByte(base, offset + i) & 0xFFL) << (8 * (i - 8))
        i += 1
      }
      out(highAt) = high
      out(lowAt) = low
      true
    }

    def write(high: Long, low: Long): UTF8String = {
      val n = (low >>> 56).toInt
      val bytes = new Array[Byte](n)
      var i = 0
      while (i < n) {
        bytes(i) = (if (i < 8) high >>> (8 * i) else low >>> (8 * (i - 8))).toByte
        i += 1
      }
      UTF8String.fromBytes(bytes)
    }
  }
}
