package eqdelete.write

import java.nio.ByteBuffer
import java.time.{Instant, LocalDate, LocalDateTime, ZoneOffset}
import java.util.UUID

import scala.jdk.CollectionConverters._

import org.apache.iceberg.Schema
import org.apache.iceberg.data.Record
import org.apache.iceberg.types.{Type, Types}
import org.apache.spark.sql.Row
import org.apache.spark.sql.eqdelete.compat.IcebergWriters

/**
 * Turns external Spark rows into Iceberg generic records, the Java types Iceberg's generic
 * writers expect (LocalDate, OffsetDateTime, ByteBuffer...). The row's top-level fields are
 * matched to the schema's by position (callers select the columns in schema order first);
 * the fields of a struct by name, so a struct may hold more fields than the schema selects.
 */
final class RecordConverter(schema: Schema) extends Serializable {
  private val fields = schema.columns().asScala.toIndexedSeq
  fields.foreach(f => RecordConverter.checkWritable(f.name, f.`type`()))

  def apply(row: Row): Record = {
    val record = IcebergWriters.newRecord(schema.asStruct())
    var i = 0
    while (i < fields.length) {
      record.set(i, RecordConverter.convert(fields(i).`type`(), row.get(i)))
      i += 1
    }
    record
  }
}

object RecordConverter {
  private def checkWritable(name: String, icebergType: Type): Unit =
    if (icebergType.isNestedType) {
      icebergType.asNestedType().fields().asScala.foreach(f => checkWritable(s"$name.${f.name}", f.`type`()))
    } else {
      require(icebergType.isPrimitiveType, s"column '$name' has type $icebergType, which cannot be written here")
    }

  def convert(icebergType: Type, value: Any): Any = (icebergType.typeId(), value) match {
    case (_, null) => null
    case (Type.TypeID.STRUCT, row: Row) =>
      val struct = icebergType.asStructType()
      val record = IcebergWriters.newRecord(struct)
      struct.fields().asScala.zipWithIndex.foreach { case (f, i) => record.set(i, convert(f.`type`(), row.getAs[Any](f.name))) }
      record
    case (Type.TypeID.LIST, elements: scala.collection.Seq[_]) =>
      elements.map(convert(icebergType.asListType().elementType(), _)).asJava
    case (Type.TypeID.MAP, entries: scala.collection.Map[_, _]) =>
      val map = icebergType.asMapType()
      entries.map { case (k, v) => convert(map.keyType(), k) -> convert(map.valueType(), v) }.asJava
    case (Type.TypeID.INTEGER, n: Number) => n.intValue()
    case (Type.TypeID.LONG, n: Number) => n.longValue()
    case (Type.TypeID.FLOAT, n: Number) => n.floatValue()
    case (Type.TypeID.DOUBLE, n: Number) => n.doubleValue()
    case (Type.TypeID.DATE, d: java.sql.Date) => d.toLocalDate
    case (Type.TypeID.DATE, d: LocalDate) => d
    case (Type.TypeID.TIMESTAMP, t) =>
      val instant = t match {
        case ts: java.sql.Timestamp => ts.toInstant
        case i: Instant => i
        case l: LocalDateTime => l.toInstant(ZoneOffset.UTC)
        case other => throw unsupported(icebergType, other)
      }
      if (icebergType.asInstanceOf[Types.TimestampType].shouldAdjustToUTC()) {
        instant.atOffset(ZoneOffset.UTC)
      } else {
        t match {
          case l: LocalDateTime => l // timestamp_ntz arrives as local time already
          case _ => LocalDateTime.ofInstant(instant, ZoneOffset.UTC)
        }
      }
    case (Type.TypeID.BINARY, b: Array[Byte]) => ByteBuffer.wrap(b)
    case (Type.TypeID.FIXED, b: Array[Byte]) => b
    case (Type.TypeID.UUID, s: String) => UUID.fromString(s)
    case (Type.TypeID.DECIMAL, d: java.math.BigDecimal) =>
      d.setScale(icebergType.asInstanceOf[Types.DecimalType].scale())
    case (Type.TypeID.STRING | Type.TypeID.BOOLEAN, v) => v
    case (_, other) => throw unsupported(icebergType, other)
  }

  private def unsupported(icebergType: Type, value: Any) = new IllegalArgumentException(
    s"cannot write a ${value.getClass.getName} value into an Iceberg $icebergType column")
}
