package eqdelete.deleteindex

import org.apache.spark.sql.types.{BinaryType, BooleanType, DataType, StringType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * The 64-bit hash [[HashedKeyIndex]] files a key under, column by column from `Seed`. The
 * interpreted path (`of`) and generated code (`code`) call the same functions, so both give
 * the same hash for the same key; values equal by Iceberg's equality hash alike.
 */
object KeyHash {
  val Seed: Long = 0x9E3779B97F4A7C15L

  private def mix(h: Long): Long = {
    var x = h
    x ^= x >>> 33
    x *= 0xFF51AFD7ED558CCDL
    x ^= x >>> 33
    x *= 0xC4CEB9FE1A85EC53L
    x ^ (x >>> 33)
  }

  def ofLong(h: Long, value: Long): Long = mix(h * 0x100000001B3L + value)
  def ofNull(h: Long): Long = mix(h ^ 0x6A09E667F3BCC909L)

  /** A value of any key type, as Catalyst holds it. */
  def ofValue(h: Long, value: Any): Long = value match {
    case null => ofNull(h)
    case s: UTF8String => ofLong(h, s.hashCode())
    case b: Array[Byte] => ofLong(h, java.util.Arrays.hashCode(b))
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
      else if (dataType == StringType) s"$self.ofLong($h, (long) $value.hashCode())"
      else if (dataType == BinaryType) s"$self.ofLong($h, (long) java.util.Arrays.hashCode($value))"
      else s"$self.ofValue($h, (Object) $value)"
    s"($isNull ? $self.ofNull($h) : $folded)"
  }
}
