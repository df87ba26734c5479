package eqdelete.read

import java.nio.ByteBuffer
import java.time.{LocalDate, LocalDateTime, OffsetDateTime}

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal


import org.apache.iceberg.{DeleteFile, FileFormat, InternalData, Schema, StructLike}
import org.apache.iceberg.io.FileIO
import org.apache.iceberg.types.{Type, TypeUtil, Types}
import org.apache.iceberg.util.DateTimeUtil
import org.apache.spark.sql.eqdelete.compat.IcebergInternals
import org.apache.spark.sql.types.Decimal
import org.apache.spark.unsafe.types.UTF8String

/**
 * Reads the key values of one equality delete file through Iceberg's own delete loader,
 * projected by field id (so renamed or reordered columns resolve as Iceberg resolves them),
 * as Catalyst's internal values in the order of `equalityIds`. A missing or corrupt file
 * throws, as it does natively: a skipped delete would resurrect rows.
 */
final class DeleteRowReader(io: FileIO, readSchema: Schema, equalityIds: Seq[Int]) extends Serializable {
  private val projection: Schema = TypeUtil.select(readSchema, equalityIds.map(Integer.valueOf).toSet.asJava)
  private val positions: Array[Int] = equalityIds.map { id =>
    projection.columns().asScala.indexWhere(_.fieldId() == id)
  }.toArray
  private val types: Array[Type] = equalityIds.map(id => readSchema.findType(id)).toArray

  /** Every key of `file` (duplicates included), read fully before returning. */
  def read(file: DeleteFile): Iterator[Array[Any]] = try {
    file.format() match {
      case FileFormat.PARQUET | FileFormat.AVRO =>
        // Plain rows: Iceberg's delete loader would also build a hash set of them, unused here.
        val input = io.newInputFile(file.location(), file.fileSizeInBytes())
        val rows = InternalData.read(file.format(), input).project(projection).reuseContainers().build[StructLike]()
        try {
          val keys = ArrayBuffer.empty[Array[Any]]
          rows.forEach(row => keys += keyValues(row))
          keys.iterator
        } finally {
          rows.close()
        }
      case _ =>
        IcebergInternals.loadEqualityDeletes(io, file, projection).asScala.iterator.map(keyValues(_)).toArray.iterator
    }
  } catch {
    case NonFatal(e) => throw new DeleteFileReadException(file.location(), e)
  }

  private def keyValues(row: StructLike): Array[Any] = {
    val values = new Array[Any](positions.length)
    var i = 0
    while (i < positions.length) {
      values(i) = DeleteRowReader.toCatalyst(types(i), row.get(positions(i), classOf[Object]))
      i += 1
    }
    values
  }
}

object DeleteRowReader {
  /** Iceberg generic value -> Catalyst internal value of the matching Spark type. */
  def toCatalyst(icebergType: Type, value: Any): Any = value match {
    case null => null
    case s: CharSequence => UTF8String.fromString(s.toString)
    case d: LocalDate => d.toEpochDay.toInt
    case t: OffsetDateTime => DateTimeUtil.microsFromTimestamptz(t)
    case t: LocalDateTime => DateTimeUtil.microsFromTimestamp(t)
    case d: java.math.BigDecimal =>
      val decimal = icebergType.asInstanceOf[Types.DecimalType]
      Decimal(d, decimal.precision(), decimal.scale())
    case b: ByteBuffer =>
      val copy = new Array[Byte](b.remaining())
      b.duplicate().get(copy)
      copy
    case days: Integer if icebergType.typeId() == Type.TypeID.DATE => days.intValue()
    case micros: java.lang.Long if icebergType.typeId() == Type.TypeID.TIMESTAMP => micros.longValue()
    case i: Integer if icebergType.typeId() == Type.TypeID.LONG => i.longValue()
    case other => other
  }
}

/** A delete file that cannot be read fails the query, as it does natively. */
final class DeleteFileReadException(val path: String, cause: Throwable)
  extends RuntimeException(s"eqdelete: cannot read equality delete file $path: ${cause.getMessage}", cause)

object DeleteFileReadException {
  /** The DeleteFileReadException in `e`'s chain of causes (Spark wraps task failures), if any. */
  def in(e: Throwable): Option[DeleteFileReadException] =
    Iterator.iterate(e)(_.getCause).takeWhile(_ != null).take(32).collectFirst { case d: DeleteFileReadException => d }
}
