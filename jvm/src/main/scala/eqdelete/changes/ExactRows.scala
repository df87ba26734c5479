package eqdelete.changes

import org.apache.spark.sql.{functions => F, Column, DataFrame}
import org.apache.spark.sql.types.{ArrayType, BinaryType, DataType, DoubleType, FloatType, StructType}

/**
 * Comparing whole rows as Iceberg does, where Spark would not: Spark normalizes floating-point
 * grouping, join and window keys (-0.0 becomes 0.0, every NaN one NaN), also inside structs and
 * arrays, and an aggregate's output carries the normalized value. A changed row whose double is
 * -0.0 came out of `EXCEPT ALL` as 0.0. Here rows are compared by an exact key instead, in which
 * every float and double is its decimal string ("-0.0" and "0.0" differ) and every binary its hex,
 * and the rows themselves pass through untouched.
 */
object ExactRows {
  /** An exact, normalization-free key of `column`, of type `dataType`. */
  def key(column: Column, dataType: DataType): Column = dataType match {
    case FloatType | DoubleType => column.cast("string")
    case BinaryType => F.hex(column)
    case s: StructType =>
      F.when(column.isNull, F.lit(null)).otherwise(F.struct(s.fields.toIndexedSeq.map(f => key(column.getField(f.name), f.dataType).as(f.name)): _*))
    case a: ArrayType => F.transform(column, element => key(element, a.elementType))
    case _ => column
  }

  /** The exact key of a row of `df`'s `columns`. */
  def rowKey(df: DataFrame, columns: Seq[String]): Column =
    F.struct(columns.map(c => key(df.col(ChangesPlan.quote(c)), df.schema(c).dataType).as(c)): _*)
}
