package eqdelete.resolve

import eqdelete.planning.{ScanDeletes, DeletePlanner, LiveDeleteFiles, ScanFilters}

import org.apache.iceberg.{DeleteFile, Table}
import org.apache.iceberg.expressions.{Evaluator, Expression => IcebergExpression, Projections}
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/**
 * The read a resolve starts from: the table as Spark reads it now (its snapshot, or -1 when it
 * has none), its format version, and the `where` filter's conjuncts on the relation's attributes.
 */
final case class ResolveTarget(
    table: Table,
    relation: DataSourceV2Relation,
    snapshotId: Long,
    formatVersion: Int,
    conditions: Seq[Expression])

/**
 * What resolving a table's equality deletes will do, from metadata only: the equality delete
 * files it removes, and the scan's deletes (restricted to those files) whose matching rows become
 * position deletes or deletion vectors.
 *
 * An equality delete file D may be removed only when every data file it can apply to (same
 * spec and partition, or any for a global D, with a smaller data sequence number) is resolved.
 * Under a filter, that holds when D's partition lies wholly inside the filter (Iceberg's strict
 * projection of the filter on D's spec says so): then every row of every such data file
 * satisfies the filter and is read. A global D needs the whole table, so no filter.
 *
 * @param removable the equality delete files to remove
 * @param kept      live equality delete files the filter leaves in place
 * @param deletes   the deletes of the selected files, applying only `removable`; None
 *                  when no planned data file carries one
 */
final case class ResolveWork(target: ResolveTarget, removable: Seq[DeleteFile], kept: Int, deletes: Option[ScanDeletes]) {
  def table: Table = target.table
  def snapshotId: Long = target.snapshotId
  def formatVersion: Int = target.formatVersion
}

object ResolveWork {

  /** Nothing to resolve: the table has no snapshot. */
  def empty(target: ResolveTarget): ResolveWork = ResolveWork(target, Nil, 0, None)

  /**
   * The target's conditions must each be one Iceberg can evaluate on partitions and files, or
   * resolving would skip rows of files it selects.
   */
  def of(target: ResolveTarget, caseSensitive: Boolean): ResolveWork = {
    val table = target.table
    val untranslatable = target.conditions.filter(ScanFilters.icebergFilter(_).isEmpty)
    if (untranslatable.nonEmpty) {
      throw new IllegalArgumentException(s"eqdelete: cannot resolve equality deletes of ${table.name()} with the filter " +
        s"${untranslatable.map(_.sql).mkString(" AND ")}: Iceberg cannot evaluate it on partitions; use a filter on " +
        "partition columns")
    }
    val filter = ScanFilters.icebergFilter(target.conditions)
    val live = LiveDeleteFiles.equalityDeletes(table, target.snapshotId)
    val (removable, kept) = live.partition(wholly(table, filter, caseSensitive))
    val removablePaths = removable.map(_.location()).toSet
    val readSchema = ScanFilters.schemaRead(target.relation.table, table, target.snapshotId)
    val deletes = if (removable.isEmpty) None else {
      DeletePlanner.plan(table, target.snapshotId, readSchema, filter, caseSensitive)
        .map(_.onlyDeletes(ref => removablePaths.contains(ref.file.location())))
        .filter(_.deleteSets.nonEmpty)
    }
    ResolveWork(target, removable, kept.size, deletes)
  }

  /** Whether every row of `delete`'s partition (every partition, for a global one) satisfies `filter`. */
  private def wholly(table: Table, filter: IcebergExpression, caseSensitive: Boolean)(delete: DeleteFile): Boolean = {
    val spec = table.specs().get(delete.specId())
    val strict = Projections.strict(spec, caseSensitive).project(filter)
    new Evaluator(spec.partitionType(), strict, caseSensitive).eval(delete.partition())
  }
}
