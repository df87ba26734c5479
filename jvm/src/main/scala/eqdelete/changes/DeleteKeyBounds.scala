package eqdelete.changes

import scala.jdk.CollectionConverters._

import org.apache.iceberg.{ContentFile, DataFile, DeleteFile, Table}
import org.apache.iceberg.types.{Comparators, Conversions, Type}

/**
 * Whether an equality delete file can match any row of a data file, from the column bounds and
 * null counts both keep in their manifests: it cannot when, on some key column, their values
 * cannot be equal. A delete row matches a data row only when every key column is equal (NULL
 * equal to NULL), so one such column is enough.
 *
 * Only bounds it can compare safely count: columns of a type that never changed in the table's
 * schemas (a promoted column's older files keep bounds in the older encoding), of an integral,
 * date, timestamp or string type (no NaN; Iceberg truncates string bounds outward, so they still
 * bound the values). Anything missing or else means "may match".
 */
private[changes] final class DeleteKeyBounds(table: Table) {
  /** Top-level columns whose bounds compare: one type in every schema, and a supported one. */
  private val comparable: Map[Int, Type] = {
    val schemas = table.schemas().asScala.values.toSeq
    schemas.flatMap(_.columns().asScala).map(_.fieldId()).distinct.flatMap { id =>
      schemas.flatMap(s => Option(s.findType(id))).distinct match {
        case Seq(t) if DeleteKeyBounds.Supported.contains(t.typeId()) => Some(id -> t)
        case _ => None
      }
    }.toMap
  }

  def mayMatch(delete: DeleteFile, data: DataFile): Boolean =
    delete.equalityFieldIds().asScala.forall(id => mayBeEqual(id.intValue, delete, data))

  private def mayBeEqual(id: Int, delete: DeleteFile, data: DataFile): Boolean = comparable.get(id) match {
    case None => true
    case Some(t) =>
      def nulls(file: ContentFile[_]): Boolean = Option(file.nullValueCounts()).flatMap(m => Option(m.get(id))).forall(_ > 0)
      def values(file: ContentFile[_]): Boolean = Option(file.valueCounts()).flatMap(m => Option(m.get(id))).forall(count =>
        count > Option(file.nullValueCounts()).flatMap(m => Option(m.get(id))).map(_.longValue).getOrElse(0L))
      val bothNull = nulls(delete) && nulls(data)
      bothNull || (values(delete) && values(data) && overlap(id, t, delete, data))
  }

  /** Whether the non-null value ranges overlap (or a bound is unknown). */
  private def overlap(id: Int, t: Type, delete: DeleteFile, data: DataFile): Boolean = {
    def bound(file: ContentFile[_], lower: Boolean): Option[AnyRef] =
      Option(if (lower) file.lowerBounds() else file.upperBounds()).flatMap(m => Option(m.get(id)))
        .map(buffer => Conversions.fromByteBuffer[AnyRef](t, buffer))
    val order = Comparators.forType[AnyRef](t.asPrimitiveType())
    (bound(delete, lower = true), bound(delete, lower = false), bound(data, lower = true), bound(data, lower = false)) match {
      case (Some(dLow), Some(dHigh), Some(fLow), Some(fHigh)) => order.compare(dLow, fHigh) <= 0 && order.compare(fLow, dHigh) <= 0
      case _ => true
    }
  }
}

private[changes] object DeleteKeyBounds {
  private val Supported = Set(Type.TypeID.INTEGER, Type.TypeID.LONG, Type.TypeID.DATE, Type.TypeID.TIMESTAMP,
    Type.TypeID.STRING)
}
