package eqdelete.scan

import eqdelete.planning.{DeclinedException, EqualityDeleteSet, ScanDeletes}
import eqdelete.read.DeleteRowReader

import org.apache.iceberg.{Schema, Table}
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeMap, AttributeReference, AttributeSet, Expression, GetStructField, MetadataAttribute}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan}
import org.apache.spark.sql.connector.catalog.{Table => SparkCatalogTable}
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
 * @param columns  the columns the result gives: those the query needs, in the original's order, as
 *                 `relation` names them (the resolver: `_file` and `_pos`)
 */
final case class StrippedScan(
    relation: DataSourceV2Relation,
    source: LogicalPlan,
    columns: Seq[Attribute],
    file: Attribute,
    deletes: ScanDeletes,
    table: Table,
    readSchema: Schema) {

  val sequence: Alias = Alias(DataFileProperty(file, deletes.dataFileScopes, DataFileProperty.Sequence), "_eqdelete_data_seq")()
  val scope: Alias = Alias(DataFileProperty(file, deletes.dataFileScopes, DataFileProperty.Scope), "_eqdelete_data_scope")()

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

object StrippedScan {
  /**
   * The read of `relation` stripped, as the rule and the resolver both build it: the same
   * relation over `view` (Iceberg's view of a [[FileSelectingTable]]), reading what `needed`,
   * `conditions` and the delete keys use, plus `_file` and the `metadata` columns named, every
   * column under a fresh id, and `conditions` on top (rebound to those ids). Its `columns` are
   * `needed`, then the `metadata` columns. `detached`: without catalog and identifier, for a plan
   * Spark analyzes again (a DataFrame), which would otherwise reload Iceberg's own table by name.
   * Returns the scan, and the fresh id of each of `relation`'s columns.
   */
  def of(
      relation: DataSourceV2Relation,
      view: SparkCatalogTable,
      needed: Seq[Attribute],
      conditions: Seq[Expression],
      deletes: ScanDeletes,
      table: Table,
      readSchema: Schema,
      metadata: Seq[String] = Nil,
      detached: Boolean = false): (StrippedScan, AttributeMap[AttributeReference]) = {
    val keys = deletes.deleteSets.flatMap(_.keyPaths.map(_.head)).toSet
    val conditionRefs = AttributeSet(conditions.flatMap(_.references))
    val fresh = AttributeMap(relation.output.map(a => a -> a.newInstance()))
    val read = relation.output.filter(a => needed.contains(a) || conditionRefs.contains(a) || keys.contains(a.name)).map(fresh(_))
    // A metadata column the query reads already is reused; the others are added.
    val added = scala.collection.mutable.LinkedHashMap.empty[String, AttributeReference]
    def metadataColumn(name: String): AttributeReference =
      read.find(a => a.name == name && MetadataAttribute.isValid(a.metadata)).getOrElse(added.getOrElseUpdate(name,
        relation.metadataOutput.find(_.name == name)
          .getOrElse(throw DeclinedException(s"the table exposes no $name metadata column")).newInstance()))
    val file = metadataColumn("_file")
    val extra = metadata.map(metadataColumn)
    val stripped = relation.copy(table = view, output = read ++ added.values,
      catalog = if (detached) None else relation.catalog, identifier = if (detached) None else relation.identifier)
    val rebound = conditions.map(_.transform { case a: Attribute if fresh.contains(a) => fresh(a) })
    val source = rebound.reduceOption(And).map(Filter(_, stripped)).getOrElse(stripped)
    (StrippedScan(stripped, source, needed.map(fresh(_)) ++ extra, file, deletes, table, readSchema), fresh)
  }
}
