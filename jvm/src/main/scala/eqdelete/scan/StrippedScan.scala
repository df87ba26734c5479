package eqdelete.scan

import eqdelete.planning.{DeletePlan, EqualityDeleteSet}
import eqdelete.read.DeleteRowReader

import org.apache.iceberg.{Schema, Table}
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeReference}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/**
 * The scan both strategies apply deletes to: the relation reading the data files with their
 * equality deletes stripped (position deletes kept), the query's filters on it, its columns,
 * and per row the data sequence number and partition scope of its file.
 *
 * @param relation reads the files with equality deletes: the columns the query and the keys
 *                 need (fresh ids) plus `_file`
 * @param source   `relation` under the query's own filters (rows filtered before deletes are
 *                 applied, which is the same), where Spark pushes them into Iceberg's scan
 * @param columns  the columns the query needs, in the original's order, as `relation` names them
 */
final case class StrippedScan(
    relation: DataSourceV2Relation,
    source: LogicalPlan,
    columns: Seq[Attribute],
    file: AttributeReference,
    plan: DeletePlan,
    table: Table,
    readSchema: Schema) {

  val sequence: Alias = Alias(DataFileProperty(file, plan.dataFileIndex, DataFileProperty.Sequence), "_eqdelete_data_seq")()
  val scope: Alias = Alias(DataFileProperty(file, plan.dataFileIndex, DataFileProperty.Scope), "_eqdelete_data_scope")()

  /** The columns of `set`'s key (named by field id through the read schema, so renames resolve). */
  def keyColumns(set: EqualityDeleteSet): Seq[Attribute] = set.keyColumns.map { name =>
    relation.output.find(_.name == name).getOrElse(throw new IllegalStateException(s"key column $name is not read"))
  }

  def reader(set: EqualityDeleteSet): DeleteRowReader = new DeleteRowReader(table.io(), readSchema, set.equalityIds)
}
