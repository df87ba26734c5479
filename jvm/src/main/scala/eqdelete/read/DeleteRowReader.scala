package eqdelete.read

import java.nio.ByteBuffer
import java.time.{LocalDate, LocalDateTime, OffsetDateTime}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.iceberg.{DeleteFile, FileFormat, Schema, StructLike}
import org.apache.iceberg.io.{CloseableIterable, FileIO}
import org.apache.iceberg.types.{Type, TypeUtil, Types}
import org.apache.iceberg.util.DateTimeUtil
import org.apache.spark.TaskContext
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, Expression, GenericInternalRow, GetStructField, UnsafeProjection}
import org.apache.spark.sql.eqdelete.compat.{IcebergInternals, IcebergSparkTables}
import org.apache.spark.sql.types.{DataType, Decimal, StructType}
import org.apache.spark.sql.vectorized.ColumnarBatch
import org.apache.spark.unsafe.types.UTF8String

/**
 * Reads the key values of one equality delete file, projected by field id (so renamed or
 * reordered columns resolve as Iceberg resolves them), as rows of Catalyst values in the order
 * of `equalityIds`. Parquet, the format writers use, goes through Iceberg's own Spark readers,
 * which yield Catalyst values directly: vectorized for top-level keys, as Iceberg reads data
 * files, row by row for nested ones. Other formats go through Iceberg's generic readers,
 * converted. A missing or corrupt file throws, as it does natively: a skipped delete
 * would resurrect rows.
 */
final class DeleteRowReader(io: FileIO, readSchema: Schema, equalityIds: Seq[Int]) extends Serializable {
  private val projection: Schema = TypeUtil.select(readSchema, equalityIds.map(Integer.valueOf).toSet.asJava)
  /** Per key, the positions from the projected row down to the key (one for a top-level column). */
  private val paths: Array[Array[Int]] = equalityIds.map(id => DeleteRowReader.positionPath(projection.asStruct(), id)).toArray
  private val types: Array[Type] = equalityIds.map(id => readSchema.findType(id)).toArray

  /**
   * Whether Iceberg's vectorized reader reads the keys, as it reads a data file's columns:
   * top-level columns of the types it decodes in batches (nested keys and the rest row by row).
   */
  private val vectorized: Boolean =
    paths.forall(_.length == 1) && types.forall(t => DeleteRowReader.VectorizedTypes.contains(t.typeId()))

  /** The key columns' Spark types, in the order of the rows `read` returns. */
  def keyTypes: Seq[DataType] = types.toSeq.map(IcebergSparkTables.sparkType)

  /**
   * Every key of `file` (duplicates included), streamed: each row is reused for the next, so a
   * caller keeping one copies it. The file is closed when the rows run out, or when the task
   * ends before that.
   */
  def read(file: DeleteFile): Iterator[InternalRow] = failingAs(file) {
    val input = io.newInputFile(file.location(), file.fileSizeInBytes())
    file.format() match {
      case FileFormat.PARQUET if vectorized =>
        val flatten = UnsafeProjection.create(keyExtractors)
        closing(file, IcebergInternals.sparkParquetBatches(input, projection, DeleteRowReader.BatchRows))
          .flatMap(_.rowIterator().asScala).map(flatten)
      case FileFormat.PARQUET =>
        val flatten = UnsafeProjection.create(keyExtractors)
        closing(file, IcebergInternals.sparkParquetRows(input, projection)).map(flatten)
      case FileFormat.AVRO =>
        val rows = IcebergInternals.genericRows(file.format(), input, projection)
        closing(file, rows).map(generic(new GenericInternalRow(paths.length)))
      case _ =>
        IcebergInternals.loadEqualityDeletes(io, file, projection).asScala.iterator.map(generic(new GenericInternalRow(paths.length)))
    }
  }

  /** Where each key column lies in the batches of `keyBatches`, in the order of `equalityIds`. */
  def keyOrdinals: Array[Int] = paths.map(_.head)

  /**
   * The key columns of `file` (see `keyOrdinals`), batch by batch, where Iceberg's vectorized
   * reader reads the file (Parquet, top-level keys), else None (read its rows with `read`): the
   * filter's index takes its keys from the vectors with no row in between, which at 10^7 delete
   * rows was most of what reading them cost. Each batch is reused for the next; the file is
   * closed as in `read`.
   */
  def keyBatches(file: DeleteFile): Option[Iterator[ColumnarBatch]] = failingAs(file) {
    if (!vectorized || file.format() != FileFormat.PARQUET) None
    else {
      val input = io.newInputFile(file.location(), file.fileSizeInBytes())
      Some(closing(file, IcebergInternals.sparkParquetBatches(input, projection, DeleteRowReader.BatchRows)))
    }
  }

  /** The keys of a row of `projection` as Iceberg's Spark reader returns it, nested fields included. */
  private def keyExtractors: Seq[Expression] = {
    val sparkStruct = IcebergSparkTables.sparkSchema(projection)
    paths.toSeq.map { path =>
      val top: Expression = BoundReference(path.head, sparkStruct(path.head).dataType, nullable = true)
      path.tail.foldLeft(top)((struct, position) => GetStructField(struct, position))
    }
  }

  /** `row`'s keys as Catalyst values, into `values`. */
  private def generic(values: GenericInternalRow)(row: StructLike): InternalRow = {
    var i = 0
    while (i < paths.length) {
      values.update(i, DeleteRowReader.toCatalyst(types(i), DeleteRowReader.valueAt(row, paths(i))))
      i += 1
    }
    values
  }

  /** The rows of `rows`, closing it at their end or the task's, failures named after `file`. */
  private def closing[T](file: DeleteFile, rows: CloseableIterable[T]): Iterator[T] = {
    val source = rows.iterator()
    var open = true
    def close(): Unit = if (open) { open = false; source.close() }
    Option(TaskContext.get()).foreach(_.addTaskCompletionListener[Unit](_ => close()))
    new Iterator[T] {
      def hasNext: Boolean = open && failingAs(file) {
        val more = source.hasNext
        if (!more) close()
        more
      }
      def next(): T = failingAs(file)(source.next())
    }
  }

  private def failingAs[T](file: DeleteFile)(body: => T): T =
    try body catch {
      case e: DeleteFileReadException => throw e
      case NonFatal(e) => throw new DeleteFileReadException(file.location(), e)
    }
}

object DeleteRowReader {
  /** Rows per batch of the vectorized reader (Iceberg's own default for Spark scans). */
  val BatchRows = 5000

  private val VectorizedTypes: Set[Type.TypeID] = {
    import Type.TypeID._
    Set(INTEGER, LONG, DATE, TIMESTAMP, FLOAT, DOUBLE, STRING, DECIMAL)
  }

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
