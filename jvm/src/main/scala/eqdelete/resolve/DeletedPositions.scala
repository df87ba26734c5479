package eqdelete.resolve

import eqdelete.cost.{CostModel, CostSettings, DriverMemory, ScanRewritePlan}
import eqdelete.explain.Decision
import eqdelete.join.ApplyDeletesWithJoin
import eqdelete.planning.{DeclinedException, DeletePlan}
import eqdelete.scan.{FileSelectingTable, FileSelection, IcebergViews, StrippedScan}

import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.expressions.{And, AttributeSet}
import org.apache.spark.sql.catalyst.plans.logical.Filter
import org.apache.spark.sql.eqdelete.compat.{EqDeleteConf, SparkShim}

/**
 * The positions `(_file, _pos)` of the live rows a resolve plan's equality deletes remove, as a
 * distributed DataFrame: the files carrying those deletes are read through Iceberg with their
 * equality deletes dropped (position deletes and deletion vectors still applied, so rows
 * deleted already are not listed again), then semi-joined with each part's delete rows by the
 * join strategy's own rule (keys NULL-safe, scope, `data_seq < delete_seq`). Nothing is read
 * until the DataFrame runs; positions never gather on the driver.
 */
object DeletedPositions {

  def of(session: SparkSession, plan: ResolvePlan, deletes: DeletePlan): DataFrame = {
    val target = plan.target
    val (relation, table) = (target.relation, target.table)
    val readSchema = deletes.scan.readSchema
    val settings = CostSettings.from(session.sessionState.conf, DriverMemory.heapBytes, session.sparkContext.defaultParallelism)
      .copy(strategy = EqDeleteConf.Strategy.Join)
    val join = CostModel.plan(deletes, readSchema, settings) match {
      case join: ScanRewritePlan.Join => join
      case other => throw new IllegalStateException(s"eqdelete: the cost model planned ${other.strategy.name} for a join")
    }
    val decision = Decision.of(table.name(), plan.snapshotId, "join", "resolving equality deletes", join.describe, Some(deletes))
    val view = IcebergViews.sameView(target.relation.table, target.snapshotId,
      FileSelectingTable(table, selection(deletes), decision, Some(deletes.scan)))

    def metadata(name: String) = relation.metadataOutput.find(_.name == name)
      .getOrElse(throw DeclinedException(s"the table exposes no $name metadata column"))
    val (file, pos) = (metadata("_file"), metadata("_pos"))
    val keys = deletes.deleteSets.flatMap(_.keyPaths.map(_.head)).toSet
    val filtered = AttributeSet(target.conditions.flatMap(_.references))
    val read = relation.output.filter(a => keys.contains(a.name) || filtered.contains(a))
    // No catalog or identifier: Spark 4.1 reloads a DataFrame's tables by them when it runs,
    // which would put Iceberg's own table (equality deletes applied) back in.
    val stripped = relation.copy(table = view, output = read ++ Seq(file, pos), catalog = None, identifier = None)
    // The filter selects whole partitions for the deletes applied, so it drops none of their rows;
    // it is there so Spark pushes it and the scan is served the planned files.
    val source = target.conditions.reduceOption(And).map(Filter(_, stripped)).getOrElse(stripped)
    val scan = StrippedScan(stripped, source, Seq(file, pos), file, deletes, table, readSchema)
    SparkShim.dataFrame(session, ApplyDeletesWithJoin.deletedRows(session, scan, join))
  }

  /**
   * The planned files the rows are looked for in: those Iceberg pairs with an equality delete, or
   * every planned file where Iceberg may pair NaN deletes with too few.
   */
  def selection(deletes: DeletePlan): FileSelection =
    if (deletes.assignmentMayMiss.isDefined) FileSelection.AllEqualityDeletesRemoved else FileSelection.EqualityDeletesRemoved

  /** How many data files [[of]] reads. */
  def dataFilesRead(deletes: DeletePlan): Int = {
    val selected = selection(deletes)
    deletes.scan.tasks.filter(selected.selects).map(_.file().location()).distinct.size
  }
}
