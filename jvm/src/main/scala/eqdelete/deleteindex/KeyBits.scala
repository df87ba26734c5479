package eqdelete.deleteindex

import org.apache.spark.sql.types.{DataType, DateType, DoubleType, FloatType, IntegerType}

/**
 * A key value as the long the primitive index stores, and a join compares: integral values as
 * they are; floats and doubles as their bits, with every NaN alike. That is Iceberg's (Java's)
 * equality: NaN equals NaN, and -0.0 is not 0.0, where Spark's `=` and its join-key
 * normalisation would say otherwise.
 */
object KeyBits {
  def of(value: Any): Long = value match {
    case d: java.lang.Double => java.lang.Double.doubleToLongBits(d)
    case f: java.lang.Float => java.lang.Float.floatToIntBits(f).toLong
    case n: Number => n.longValue()
    case other => throw new IllegalArgumentException(s"not an integral or floating-point key: $other")
  }

  /** The key at `ordinal` of `row`, of `dataType`, read without boxing. */
  def at(row: org.apache.spark.sql.catalyst.InternalRow, ordinal: Int, dataType: DataType): Long = dataType match {
    case DoubleType => java.lang.Double.doubleToLongBits(row.getDouble(ordinal))
    case FloatType => java.lang.Float.floatToIntBits(row.getFloat(ordinal)).toLong
    case IntegerType | DateType => row.getInt(ordinal).toLong
    case _ => row.getLong(ordinal)
  }

  /** The same in generated Java, for `value` of `dataType`. */
  def code(dataType: DataType, value: String): String = dataType match {
    case DoubleType => s"java.lang.Double.doubleToLongBits($value)"
    case FloatType => s"((long) java.lang.Float.floatToIntBits($value))"
    case _ => s"((long) $value)"
  }

  def isFloating(dataType: DataType): Boolean = dataType == DoubleType || dataType == FloatType
}
