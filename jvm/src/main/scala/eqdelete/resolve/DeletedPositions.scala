package eqdelete.resolve

import eqdelete.cost.{CostModel, CostSettings, DriverMemory, ScanRewritePlan, Strategy, StrategySetting}
import eqdelete.explain.Decision
import eqdelete.join.ApplyDeletesWithJoin
import eqdelete.planning.{EqualityDeleteSet, ScanDeletes}
import eqdelete.scan.{FileSelectingTable, FileSelection, IcebergViews, StrippedScan}

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Project}
import org.apache.spark.sql.eqdelete.compat.SparkShim

/**
 * The positions `(_file, _pos)` of the live rows a resolve's equality deletes remove, as a
 * distributed DataFrame: the files carrying those deletes are read through Iceberg with their
 * equality deletes dropped (position deletes and deletion vectors still applied, so rows
 * deleted already are not listed again), then semi-joined with each part's delete rows by the
 * join strategy's own rule (keys NULL-safe, scope, `data_seq < delete_seq`). Nothing is read
 * until the DataFrame runs; positions never gather on the driver.
 */
object DeletedPositions {

  def of(session: SparkSession, work: ResolveWork, deletes: ScanDeletes): DataFrame =
    SparkShim.dataFrame(session, rows(session, work, deletes, needed = Nil)._2)

  /**
   * [[of]]'s rows with the key of each of `sets`, packed as a kept index of the live rows holds it
   * ([[IndexedDeletedPositions]]): `(data file, position, keys)`, a row once per equality set
   * that deletes it.
   */
  def withKeys(session: SparkSession, work: ResolveWork, deletes: ScanDeletes,
      sets: Seq[EqualityDeleteSet]): RDD[(String, Long, Array[Array[Byte]])] = {
    val roots = sets.flatMap(_.keyPaths.map(_.head)).toSet
    val (scan, deleted) = rows(session, work, deletes, needed = work.target.relation.output.filter(a => roots(a.name)))
    val keys = sets.map(scan.keyColumns)
    val types = keys.map(_.map(_.dataType).toArray).toArray
    val offsets = types.scanLeft(0)(_ + _.length)
    val at = offsets.last
    val plan = Project(keys.flatten.zipWithIndex.map { case (k, i) => Alias(k, s"_eqdelete_key_$i")() } ++
      scan.columns.takeRight(2), deleted)
    SparkShim.dataFrame(session, plan).queryExecution.toRdd.map { row =>
      (row.getUTF8String(at).toString, row.getLong(at + 1),
        Array.tabulate(types.length)(s => IndexedDeletedPositions.packed(row, types(s), offsets(s))))
    }
  }

  /** The scan, and its rows the deletes remove: `needed` (columns of the work's relation), `_file` and `_pos`. */
  private def rows(session: SparkSession, work: ResolveWork, deletes: ScanDeletes,
      needed: Seq[Attribute]): (StrippedScan, LogicalPlan) = {
    val target = work.target
    val (relation, table) = (target.relation, target.table)
    val readSchema = deletes.scan.readSchema
    val settings = CostSettings.from(session.sessionState.conf, DriverMemory.heapBytes, session.sparkContext.defaultParallelism)
      .copy(strategy = StrategySetting.Forced(Strategy.Join))
    val join = CostModel.plan(deletes, readSchema, settings) match {
      case join: ScanRewritePlan.Join => join
      case other => throw new IllegalStateException(s"eqdelete: the cost model planned ${other.strategy} for a join")
    }
    val decision = Decision.of(table.name(), work.snapshotId, join.strategy, "resolving equality deletes", join.describe, Some(deletes))
    val view = IcebergViews.sameView(target.relation.table, target.snapshotId,
      FileSelectingTable(table, selection(deletes), decision, Some(deletes.scan)))

    // The filter selects whole partitions for the deletes applied, so it drops none of their rows;
    // it is there so Spark pushes it and the scan is served the planned files. Detached: Spark 4.1
    // reloads a DataFrame's tables by catalog and identifier when it runs, which would put
    // Iceberg's own table (equality deletes applied) back in.
    val (scan, _) = StrippedScan.of(relation, view, needed, target.conditions, deletes, table, readSchema,
      metadata = Seq("_file", "_pos"), detached = true)
    (scan, ApplyDeletesWithJoin.deletedRows(session, scan, join))
  }

  /**
   * The planned files the rows are looked for in: those Iceberg pairs with an equality delete, or
   * every planned file where Iceberg may pair NaN deletes with too few.
   */
  def selection(deletes: ScanDeletes): FileSelection =
    if (deletes.assignmentMayMiss.isDefined) FileSelection.AllEqualityDeletesRemoved else FileSelection.EqualityDeletesRemoved

  /** How many data files [[of]] reads. */
  def dataFilesRead(deletes: ScanDeletes): Int = {
    val selected = selection(deletes)
    deletes.scan.tasks.filter(selected.selects).map(_.file().location()).distinct.size
  }
}
