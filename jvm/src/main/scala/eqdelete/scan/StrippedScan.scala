package eqdelete.scan

import eqdelete.planning.{DeletePlan, EqualityDeleteSet}
import eqdelete.read.DeleteRowReader

import org.apache.iceberg.{Schema, Table}
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeReference, Expression, GetStructField}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation
import org.apache.spark.sql.types.StructType

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

  /**
   * The values of `set`'s key in a row: a column, or a field of a struct column (named by field
   * id through the read schema, so renames resolve). A field under a NULL struct is NULL.
   */
  def keyColumns(set: EqualityDeleteSet): Seq[Expression] = set.keyPaths.map { path =>
    val column: Expression = relation.output.find(_.name == path.head)
      .getOrElse(throw new IllegalStateException(s"key column ${path.head} is not read"))
    path.tail.foldLeft(column) { (struct, name) =>
      val fields = struct.dataType.asInstanceOf[StructType].fieldNames
      GetStructField(struct, fields.indexOf(name), Some(name))
    }
  }

  def reader(set: EqualityDeleteSet): DeleteRowReader = new DeleteRowReader(table.io(), readSchema, set.equalityIds)
}
