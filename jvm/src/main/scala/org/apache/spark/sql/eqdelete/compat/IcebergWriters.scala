package org.apache.spark.sql.eqdelete.compat

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.iceberg.{DataFile, DeleteFile, FileFormat, PartitionSpec, Schema, SerializableTable, StructLike, Table, TableProperties}
import org.apache.iceberg.data.{GenericRecord, InternalRecordWrapper, Record}
import org.apache.iceberg.deletes.{BaseDVFileWriter, PositionDelete, PositionDeleteIndex}
import org.apache.iceberg.io.{FileWriterFactory, OutputFileFactory, RollingDataWriter, RollingEqualityDeleteWriter, RollingPositionDeleteWriter}
import org.apache.iceberg.types.Types
import org.apache.spark.TaskContext

/** One partition's rows, written to files that roll over at the table's target size; `files` once closed. */
trait PartitionFiles[T, F] extends java.io.Closeable {
  def write(row: T): Unit
  def files: Seq[F]
}

/** Deletion vectors written into one Puffin file, merged with each data file's earlier position deletes. */
trait DeletionVectorFiles extends java.io.Closeable {
  def delete(path: String, position: Long, spec: PartitionSpec, partition: StructLike): Unit
  /** Once closed: the deletion vectors, and the delete files merged into them. */
  def files: Seq[DeleteFile]
  def merged: Seq[DeleteFile]
}

/**
 * Iceberg's file writers for eqdelete's Spark tasks. The rolling writers, the deletion-vector
 * writer, `OutputFileFactory`, `SerializableTable` and the generic records are Iceberg core and
 * data-module classes, not API, which is why they are named only here. Every file is written in the format and at the target size
 * the table's properties set, and named as Iceberg's own Spark writers name theirs.
 */
object IcebergWriters {
  /** An empty generic record of `struct`, the values Iceberg's generic writers take. */
  def newRecord(struct: Types.StructType): Record = GenericRecord.create(struct)

  /** A view of a generic record of `schema` that a `PartitionKey` can read partition values from (transforms need Iceberg's internal values). */
  def partitionSource(schema: Schema): Record => StructLike = {
    val wrapper = new InternalRecordWrapper(schema.asStruct())
    record => wrapper.wrap(record)
  }

  /** A copy of `table` Spark can ship to its tasks. */
  def serializable(table: Table): Table = SerializableTable.copyOf(table)

  /** The writers of the running Spark task; one per task, so its files are numbered in one sequence per format. */
  final class TaskWriters(table: Table) {
    private val outputs = mutable.Map.empty[FileFormat, OutputFileFactory]
    // One writer factory of each kind per task, shared by its partitions' writers (as before the move).
    private lazy val dataFactory =
      GenericWriterFactory.builder(table).dataFileFormat(dataFormat).dataSchema(table.schema()).build()
    private lazy val positionDeleteFactory = GenericWriterFactory.builder(table).deleteFileFormat(deleteFormat).build()
    private val equalityDeleteFactories = mutable.Map.empty[(Seq[Int], Types.StructType), FileWriterFactory[Record]]
    private val targetSize = table.properties().getOrDefault(TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
      TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT.toString).toLong
    private val dataFormat = format(TableProperties.DEFAULT_FILE_FORMAT)
    private val deleteFormat = format(TableProperties.DELETE_DEFAULT_FILE_FORMAT)

    /** The file format the table property `key` sets, else the table's data file format. */
    private def format(key: String): FileFormat =
      FileFormat.fromString(table.properties().getOrDefault(key,
        table.properties().getOrDefault(TableProperties.DEFAULT_FILE_FORMAT, TableProperties.DEFAULT_FILE_FORMAT_DEFAULT)))

    private def outputFiles(format: FileFormat): OutputFileFactory = outputs.getOrElseUpdate(format, {
      val context = TaskContext.get()
      OutputFileFactory.builderFor(table, context.partitionId(), context.taskAttemptId()).format(format).build()
    })

    /** Data files of the table's schema, in one partition of `spec`. */
    def data(spec: PartitionSpec, partition: StructLike): PartitionFiles[Record, DataFile] = {
      val writer = new RollingDataWriter[Record](dataFactory, outputFiles(dataFormat), table.io(), targetSize, spec, partition)
      rolling[Record, DataFile](writer.write, writer.close(), writer.result().dataFiles().asScala.toVector)
    }

    /** Equality delete files of rows of `rowSchema` matched on `equalityIds`, in one partition of `spec`. */
    def equalityDeletes(equalityIds: Array[Int], rowSchema: Schema, spec: PartitionSpec, partition: StructLike): PartitionFiles[Record, DeleteFile] = {
      val factory = equalityDeleteFactories.getOrElseUpdate((equalityIds.toSeq, rowSchema.asStruct()),
        GenericWriterFactory.builder(table).deleteFileFormat(deleteFormat)
          .equalityFieldIds(equalityIds).equalityDeleteRowSchema(rowSchema).build())
      val writer = new RollingEqualityDeleteWriter[Record](factory, outputFiles(deleteFormat), table.io(), targetSize, spec, partition)
      rolling[Record, DeleteFile](writer.write, writer.close(), writer.result().deleteFiles().asScala.toVector)
    }

    /** Position delete files of (data file path, row position), in one partition of `spec`; positions sorted by the caller. */
    def positionDeletes(spec: PartitionSpec, partition: StructLike): PartitionFiles[(String, Long), DeleteFile] = {
      val writer = new RollingPositionDeleteWriter[Record](positionDeleteFactory, outputFiles(deleteFormat), table.io(), targetSize, spec, partition)
      val delete = PositionDelete.create[Record]()
      rolling[(String, Long), DeleteFile](
        { case (path, position) => writer.write(delete.set(path, position)) }, writer.close(), writer.result().deleteFiles().asScala.toVector)
    }

    /**
     * Deletion vectors in one Puffin file; each data file's vector also holds the positions its
     * `existing(path)` position delete files (or deletion vector) delete.
     */
    def deletionVectors(existing: String => Seq[DeleteFile]): DeletionVectorFiles = {
      val previous: java.util.function.Function[String, PositionDeleteIndex] = { path =>
        val files = existing(path)
        if (files.isEmpty) null else IcebergInternals.loadPositionDeletes(table.io(), files.asJava, path)
      }
      val writer = new BaseDVFileWriter(outputFiles(FileFormat.PUFFIN), previous)
      new DeletionVectorFiles {
        def delete(path: String, position: Long, spec: PartitionSpec, partition: StructLike): Unit =
          writer.delete(path, position, spec, partition)
        def close(): Unit = writer.close()
        def files: Seq[DeleteFile] = writer.result().deleteFiles().asScala.toVector
        def merged: Seq[DeleteFile] = writer.result().rewrittenDeleteFiles().asScala.toVector
      }
    }
  }

  private def rolling[T, F](writeRow: T => Unit, closeFiles: => Unit, written: => Seq[F]): PartitionFiles[T, F] =
    new PartitionFiles[T, F] {
      def write(row: T): Unit = writeRow(row)
      def close(): Unit = closeFiles
      def files: Seq[F] = written
    }
}
