package eqdelete.rules

import eqdelete.expressions.DataFileProperty
import eqdelete.planning.{DeletePlan, DeleteRowReader, EqualityDeleteSet}

import org.apache.iceberg.{Schema, Table}
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeReference}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/**
 * The part of a rewritten scan both plan builders share: the relation reading the data files
 * that carry equality deletes (with those removed), its columns, and per row the data
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

  val sequence: Alias = Alias(DataFileProperty(file, plan.dataFilesWithDeletes, DataFileProperty.Sequence), "_eqdelete_data_seq")()
  val scope: Alias = Alias(DataFileProperty(file, plan.dataFilesWithDeletes, DataFileProperty.Scope), "_eqdelete_data_scope")()

  /** The columns of `set`'s key, resolved by field id through the read schema. */
  def keyColumns(set: EqualityDeleteSet): Seq[Attribute] = set.keyColumns.map { name =>
    columns.find(_.name == name).getOrElse(throw new IllegalStateException(s"key column $name is not read"))
  }

  def reader(set: EqualityDeleteSet): DeleteRowReader = new DeleteRowReader(table.io(), readSchema, set.equalityIds)
}
