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
  /** Per key, the positions from the projected row down to the key (one for a top-level column). */
  private val paths: Array[Array[Int]] = equalityIds.map(id => DeleteRowReader.positionPath(projection.asStruct(), id)).toArray
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
    val values = new Array[Any](paths.length)
    var i = 0
    while (i < paths.length) {
      values(i) = DeleteRowReader.toCatalyst(types(i), DeleteRowReader.valueAt(row, paths(i)))
      i += 1
    }
    values
  }
}

object DeleteRowReader {
  /** Positions from `struct` down to field `id`, through nested structs. */
  private def positionPath(struct: Types.StructType, id: Int): Array[Int] = {
    val fields = struct.fields().asScala
    val direct = fields.indexWhere(_.fieldId() == id)
    if (direct >= 0) Array(direct)
    else {
      val i = fields.indexWhere(f => f.`type`().isStructType && TypeUtil.indexById(f.`type`().asStructType()).containsKey(id))
      require(i >= 0, s"field $id is not in $struct")
      i +: positionPath(fields(i).`type`().asStructType(), id)
    }
  }

  /** The value at `path`; NULL when a struct on the way is NULL, as Iceberg's own projection gives. */
  private def valueAt(row: StructLike, path: Array[Int]): Any = {
    var struct = row
    var i = 0
    while (i < path.length - 1) {
      struct = struct.get(path(i), classOf[StructLike])
      if (struct == null) return null
      i += 1
    }
    struct.get(path(path.length - 1), classOf[Object])
  }

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
    case uuid: java.util.UUID => UTF8String.fromString(uuid.toString) // Spark reads Iceberg's uuid as its string
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
