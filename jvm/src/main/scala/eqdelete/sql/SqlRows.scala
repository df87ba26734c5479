package eqdelete.sql

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.catalyst.util.GenericArrayData
import org.apache.spark.sql.types.{DataType, StructField, StructType}
import org.apache.spark.unsafe.types.UTF8String

/** Result rows of eqdelete's SQL functions and procedures, built from named Scala values. */
private[eqdelete] final case class SqlRows(fields: Seq[(String, DataType)], nullable: Set[String] = Set.empty) {
  val schema: StructType = StructType(fields.map { case (n, t) => StructField(n, t, nullable(n)) })

  /** One row from values by field name: a String becomes Spark's string, an Option its value or null. */
  def row(values: Map[String, Any]): InternalRow = new GenericInternalRow(fields.map { case (name, _) =>
    SqlRows.internal(values.getOrElse(name, throw new IllegalStateException(s"no value for result field $name")))
  }.toArray[Any])
}

private[eqdelete] object SqlRows {
  private def internal(value: Any): Any = value match {
    case null | None => null
    case Some(v) => internal(v)
    case s: String => UTF8String.fromString(s)
    case seq: Seq[_] => new GenericArrayData(seq.map(internal).toArray)
    case other => other
  }
}
