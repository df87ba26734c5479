package eqdelete.rules

import scala.util.Try
import scala.util.control.{ControlThrowable, NonFatal}

import eqdelete.planning.{DeclinedException, DeleteFileReadException, DeletePlan, DeletePlanCache}
import eqdelete.scan.{EqualityDeleteFreeTable, FileSelection}

import org.apache.iceberg.{Schema, Table}
import org.apache.iceberg.expressions.{Expression => IcebergExpression, Expressions}
import org.apache.iceberg.spark.SparkSchemaUtil
import org.apache.iceberg.spark.source.SparkTable
import org.apache.iceberg.util.SnapshotUtil
import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, Expression, MetadataAttribute, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan, Project, Union}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.eqdelete.compat.{EqDeleteConf, FilterTranslation, IcebergInternals, IcebergSparkShim}
import org.apache.spark.sql.eqdelete.compat.EqDeleteConf.Strategy
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/**
 * Rewrites every batch read of an Iceberg table whose planned files carry equality deletes,
 * before Spark pushes filters and columns into scans:
 * {{{
 *   RelationV2 t                       Union
 *                                        RelationV2 t [files without equality deletes]
 *                              =>        Project(columns)                 -- filter or join
 *                                          ... deletes applied by eqdelete ...
 *                                            RelationV2 t [files with equality deletes,
 *                                                          equality deletes removed]
 * }}}
 * The output attributes stay exactly the original's. A `Filter` right above the relation
 * prunes the planning as it will prune the scans. Anything unexpected leaves the scan
 * native, with the reason in a tag on the relation (read by the decision records) and a warning.
 */
case class RewriteEqualityDeleteScans(session: SparkSession) extends Rule[LogicalPlan]
  with PredicateHelper with Logging {

  override def apply(plan: LogicalPlan): LogicalPlan = {
    if (!EqDeleteConf.enabled(conf) || EqDeleteConf.strategy(conf) == Strategy.Native) return plan
    DecisionLog.register(session)
    plan.transformDown {
      case filter @ Filter(condition, IcebergScanWithEqDeletes(relation, sparkTable, table, snapshotId)) =>
        filter.copy(child = rewrite(relation, sparkTable, table, snapshotId, Some(condition)))
      case IcebergScanWithEqDeletes(relation, sparkTable, table, snapshotId) =>
        rewrite(relation, sparkTable, table, snapshotId, None)
    }
  }

  private def rewrite(
      relation: DataSourceV2Relation,
      sparkTable: SparkTable,
      table: Table,
      snapshotId: Long,
      condition: Option[Expression]): LogicalPlan = {
    def leaveNative(reason: String, plan: Option[DeletePlan] = None): LogicalPlan =
      namedNative(relation, sparkTable, table, Decision.of(table.name(), snapshotId, Strategy.Native, reason, plan))
    try {
      val readSchema = schemaRead(sparkTable, table, snapshotId)
      val filter = condition.map(icebergFilter).getOrElse(Expressions.alwaysTrue())
      DeletePlanCache.plan(table, snapshotId, readSchema, filter, conf.caseSensitiveAnalysis) match {
        case None =>
          // Nothing to do: the relation stays exactly as it was, only marked as looked at.
          relation.setTagValue(Decision.NativeTag,
            Decision.of(table.name(), snapshotId, Strategy.Native, "no planned data file carries equality deletes", None))
          relation
        case Some(deletePlan) => chooseStrategy(deletePlan, readSchema) match {
          case (Strategy.Native, reason) => leaveNative(reason, Some(deletePlan))
          case (strategy, reason) =>
            try build(relation, sparkTable, table, readSchema, deletePlan, strategy, reason) catch {
              case e: FilterIndexMemoryException if !EqDeleteConf.filterForce(conf) =>
                logWarning(s"eqdelete: ${e.getMessage}; applying the deletes of ${table.name()} with a join instead")
                build(relation, sparkTable, table, readSchema, deletePlan, Strategy.Join,
                  s"$reason, but the driver ran out of memory building the filter's index: join instead")
            }
        }
      }
    } catch {
      case DeclinedException(reason) =>
        logWarning(s"eqdelete: cannot rewrite the scan of ${table.name()}: $reason; reading it natively")
        leaveNative(reason)
      // A delete file that cannot be read fails the query, as natively, whether the rule read
      // it itself or through Spark tasks (which wrap it): a native fallback would read it again.
      case e: Throwable if DeleteFileReadException.in(e).isDefined => throw DeleteFileReadException.in(e).get
      case e: FilterIndexMemoryException => throw e
      // Anything else (a LinkageError on a class path eqdelete was not built for, too) leaves
      // the scan as Iceberg plans it: never the user's session taken down.
      case e: Throwable if !e.isInstanceOf[InterruptedException] && !e.isInstanceOf[ControlThrowable] =>
        logWarning(s"eqdelete: cannot rewrite the scan of ${table.name()}; reading it natively", e)
        leaveNative(s"planning failed: $e")
    }
  }

  /**
   * The scan left native as Iceberg plans it, but named after the decision so EXPLAIN shows
   * why (auto's cost model chose native, or the rewrite was declined); the plain relation, with
   * the decision in its tag, if that view cannot be made.
   */
  private def namedNative(
      relation: DataSourceV2Relation,
      sparkTable: SparkTable,
      table: Table,
      decision: Decision): LogicalPlan = {
    val view = try Some(sameView(sparkTable, EqualityDeleteFreeTable(table, FileSelection.Unchanged, decision))) catch {
      case NonFatal(_) | _: LinkageError => None
    }
    val named = view.map(v => relation.copy(table = v)).getOrElse(relation)
    named.setTagValue(Decision.NativeTag, decision)
    named
  }

  private def build(
      relation: DataSourceV2Relation,
      sparkTable: SparkTable,
      table: Table,
      readSchema: Schema,
      deletePlan: DeletePlan,
      strategy: String,
      reason: String): LogicalPlan = {
    val decision = Decision.of(table.name(), deletePlan.snapshotId, strategy, reason, Some(deletePlan))

    val columns = relation.output.map(_.newInstance())
    val existingFile = columns.find(a => a.name == "_file" && MetadataAttribute.isValid(a.metadata))
    val file = existingFile.getOrElse(
      relation.metadataOutput.find(_.name == "_file")
        .getOrElse(throw DeclinedException("the table exposes no _file metadata column")).newInstance())
    // One scan of every file when files without deletes hold fewer rows than those with: the
    // lookups it adds cost less than passing every row through a union. Otherwise two scans.
    val oneScan = deletePlan.dataFilesWithoutDeletes == 0 || deletePlan.rowsWithoutDeletes < deletePlan.rowsWithDeletes
    val selection = if (oneScan) FileSelection.AllEqualityDeletesRemoved else FileSelection.EqualityDeletesRemoved
    val stripped = relation.copy(
      table = sameView(sparkTable, EqualityDeleteFreeTable(table, selection, decision)),
      output = if (existingFile.isDefined) columns else columns :+ file)
    val scan = DeletedRowsScan(stripped, columns, file, deletePlan, table, readSchema)

    val deletesApplied = strategy match {
      case Strategy.Filter => FilterPlanBuilder.build(session, scan)
      case Strategy.Join => JoinPlanBuilder.build(session, scan)
    }
    logInfo(s"eqdelete: ${table.name()} snapshot ${deletePlan.snapshotId}: ${decision.describe}")

    if (!oneScan) {
      val plain = relation.copy(
        table = sameView(sparkTable, EqualityDeleteFreeTable(table, FileSelection.WithoutEqualityDeletes, decision)))
      Union(plain, deletesApplied)
    } else {
      Project(columns.zip(relation.output).map { case (c, o) => Alias(c, o.name)(o.exprId, o.qualifier) },
        deletesApplied)
    }
  }

  /** The strategy and why: the one set (bounded by the driver's memory), or auto's cost model. */
  private def chooseStrategy(plan: DeletePlan, readSchema: Schema): (String, String) =
    AutoStrategy.choose(plan, readSchema, conf, DriverMemory.heapBytes)

  /** The Iceberg schema Spark reads: the current one or the snapshot's (time travel). */
  private def schemaRead(sparkTable: SparkTable, table: Table, snapshotId: Long): Schema = {
    val candidates = Seq(table.schema()) ++ Try(SnapshotUtil.schemaFor(table, snapshotId)).toOption
    candidates.find(s => SparkSchemaUtil.convert(s) == sparkTable.schema()).getOrElse(
      throw DeclinedException("cannot tell which Iceberg schema the scan reads"))
  }

  /** A SparkTable over `wrapper` showing exactly the snapshot and schema `original` shows. */
  private def sameView(original: SparkTable, wrapper: Table): SparkTable = {
    val snapshot = IcebergSparkShim.snapshotId(original).getOrElse(throw DeclinedException("the scan reads no snapshot"))
    val candidates = IcebergSparkShim.views(wrapper, Option(original.branch()), snapshot)
    candidates.iterator.flatMap(c => Try(c()).toOption).find { candidate =>
      candidate.snapshotId() == original.snapshotId() && candidate.schema() == original.schema()
    }.getOrElse(throw DeclinedException("cannot reproduce the scan's snapshot and schema"))
  }

  /** The conjuncts Iceberg can use to prune files, as Iceberg's own scan will. */
  private def icebergFilter(condition: Expression): IcebergExpression =
    splitConjunctivePredicates(condition)
      .filterNot(_.references.exists(a => MetadataAttribute.isValid(a.metadata)))
      .flatMap(FilterTranslation.toSourceFilter)
      .flatMap(IcebergInternals.icebergFilter)
      .foldLeft(Expressions.alwaysTrue(): IcebergExpression)((a, b) => Expressions.and(a, b))
}
