package eqdelete.rules

import eqdelete.expressions.DataFileProperty
import eqdelete.planning.{DeletePlan, DeleteRowReader, EqualityDeleteRef, EqualityDeleteSet}

import org.apache.iceberg.{Schema, Table}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeReference}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/**
 * The part of a rewritten scan both plan builders share: the relation reading the data files
 * eqdelete applies equality deletes to (with Iceberg's removed), its columns, and per row the data
 * sequence number and partition scope of its file.
 *
 * @param relation reads the files with equality deletes; `output` is the original's columns
 *                 (fresh ids) plus `_file`
 * @param columns  the original relation's columns, in order, as this relation names them
 */
final case class DeletedRowsScan(
    relation: DataSourceV2Relation,
    columns: Seq[AttributeReference],
    file: AttributeReference,
    plan: DeletePlan,
    table: Table,
    readSchema: Schema) {

  val sequence: Alias = Alias(DataFileProperty(file, plan.dataFileIndex, DataFileProperty.Sequence), "_eqdelete_data_seq")()
  val scope: Alias = Alias(DataFileProperty(file, plan.dataFileIndex, DataFileProperty.Scope), "_eqdelete_data_scope")()

  /** The columns of `set`'s key, resolved by field id through the read schema. */
  def keyColumns(set: EqualityDeleteSet): Seq[Attribute] = set.keyColumns.map { name =>
    columns.find(_.name == name).getOrElse(throw new IllegalStateException(s"key column $name is not read"))
  }

  def reader(set: EqualityDeleteSet): DeleteRowReader = new DeleteRowReader(table.io(), readSchema, set.equalityIds)

  /**
   * (key values, scope, delete sequence number) of every delete row of `files`, read by Spark
   * tasks: at least one per ~1M rows and, for many small files, one per core.
   */
  def deleteRows(session: SparkSession, set: EqualityDeleteSet, files: Seq[EqualityDeleteRef]): RDD[(Array[Any], Long, Long)] = {
    val reader = this.reader(set)
    val records = files.map(_.file.recordCount()).sum
    val parallelism = session.sparkContext.defaultParallelism
    val slices = math.max(1L, math.min(files.size.toLong,
      math.max((records + DeletedRowsScan.RowsPerTask - 1) / DeletedRowsScan.RowsPerTask, parallelism.toLong))).toInt
    val described = files.map(ref => (ref.file, ref.scope.toLong, ref.sequenceNumber))
    session.sparkContext.parallelize(described, slices).mapPartitions { refs =>
      refs.flatMap { case (file, scope, seq) => reader.read(file).map(keys => (keys, scope, seq)) }
    }.setName(s"eqdelete delete rows of ${files.size} file(s) on ${set.describeKeys}")
  }
}

object DeletedRowsScan {
  val RowsPerTask = 1000000L
}
