package eqdelete.deleteindex

import org.apache.spark.sql.types.{BinaryType, BooleanType, DataType, StringType}
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String

/**
 * The 64-bit hash [[HashedKeyIndex]] files a key under, column by column from `Seed`. The
 * interpreted path (`of`) and generated code (`code`) call the same functions, so both give
 * the same hash for the same key; values equal by Iceberg's equality hash alike.
 */
object KeyHash {
  val Seed: Long = 0x9E3779B97F4A7C15L

  /** Murmur3's 64-bit finalizer: every input bit moves every output bit (the two-long index's slots too). */
  def mix(h: Long): Long = {
    var x = h
    x ^= x >>> 33
    x *= 0xFF51AFD7ED558CCDL
    x ^= x >>> 33
    x *= 0xC4CEB9FE1A85EC53L
    x ^ (x >>> 33)
  }

  def ofLong(h: Long, value: Long): Long = mix(h * 0x100000001B3L + value)
  def ofNull(h: Long): Long = mix(h ^ 0x6A09E667F3BCC909L)

  def ofString(h: Long, s: UTF8String): Long = ofLong(h, bytes(s.getBaseObject, s.getBaseOffset, s.numBytes))
  def ofBinary(h: Long, b: Array[Byte]): Long = ofLong(h, bytes(b, Platform.BYTE_ARRAY_OFFSET, b.length))

  /**
   * `n` bytes from `offset` of `base` folded 8 at a time, each word one multiply from the last:
   * `mix` then spreads the result. Spark's `UTF8String.hashCode` (Murmur3, 4 bytes a round, two
   * multiplies each) was 18% of the samples of a read of 10^7 UUID strings against as many delete
   * keys, half in the index's tasks and half in the lookups (JFR). Native byte order, as Spark's
   * own hashes: every JVM of a cluster shares it.
   */
  private def bytes(base: AnyRef, offset: Long, n: Int): Long = {
    var x = n * 0x9E3779B97F4A7C15L
    var i = 0
    while (i + 8 <= n) {
      x = java.lang.Long.rotateLeft((x ^ Platform.getLong(base, offset + i)) * 0xC2B2AE3D27D4EB4FL, 29)
      i += 8
    }
    if (i + 4 <= n) {
      x = java.lang.Long.rotateLeft((x ^ (Platform.getInt(base, offset + i) & 0xFFFFFFFFL)) * 0xC2B2AE3D27D4EB4FL, 29)
      i += 4
    }
    while (i < n) {
      x = java.lang.Long.rotateLeft((x ^ (Platform.getByte(base, offset + i) & 0xFFL)) * 0xC2B2AE3D27D4EB4FL, 29)
      i += 1
    }
    x
  }

  /** A value of any key type, as Catalyst holds it. */
  def ofValue(h: Long, value: Any): Long = value match {
    case null => ofNull(h)
    case s: UTF8String => ofString(h, s)
    case b: Array[Byte] => ofBinary(h, b)
    case b: java.lang.Boolean => ofLong(h, if (b) 1L else 0L)
    case n @ (_: java.lang.Long | _: java.lang.Integer | _: java.lang.Short | _: java.lang.Byte |
        _: java.lang.Double | _: java.lang.Float) => ofLong(h, KeyBits.of(n))
    case other => ofLong(h, other.hashCode()) // Decimal: its hashCode agrees with its equals
  }

  def of(values: Array[Any]): Long = {
    var h = Seed
    var i = 0
    while (i < values.length) {
      h = ofValue(h, values(i))
      i += 1
    }
    h
  }

  /** Generated Java for the hash `h` with `value` (of `dataType`, NULL when `isNull`) folded in. */
  def code(h: String, dataType: DataType, value: String, isNull: String): String = {
    val self = "eqdelete.deleteindex.KeyHash"
    // The same functions `ofValue` applies, called directly for the common types.
    val folded =
      if (dataType == BooleanType) s"$self.ofLong($h, $value ? 1L : 0L)"
      else if (LongKeyIndex.supports(dataType)) s"$self.ofLong($h, ${KeyBits.code(dataType, value)})"
      else if (dataType == StringType) s"$self.ofString($h, $value)"
      else if (dataType == BinaryType) s"$self.ofBinary($h, $value)"
      else s"$self.ofValue($h, (Object) $value)"
    s"($isNull ? $self.ofNull($h) : $folded)"
  }
}
