package eqdelete.write

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import eqdelete.commit.{CommitOutcome, CommitOutcomeUnknownException, Failures, GuardedCommit}

import org.apache.iceberg.{ContentFile, DataFile, DeleteFile, PartitionKey, PartitionSpec, Schema, Table}
import org.apache.iceberg.data.Record
import org.apache.iceberg.types.TypeUtil
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.eqdelete.compat.{IcebergSparkTables, IcebergWriters, PartitionFiles}

/**
 * Writes equality delete files, and optionally new data files, through Iceberg's Java API and
 * commits them together in one `RowDelta`, the way a Flink upsert sink does: rows inserted
 * in the same commit as a delete survive it, since deletes only apply to older data.
 *
 * Files are written by Spark tasks, one equality delete file per table partition per task,
 * so the number of delete files follows the partitioning of the `deletes` frame.
 */
object EqualityDeleteWriter {

  /** What a commit added, for callers and tests. */
  final case class CommitResult(snapshotId: Long, dataFiles: Int, deleteFiles: Int)

  /**
   * @param tableName      an Iceberg table as Spark names it (`catalog.db.table`)
   * @param equalityColumns the columns whose values identify deleted rows (equality_ids)
   * @param deletes        rows holding at least the equality columns, plus the partition
   *                       source columns of the table's spec unless `globalDeletes`
   * @param inserts        rows to add in the same commit (all table columns), or null
   * @param globalDeletes  write the deletes under the table's unpartitioned spec, so they
   *                       apply to every partition
   */
  def commit(
      spark: SparkSession,
      tableName: String,
      equalityColumns: java.util.List[String],
      deletes: DataFrame,
      inserts: DataFrame,
      globalDeletes: Boolean): CommitResult = {
    val table = IcebergSparkTables.current(spark, tableName)
    val schema = table.schema()
    val caseSensitive = spark.sessionState.conf.caseSensitiveAnalysis

    val equalityIds = equalityColumns.asScala.toSeq.map { name =>
      val field = if (caseSensitive) schema.findField(name) else schema.caseInsensitiveFindField(name)
      require(field != null, s"equality column '$name' is not a column of $tableName " +
        s"(columns: ${schema.columns().asScala.map(_.name).mkString(", ")})")
      require(field.`type`().isPrimitiveType,
        s"equality column '$name' has type ${field.`type`()}; equality deletes need primitive columns")
      field.fieldId()
    }
    require(equalityIds.nonEmpty, "at least one equality column is needed")
    require(equalityIds.distinct.size == equalityIds.size,
      s"equality columns repeat a column: ${equalityColumns.asScala.mkString(", ")}")

    val deleteSpec = if (globalDeletes) unpartitionedSpec(table, tableName) else table.spec()
    val deleteSchema = TypeUtil.select(schema,
      (equalityIds ++ deleteSpec.fields().asScala.map(_.sourceId())).toSet.map((id: Int) => Integer.valueOf(id)).asJava)

    val serializableTable = IcebergWriters.serializable(table)
    val deleteFiles: Seq[DeleteFile] = Option(deletes).toSeq.flatMap { frame =>
      val rows = frame.select(columnsOf(deleteSchema, frame, "deletes"): _*)
      val ids = equalityIds.toArray
      TaskWrittenFiles.gathered(rows.rdd.mapPartitions { it =>
        writeDeletes(serializableTable, deleteSpec.specId(), deleteSchema, ids, it).iterator
      }, table.io(), "a write of equality deletes")(f => Seq(f.location()))
    }
    val dataFiles: Seq[DataFile] = try Option(inserts).toSeq.flatMap(dataFilesOf(table, _)) catch {
      case e: Throwable =>
        TaskWrittenFiles.delete(table.io(), deleteFiles.map(_.location()), "a write of equality deletes")
        throw e
    }
    require(deleteFiles.nonEmpty || dataFiles.nonEmpty,
      s"nothing to commit to $tableName: both the deletes and the inserts are empty")

    // Guarded as resolve's commit is: Iceberg alone takes a 409 to a commit that landed for a
    // conflict and retries it, which on a table a writer moved meanwhile sets the branch back
    // to the landed snapshot (GuardedCommitSuite shows it).
    val marker = SummaryKey -> java.util.UUID.randomUUID().toString
    GuardedCommit.run(table, marker) { guarded =>
      val rowDelta = guarded.newRowDelta()
      dataFiles.foreach(rowDelta.addRows)
      deleteFiles.foreach(rowDelta.addDeletes)
      rowDelta.set(marker._1, marker._2)
      rowDelta.commit()
    } match {
      case CommitOutcome.Committed(snapshotId, _) => CommitResult(snapshotId, dataFiles.size, deleteFiles.size)
      case CommitOutcome.NotCommitted(failure) => throw failure
      case CommitOutcome.Unknown(failure, why) =>
        throw new CommitOutcomeUnknownException(s"eqdelete: the commit writing equality deletes to $tableName has an " +
          s"unknown outcome: ${Failures.describe(failure)}; $why. Nothing was deleted: check the table's newest " +
          s"snapshot for $SummaryKey = ${marker._2} before writing them again.", -1L, failure)
      case CommitOutcome.NothingToCommit => throw new IllegalStateException(s"eqdelete: nothing was committed to $tableName")
    }
  }

  /**
   * Data files of `table` (uncommitted) holding the rows of `frame`, which has every column of the
   * table (by name), written by Spark tasks through Iceberg's writers.
   */
  def dataFilesOf(table: Table, frame: DataFrame): Seq[DataFile] = {
    val serializableTable = IcebergWriters.serializable(table)
    TaskWrittenFiles.gathered(frame.select(columnsOf(table.schema(), frame, "inserts"): _*).rdd
      .mapPartitions(it => writeData(serializableTable, it).iterator), table.io(), "a write of data files")(f => Seq(f.location()))
  }

  /** The snapshot summary property marking a commit of this writer. */
  val SummaryKey = "eqdelete.write-id"

  private def unpartitionedSpec(table: Table, tableName: String): PartitionSpec =
    table.specs().values().asScala.toSeq.sortBy(-_.specId()).find(_.isUnpartitioned).getOrElse(
      throw new IllegalArgumentException(s"global equality deletes need an unpartitioned spec, " +
        s"and $tableName has none (specs: ${table.specs().values().asScala.mkString("; ")})"))

  private def columnsOf(schema: Schema, frame: DataFrame, what: String) = {
    val available = frame.columns.toSet
    val names = schema.columns().asScala.map(_.name).toSeq
    val missing = names.filterNot(available.contains)
    require(missing.isEmpty, s"the $what lack column(s) ${missing.mkString(", ")} " +
      s"(needed: ${names.mkString(", ")}; given: ${frame.columns.mkString(", ")})")
    names.map(frame.col)
  }

  private def writeDeletes(
      table: Table,
      specId: Int,
      deleteSchema: Schema,
      equalityIds: Array[Int],
      rows: Iterator[org.apache.spark.sql.Row]): Seq[DeleteFile] = {
    val spec = table.specs().get(specId)
    val task = new IcebergWriters.TaskWriters(table)
    writePartitioned(table, spec, deleteSchema, rows)(partition => task.equalityDeletes(equalityIds, deleteSchema, spec, partition))
  }

  private def writeData(table: Table, rows: Iterator[org.apache.spark.sql.Row]): Seq[DataFile] = {
    val task = new IcebergWriters.TaskWriters(table)
    writePartitioned(table, table.spec(), table.schema(), rows)(partition => task.data(table.spec(), partition))
  }

  /**
   * `rows` of `schema` as records, through one rolling writer per partition of `spec` this task
   * sees; the files written deleted if it fails or is killed ([[TaskWrittenFiles.deletingOnFailure]]).
   */
  private def writePartitioned[F <: ContentFile[F]](table: Table, spec: PartitionSpec, schema: Schema,
      rows: Iterator[org.apache.spark.sql.Row])(open: PartitionKey => PartitionFiles[Record, F]): Seq[F] = {
    val convert = new RecordConverter(schema)
    val partitionKey = new PartitionKey(spec, schema)
    val partitionSource = IcebergWriters.partitionSource(schema)
    val writers = mutable.LinkedHashMap.empty[PartitionKey, PartitionFiles[Record, F]]
    TaskWrittenFiles.deletingOnFailure[F](table.io(), _.location())(
        () => { writers.values.foreach(_.close()); writers.values.toVector.flatMap(_.files) }) {
      rows.foreach { row =>
        val record = convert(row)
        partitionKey.partition(partitionSource(record))
        writers.getOrElseUpdate(partitionKey.copy(), open(partitionKey.copy())).write(record)
      }
    }
  }
}
