package eqdelete.write

import org.apache.iceberg.{FileFormat, Table, TableProperties}
import org.apache.iceberg.io.OutputFileFactory
import org.apache.spark.TaskContext

/** Where and how eqdelete's Spark tasks write Iceberg files: the table's own settings. */
object IcebergFiles {
  /** New files of this task, named as Iceberg's own Spark writers name theirs. */
  def outputFiles(table: Table, format: FileFormat): OutputFileFactory = {
    val context = TaskContext.get()
    OutputFileFactory.builderFor(table, context.partitionId(), context.taskAttemptId())
      .format(format)
      .build()
  }

  /** The file format the table property `key` sets, else the table's data file format. */
  def format(table: Table, key: String): FileFormat =
    FileFormat.fromString(table.properties().getOrDefault(key,
      table.properties().getOrDefault(TableProperties.DEFAULT_FILE_FORMAT,
        TableProperties.DEFAULT_FILE_FORMAT_DEFAULT)))

  def targetFileSize(table: Table): Long = table.properties().getOrDefault(
    TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
    TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT.toString).toLong
}
