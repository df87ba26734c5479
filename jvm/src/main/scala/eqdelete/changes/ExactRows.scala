package eqdelete.changes

import org.apache.spark.sql.{functions => F, Column, DataFrame}
import org.apache.spark.sql.types.{ArrayType, BinaryType, DataType, DoubleType, FloatType, MapType, StructType}

/**
 * Comparing whole rows as Iceberg does, where Spark would not: Spark normalizes floating-point
 * grouping, join and window keys (-0.0 becomes 0.0, every NaN one NaN), also inside structs and
 * arrays, and an aggregate's output carries the normalized value. A changed row whose double is
 * -0.0 came out of `EXCEPT ALL` as 0.0. Here rows are compared by an exact key instead, in which
 * every float and double is its decimal string ("-0.0" and "0.0" differ), every binary its hex and
 * every map its sorted entries, and the rows themselves pass through untouched.
 */
object ExactRows {
  /** An exact, normalization-free key of `column`, of type `dataType`. */
  def key(column: Column, dataType: DataType): Column = dataType match {
    case FloatType | DoubleType => column.cast("string")
    case BinaryType => F.hex(column)
    case s: StructType =>
      F.when(column.isNull, F.lit(null)).otherwise(F.struct(s.fields.toIndexedSeq.map(f => key(column.getField(f.name), f.dataType).as(f.name)): _*))
    case a: ArrayType => F.transform(column, element => key(element, a.elementType))
    // Spark neither groups nor compares maps: its entries, each exact, sorted (keys are unique).
    case m: MapType => F.array_sort(F.transform(F.map_entries(column), entry =>
      F.struct(key(entry.getField("key"), m.keyType).as("key"), key(entry.getField("value"), m.valueType).as("value"))))
    case _ => column
  }

  /** The exact key of a row of `df`'s `columns`. */
  def rowKey(df: DataFrame, columns: Seq[String]): Column =
    F.struct(columns.map(c => key(df.col(ChangesPlan.quote(c)), df.schema(c).dataType).as(c)): _*)
}
