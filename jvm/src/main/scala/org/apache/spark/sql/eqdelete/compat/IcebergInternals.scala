package org.apache.spark.sql.eqdelete.compat

import scala.util.Try

import org.apache.iceberg.{BaseFileScanTask, DeleteFile, FileScanTask, PartitionSpecParser, Schema, SchemaParser, StructLike}
import org.apache.iceberg.data.BaseDeleteLoader
import org.apache.iceberg.expressions.{Expression, ResidualEvaluator}
import org.apache.iceberg.io.FileIO
import org.apache.iceberg.spark.SparkV2Filters
import org.apache.spark.sql.sources.Filter

/**
 * Iceberg classes that are public in Java but not promised as API, the same in every release
 * eqdelete supports (1.11, 1.12). The only place eqdelete names them, so a release that
 * changes one changes one file; a `LinkageError` from here leaves the scan native.
 */
object IcebergInternals {

  /** A Spark filter as Iceberg's own scan converts it, or None. (`SparkFilters` is gone from 1.12.) */
  def icebergFilter(filter: Filter): Option[Expression] =
    Try[Expression](SparkV2Filters.convert(FilterTranslation.toV2(filter))).toOption.flatMap(Option(_))

  /** `task` with only `deletes` left to apply: same data file, schema, spec and residual. */
  def withDeletes(task: FileScanTask, deletes: Array[DeleteFile]): FileScanTask =
    new BaseFileScanTask(task.file(), deletes, SchemaParser.toJson(task.schema()), PartitionSpecParser.toJson(task.spec()),
      ResidualEvaluator.unpartitioned(task.residual()))

  /** Every row of an equality delete file of a format eqdelete does not read itself, through Iceberg's loader. */
  def loadEqualityDeletes(io: FileIO, file: DeleteFile, projection: Schema): java.lang.Iterable[StructLike] = {
    val loader = new BaseDeleteLoader((f: DeleteFile) => io.newInputFile(f.location(), f.fileSizeInBytes()))
    loader.loadEqualityDeletes(java.util.Collections.singletonList(file), projection)
  }
}
