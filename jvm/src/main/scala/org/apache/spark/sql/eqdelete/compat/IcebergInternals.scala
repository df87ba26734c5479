package org.apache.spark.sql.eqdelete.compat

import scala.jdk.CollectionConverters._
import scala.util.{Try, Using}

import org.apache.iceberg.{BaseFileScanTask, DataFile, DeleteFile, FileContent, FileFormat, FileScanTask, InternalData, ManifestFile, ManifestFiles, MetadataColumns, PartitionSpecParser, Schema, SchemaParser, StructLike, Table, TableUtil}
import org.apache.iceberg.data.BaseDeleteLoader
import org.apache.iceberg.deletes.PositionDeleteIndex
import org.apache.iceberg.expressions.{Expression, ResidualEvaluator}
import org.apache.iceberg.io.{CloseableIterable, FileIO, InputFile, ResolvingFileIO}
import org.apache.iceberg.parquet.{Parquet, ParquetValueReader, VectorizedReader}
import org.apache.iceberg.shaded.org.apache.parquet.schema.MessageType
import org.apache.iceberg.spark.SparkV2Filters
import org.apache.iceberg.spark.data.SparkParquetReaders
import org.apache.iceberg.spark.data.vectorized.VectorizedSparkParquetReaders
import org.apache.iceberg.util.{ContentFileUtil, SnapshotUtil}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.sources.Filter
import org.apache.spark.sql.vectorized.ColumnarBatch

/**
 * Iceberg classes that are public in Java but not promised as API, the same in every release
 * eqdelete supports (1.10, 1.11, 1.12). The only place eqdelete names them, so a release that
 * changes one changes one file; a `LinkageError` from here leaves the scan native.
 */
object IcebergInternals {

  /**
   * A FileIO for kept state anywhere Iceberg can write (S3FileIO for s3://, GCSFileIO for gs://,
   * HadoopFileIO for the rest, as Iceberg's ResolvingFileIO picks), with the properties of the
   * table's own FileIO (its catalog's endpoint and credentials) given.
   */
  def stateIO(properties: java.util.Map[String, String], hadoopConf: org.apache.hadoop.conf.Configuration): FileIO = {
    val io = new ResolvingFileIO()
    io.setConf(hadoopConf)
    io.initialize(properties)
    io
  }

  /** A Spark filter as Iceberg's own scan converts it, or None. (`SparkFilters` is gone from 1.12.) */
  def icebergFilter(filter: Filter): Option[Expression] =
    Try[Expression](SparkV2Filters.convert(FilterTranslation.toV2(filter))).toOption.flatMap(Option(_))

  /** The live delete files of `content` a delete manifest lists, each copied (the reader reuses its entries). */
  def liveDeleteFiles(manifest: ManifestFile, table: Table, content: FileContent): Vector[DeleteFile] =
    Using.resource(ManifestFiles.readDeleteManifest(manifest, table.io(), table.specs())) { reader =>
      reader.asScala.filter(_.content() == content).map(_.copy(): DeleteFile).toVector
    }

  /** The schema the table had at `snapshotId` (time travel reads it). */
  def schemaAt(table: Table, snapshotId: Long): Schema = SnapshotUtil.schemaFor(table, snapshotId)

  /** The snapshot current at `timestampMillis`, as Iceberg's `as-of-timestamp` read option picks it. */
  def snapshotIdAsOfTime(table: Table, timestampMillis: Long): Long = SnapshotUtil.snapshotIdAsOfTime(table, timestampMillis)

  /** The table's format version (2, 3, ...). */
  def formatVersion(table: Table): Int = TableUtil.formatVersion(table)

  /** Whether `file` is a deletion vector. */
  def isDeletionVector(file: DeleteFile): Boolean = ContentFileUtil.isDV(file)

  /** Whether `file` is a position delete file referencing a single data file. */
  def isFileScoped(file: DeleteFile): Boolean = ContentFileUtil.isFileScoped(file)

  /** The one data file a position delete file references (named, or by its path bounds); None when it may cover several. */
  def referencedDataFile(file: DeleteFile): Option[String] = Option(ContentFileUtil.referencedDataFileLocation(file))

  /** The field id of a position delete file's `file_path` column, whose bounds its manifest entry keeps. */
  def positionDeletePathFieldId: Int = MetadataColumns.DELETE_FILE_PATH.fieldId()

  /** The rows of a file in a format eqdelete does not read with Spark's readers, projected, as generic records (each reused). */
  def genericRows(format: FileFormat, input: InputFile, projection: Schema): CloseableIterable[StructLike] =
    InternalData.read(format, input).project(projection).reuseContainers().build[StructLike]()

  /**
   * The data files a position delete file names: the one it is scoped to (a deletion vector, or
   * a file whose path bounds are equal), else every path in its rows, read from the file.
   */
  def positionDeleteTargets(io: FileIO, file: DeleteFile): Set[String] = referencedDataFile(file).map(Set(_)).getOrElse {
    val projection = new Schema(MetadataColumns.DELETE_FILE_PATH)
    Using.resource(genericRows(file.format(), io.newInputFile(file.location(), file.fileSizeInBytes()), projection)) { rows =>
      rows.asScala.map(_.get(0, classOf[CharSequence]).toString).toSet
    }
  }

  /**
   * The (data file path, position) rows of a position delete file (not a deletion vector), in
   * the file's order; the caller closes them.
   */
  def positionDeleteRows(io: FileIO, file: DeleteFile): CloseableIterable[(String, Long)] = {
    val projection = new Schema(MetadataColumns.DELETE_FILE_PATH, MetadataColumns.DELETE_FILE_POS)
    CloseableIterable.transform[StructLike, (String, Long)](
      genericRows(file.format(), io.newInputFile(file.location(), file.fileSizeInBytes()), projection),
      row => (row.get(0, classOf[CharSequence]).toString, row.get(1, classOf[java.lang.Long]).longValue()))
  }

  /** Hands `each` every live data file a data manifest lists; copy what is kept (the reader may reuse its entries). */
  def foreachLiveDataFile(manifest: ManifestFile, table: Table)(each: DataFile => Unit): Unit =
    Using.resource(ManifestFiles.read(manifest, table.io(), table.specs())) { reader =>
      reader.asScala.foreach(each)
    }

  /** Whether eqdelete reads this delete file's rows itself (Iceberg's generic readers: Parquet and Avro, not ORC). */
  def readsRows(file: DeleteFile): Boolean = file.format() == FileFormat.PARQUET || file.format() == FileFormat.AVRO

  /** The positions `files` delete in data file `path`, merged, in ascending order. */
  def deletedPositions(io: FileIO, files: Seq[DeleteFile], path: String): Array[Long] = {
    val positions = Array.newBuilder[Long]
    loadPositionDeletes(io, files.asJava, path).forEach((position: Long) => positions += position)
    positions.result()
  }

  /** `task` with only `deletes` left to apply: same data file, schema, spec and residual. */
  def withDeletes(task: FileScanTask, deletes: Array[DeleteFile]): FileScanTask =
    new BaseFileScanTask(task.file(), deletes, SchemaParser.toJson(task.schema()), PartitionSpecParser.toJson(task.spec()),
      ResidualEvaluator.unpartitioned(task.residual()))

  /** The task Iceberg's planning makes of a whole data file read in `schema` with `deletes`, its residual of `filter` as Iceberg's. */
  def fileScanTask(file: DataFile, deletes: Array[DeleteFile], schema: Schema, spec: org.apache.iceberg.PartitionSpec,
      filter: Expression, caseSensitive: Boolean): FileScanTask =
    new BaseFileScanTask(file, deletes, SchemaParser.toJson(schema), PartitionSpecParser.toJson(spec),
      ResidualEvaluator.of(spec, filter, caseSensitive))

  /** Every row of an equality delete file of a format eqdelete does not read itself, through Iceberg's loader. */
  def loadEqualityDeletes(io: FileIO, file: DeleteFile, projection: Schema): java.lang.Iterable[StructLike] =
    loader(io).loadEqualityDeletes(java.util.Collections.singletonList(file), projection)

  /** The positions `files` (position delete files or a deletion vector) delete in data file `path`, merged. */
  private[compat] def loadPositionDeletes(io: FileIO, files: java.util.List[DeleteFile], path: String): PositionDeleteIndex =
    loader(io).loadPositionDeletes(files, path)

  /** The rows of a Parquet file projected to `projection`, as Iceberg's Spark scan reads them (Catalyst values), each row reused. */
  def sparkParquetRows(input: InputFile, projection: Schema): CloseableIterable[InternalRow] =
    Parquet.read(input).project(projection)
      .createReaderFunc((fileSchema: MessageType) => SparkParquetReaders.buildReader(projection, fileSchema): ParquetValueReader[_])
      .reuseContainers()
      .build[InternalRow]()

  /**
   * The batches of a Parquet file of top-level primitive columns projected to `projection`, as
   * Iceberg's vectorized Spark scan reads data files (Arrow vectors, `batchSize` rows a batch,
   * each batch reused). Its builder takes a delete filter in 1.10 and not from 1.11: found by
   * its parameters, so one jar serves every release.
   */
  def sparkParquetBatches(input: InputFile, projection: Schema, batchSize: Int): CloseableIterable[ColumnarBatch] =
    Parquet.read(input).project(projection)
      .createBatchedReaderFunc((fileSchema: MessageType) => batchReader(projection, fileSchema))
      .recordsPerBatch(batchSize)
      .reuseContainers()
      .build[ColumnarBatch]()

  private lazy val batchReaderBuilder: java.lang.reflect.Method = {
    val builders = classOf[VectorizedSparkParquetReaders].getMethods.filter(m =>
      m.getName == "buildReader" && m.getParameterTypes.take(3).sameElements(Seq(classOf[Schema], classOf[MessageType], classOf[java.util.Map[_, _]])))
    builders.find(_.getParameterCount == 3)
      .orElse(builders.find(m => m.getParameterCount == 4 && m.getParameterTypes()(3).getSimpleName == "DeleteFilter"))
      .getOrElse(throw new NoSuchMethodException("VectorizedSparkParquetReaders.buildReader(Schema, MessageType, Map[, DeleteFilter])"))
  }

  private def batchReader(projection: Schema, fileSchema: MessageType): VectorizedReader[_] = {
    val arguments: Seq[AnyRef] = Seq(projection, fileSchema, java.util.Collections.emptyMap[Integer, AnyRef]())
    val withFilter = if (batchReaderBuilder.getParameterCount == 4) arguments :+ null else arguments
    batchReaderBuilder.invoke(null, withFilter: _*).asInstanceOf[VectorizedReader[_]]
  }

  private def loader(io: FileIO) = new BaseDeleteLoader((f: DeleteFile) => io.newInputFile(f.location(), f.fileSizeInBytes()))
}
