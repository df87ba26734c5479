package eqdelete.deleteindex

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.{BinaryType, BooleanType, DataType, Decimal, DecimalType, StringType}
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String

/**
 * A key as the bytes [[HashedKeyIndex]] stores and compares on a hash hit, column by column: a
 * byte saying NULL or not, then one byte for a boolean; 8 for integral, date/time and
 * floating-point values (as [[KeyBits]]) and for decimals of at most 18 digits (the unscaled
 * value at the column's scale); a 4-byte length and the bytes for strings, binary and wider
 * decimals. For keys of one list of types, equal bytes mean equal keys by Iceberg's equality
 * (NULL equals NULL, NaN equals NaN, -0.0 is not 0.0, binary by content), and the byte order
 * is fixed, so a driver and its executors pack alike.
 *
 * Comparing packed bytes touches one stored array where boxed keys touched one object per
 * column. A reusable buffer: the filter's generated code packs a row's key into its own
 * instance (one per task), and only for rows whose key the Bloom filter lets through.
 */
final class KeyBytes {
  private var buffer = new Array[Byte](64)
  private var used = 0

  def bytes: Array[Byte] = buffer
  def length: Int = used

  def reset(): KeyBytes = { used = 0; this }

  /** Drops what was put after the first `length` bytes (a key appended, then not wanted). */
  def truncate(length: Int): Unit = { require(length <= used); used = length }

  def putNull(): Unit = { room(1); buffer(used) = 0; used += 1 }

  def putBoolean(value: Boolean): Unit = {
    room(2)
    buffer(used) = 1
    buffer(used + 1) = if (value) 1 else 0
    used += 2
  }

  def putLong(value: Long): Unit = {
    room(9)
    buffer(used) = 1
    KeyBytes.writeLong(buffer, used + 1, value)
    used += 9
  }

  def putUTF8String(value: UTF8String): Unit = {
    val n = value.numBytes()
    header(n)
    value.writeToMemory(buffer, Platform.BYTE_ARRAY_OFFSET + used)
    used += n
  }

  def putBinary(value: Array[Byte]): Unit = {
    header(value.length)
    System.arraycopy(value, 0, buffer, used, value.length)
    used += value.length
  }

  /** A decimal of a `precision`, `scale` column, at that scale whatever scale the value carries. */
  def putDecimal(value: Decimal, precision: Int, scale: Int): Unit = {
    val atScale =
      if (value.scale == scale) value
      else {
        val copy = value.clone()
        require(copy.changePrecision(precision, scale), s"decimal $value does not fit decimal($precision, $scale)")
        copy
      }
    if (precision <= Decimal.MAX_LONG_DIGITS) putLong(atScale.toUnscaledLong)
    else putBinary(atScale.toJavaBigDecimal.unscaledValue().toByteArray)
  }

  /** A value of `dataType` as Catalyst holds it (the interpreted path). */
  def put(dataType: DataType, value: Any): Unit = (dataType, value) match {
    case (_, null) => putNull()
    case (BooleanType, b: Boolean) => putBoolean(b)
    case (StringType, s: UTF8String) => putUTF8String(s)
    case (BinaryType, b: Array[Byte]) => putBinary(b)
    case (d: DecimalType, v: Decimal) => putDecimal(v, d.precision, d.scale)
    case (t, v) if LongKeyIndex.supports(t) => putLong(KeyBits.of(v))
    case (t, v) => throw new IllegalArgumentException(s"not a $t key value: $v")
  }

  /**
   * Appends the key of `row` (its columns at `ordinals`, of `types`) and returns its hash, as
   * [[KeyHash]] hashes the same values boxed, without boxing the common types.
   */
  def putKey(row: InternalRow, ordinals: Array[Int], types: Array[DataType]): Long = {
    var hash = KeyHash.Seed
    var i = 0
    while (i < types.length) {
      val t = types(i)
      val at = ordinals(i)
      if (row.isNullAt(at)) {
        hash = KeyHash.ofNull(hash)
        putNull()
      } else if (t == StringType) {
        val s = row.getUTF8String(at)
        hash = KeyHash.ofString(hash, s)
        putUTF8String(s)
      } else if (LongKeyIndex.supports(t)) {
        val bits = KeyBits.at(row, at, t)
        hash = KeyHash.ofLong(hash, bits)
        putLong(bits)
      } else {
        val value = row.get(at, t)
        hash = KeyHash.ofValue(hash, value)
        put(t, value)
      }
      i += 1
    }
    hash
  }

  private def header(n: Int): Unit = {
    room(1 + KeyBytes.LengthBytes + n)
    buffer(used) = 1
    KeyBytes.writeLength(buffer, used + 1, n)
    used += 1 + KeyBytes.LengthBytes
  }

  private def room(n: Int): Unit =
    if (used + n > buffer.length) {
      buffer = java.util.Arrays.copyOf(buffer, math.max(buffer.length * 2, used + n))
    }
}

object KeyBytes {
  /** A length, as packed keys and the arrays holding several of them write it: 4 bytes, big-endian. */
  val LengthBytes = 4

  def writeLength(bytes: Array[Byte], at: Int, n: Int): Unit = {
    bytes(at) = (n >>> 24).toByte
    bytes(at + 1) = (n >>> 16).toByte
    bytes(at + 2) = (n >>> 8).toByte
    bytes(at + 3) = n.toByte
  }

  /** A long in 8 bytes, big-endian. */
  def writeLong(bytes: Array[Byte], at: Int, value: Long): Unit = {
    var i = 0
    while (i < 8) {
      bytes(at + i) = (value >>> (56 - 8 * i)).toByte
      i += 1
    }
  }

  def readLong(bytes: Array[Byte], at: Int): Long = {
    var value = 0L
    var i = 0
    while (i < 8) {
      value = (value << 8) | (bytes(at + i) & 0xFFL)
      i += 1
    }
    value
  }

  def readLength(bytes: Array[Byte], at: Int): Int =
    ((bytes(at) & 0xFF) << 24) | ((bytes(at + 1) & 0xFF) << 16) | ((bytes(at + 2) & 0xFF) << 8) | (bytes(at + 3) & 0xFF)

  /** Whether a key column of `dataType` can be packed. */
  def supports(dataType: DataType): Boolean = dataType match {
    case BooleanType | StringType | BinaryType | _: DecimalType => true
    case t => LongKeyIndex.supports(t)
  }

  /** `values` (of `types`) packed into `into`, which is returned. */
  def pack(types: Array[DataType], values: Array[Any], into: KeyBytes): KeyBytes = {
    into.reset()
    var i = 0
    while (i < types.length) {
      into.put(types(i), values(i))
      i += 1
    }
    into
  }

  /** The columns `ordinals` (of `types`) of `row` as a key's packed bytes, in an array of their own. */
  def packed(row: InternalRow, ordinals: Array[Int], types: Array[DataType]): Array[Byte] = {
    val key = new KeyBytes
    var i = 0
    while (i < types.length) {
      if (row.isNullAt(ordinals(i))) key.putNull() else key.put(types(i), row.get(ordinals(i), types(i)))
      i += 1
    }
    java.util.Arrays.copyOf(key.bytes, key.length)
  }

  /** Bytes a packed value of `dataType` takes, about: exact for fixed widths, a guess for others. */
  def estimatedBytes(dataType: DataType): Int = dataType match {
    case BooleanType => 2
    case d: DecimalType if d.precision <= Decimal.MAX_LONG_DIGITS => 9
    case StringType | BinaryType | _: DecimalType => 5 + 24
    case _ => 9
  }

  /** Generated Java packing `value` (of `dataType`, NULL when `isNull`) into the buffer `keyBytes`. */
  def code(keyBytes: String, dataType: DataType, value: String, isNull: String): String = {
    val put = dataType match {
      case BooleanType => s"$keyBytes.putBoolean($value);"
      case StringType => s"$keyBytes.putUTF8String($value);"
      case BinaryType => s"$keyBytes.putBinary($value);"
      case d: DecimalType => s"$keyBytes.putDecimal($value, ${d.precision}, ${d.scale});"
      case t => s"$keyBytes.putLong(${KeyBits.code(t, value)});"
    }
    s"if ($isNull) { $keyBytes.putNull(); } else { $put }"
  }
}
