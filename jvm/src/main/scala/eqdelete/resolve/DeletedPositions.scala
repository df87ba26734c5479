package eqdelete.resolve

import eqdelete.cost.{CostModel, CostSettings, DriverMemory, ScanRewritePlan, Strategy, StrategySetting}
import eqdelete.explain.Decision
import eqdelete.join.ApplyDeletesWithJoin
import eqdelete.planning.ScanDeletes
import eqdelete.scan.{FileSelectingTable, FileSelection, IcebergViews, StrippedScan}

import org.apache.iceberg.DataFile
import org.apache.spark.sql.{DataFrame, SparkSession}
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

  def of(session: SparkSession, work: ResolveWork, deletes: ScanDeletes): DataFrame = {
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
    val (scan, _) = StrippedScan.of(relation, view, needed = Nil, target.conditions, deletes, table, readSchema,
      metadata = Seq("_file", "_pos"), detached = true)
    SparkShim.dataFrame(session, ApplyDeletesWithJoin.deletedRows(session, scan, join))
  }

  /**
   * The planned files the rows are looked for in: those Iceberg pairs with an equality delete, or
   * every planned file where Iceberg may pair NaN deletes with too few.
   */
  def selection(deletes: ScanDeletes): FileSelection =
    if (deletes.assignmentMayMiss.isDefined) FileSelection.AllEqualityDeletesRemoved else FileSelection.EqualityDeletesRemoved

  /** The data files [[of]] reads, each once. */
  def dataFiles(deletes: ScanDeletes): Seq[DataFile] = {
    val selected = selection(deletes)
    deletes.scan.tasks.filter(selected.selects).map(_.file()).groupBy(_.location()).values.map(_.head).toSeq
  }

  /** How many data files [[of]] reads. */
  def dataFilesRead(deletes: ScanDeletes): Int = dataFiles(deletes).size
}
