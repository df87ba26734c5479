package eqdelete.rule

import scala.util.control.{ControlThrowable, NonFatal}

import eqdelete.cost.{CostModel, CostSettings, DriverMemory, ScanLayout, ScanRewritePlan, Strategy, StrategySetting}
import eqdelete.explain.{CoveredRows, Decision, DecisionLog}
import eqdelete.filter.ApplyDeletesWithFilter
import eqdelete.join.ApplyDeletesWithJoin
import eqdelete.planning.{DeclinedException, LiveDeleteFiles, ScanDeletes, ScanDeletesCache, PlannedTasks, ScanFilters}
import eqdelete.read.DeleteFileReadException
import eqdelete.scan.{FileSelectingTable, FileSelection, IcebergViews, NamedNativeTable, StrippedScan}

import org.apache.iceberg.{Schema, Table}
import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeSet, Expression, InputFileBlockLength, InputFileBlockStart, InputFileName, NamedExpression, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan, Project, Union}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.connector.catalog.{Table => SparkCatalogTable}
import org.apache.spark.sql.eqdelete.compat.EqDeleteConf
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/**
 * Rewrites every batch read of an Iceberg table whose planned files carry equality deletes.
 * It runs once, after Spark's operator optimizations and before its scan push-down, on the
 * read as those left it: the relation with the query's filters and columns right above.
 * {{{
 *   Project(cols)                      Project(cols)
 *     Filter(conds)                      Union                            -- or one scan, see ScanLayout
 *       RelationV2 t          =>           Project(needed) -> Filter(conds) -> RelationV2 t [files without equality deletes]
 *                                          Project(needed as in t)        -- filter or join:
 *                                            ... deletes applied by eqdelete ...
 *                                              Filter(conds) -> RelationV2 t [files with equality deletes,
 *                                                                              equality deletes removed]
 * }}}
 * The query's deterministic filters go into every new scan (a row filter commutes with applying
 * deletes), so Spark pushes them into Iceberg's scans, and the delete planning uses all of them:
 * the scans are then served the tasks it planned. The output attributes stay exactly the
 * original's. What to build comes from [[CostModel]], from metadata only; nothing is read here.
 * Anything unexpected leaves the scan native, with the reason in a tag on the relation (read by
 * the decision records) and a warning.
 */
case class RewriteEqualityDeleteScans(session: SparkSession) extends Rule[LogicalPlan]
  with PredicateHelper with Logging {

  override def apply(plan: LogicalPlan): LogicalPlan = {
    if (!EqDeleteConf.enabled(conf) || StrategySetting.of(conf) == StrategySetting.Forced(Strategy.Native)) return plan
    DecisionLog.register(session)
    val rowsStayInReadTask = plan.exists(_.expressions.exists(_.exists {
      case _: InputFileName | _: InputFileBlockStart | _: InputFileBlockLength => true
      case _ => false
    }))
    plan.transformDown {
      case Project(list, Filter(condition, UnvisitedIcebergRead(relation, table, snapshotId))) =>
        rewrite(rowsStayInReadTask, IcebergRead(Some(list), splitConjunctivePredicates(condition), relation, table, snapshotId))
      case Project(list, UnvisitedIcebergRead(relation, table, snapshotId)) =>
        rewrite(rowsStayInReadTask, IcebergRead(Some(list), Nil, relation, table, snapshotId))
      case Filter(condition, UnvisitedIcebergRead(relation, table, snapshotId)) =>
        rewrite(rowsStayInReadTask, IcebergRead(None, splitConjunctivePredicates(condition), relation, table, snapshotId))
      case UnvisitedIcebergRead(relation, table, snapshotId) =>
        rewrite(rowsStayInReadTask, IcebergRead(None, Nil, relation, table, snapshotId))
    }
  }

  /**
   * One read: the relation, the query's filters on it and the columns it keeps. Deterministic
   * filters are `pushed` into the new scans; the others stay above them (`kept`).
   */
  private case class IcebergRead(
      project: Option[Seq[NamedExpression]],
      filters: Seq[Expression],
      relation: DataSourceV2Relation,
      table: Table,
      snapshotId: Long) {
    val (pushed, kept) = filters.partition(_.deterministic)

    /** The read above `child`, which outputs the relation's columns: what the query keeps of it. */
    def above(child: LogicalPlan, withPushed: Boolean): LogicalPlan = {
      val conditions = if (withPushed) filters else kept
      val filtered = conditions.reduceOption(And).map(Filter(_, child)).getOrElse(child)
      project.map(Project(_, filtered)).getOrElse(filtered)
    }

    /** The relation's columns the query needs above the scans, in the relation's order. */
    def needed: Seq[Attribute] = project match {
      case Some(list) =>
        val used = AttributeSet(list) ++ AttributeSet(kept.flatMap(_.references))
        relation.output.filter(used.contains)
      case None => relation.output
    }

    /**
     * The relation's columns the read uses. Not its output: Spark adds every metadata column to
     * the relation once the query references any, and prunes them only later.
     */
    def used: Seq[Attribute] = {
      val usedSet = AttributeSet(needed) ++ AttributeSet(pushed.flatMap(_.references))
      relation.output.filter(usedSet.contains)
    }
  }

  /** The read rewritten, when eqdelete models all of it and its files carry equality deletes. */
  private def rewrite(rowsStayInReadTask: Boolean, read: IcebergRead): LogicalPlan = {
    val unmodelledPart = try ReadAllowlist.unmodelled(read.used, read.relation.options, read.table, read.snapshotId,
      Option(conf.getConfString(ReadAllowlist.WapBranchKey, null))) catch {
      case e: Throwable if !e.isInstanceOf[InterruptedException] && !e.isInstanceOf[ControlThrowable] =>
        logWarning(s"eqdelete: cannot check the read of ${read.table.name()}; reading it natively", e)
        Some(s"cannot check the read: $e")
    }
    unmodelledPart.map(leaveUnmodelled(read, _)).getOrElse(planAndRewrite(read, rowsStayInReadTask))
  }

  /**
   * A read the allowlist does not cover: Iceberg's own table and options, untouched; on a
   * snapshot that may hold equality deletes, shown under a name carrying the reason.
   */
  private def leaveUnmodelled(read: IcebergRead, reason: String): LogicalPlan = {
    val decision = Decision.of(read.table.name(), read.snapshotId, Strategy.Native, reason, "read natively", None)
    logInfo(s"eqdelete: ${read.table.name()}: ${decision.describe}")
    val relation =
      if (LiveDeleteFiles.mayHoldEqualityDeletes(read.table, read.snapshotId)) read.relation.copy(table = NamedNativeTable(read.relation.table, decision))
      else read.relation
    read.above(marked(relation, decision), withPushed = true)
  }

  /**
   * `relation` tagged with the decision, which also stops the rule from looking at it again. In
   * place: a copy would equal the original, and Spark's transform keeps the original then.
   */
  private def marked(relation: DataSourceV2Relation, decision: Decision): DataSourceV2Relation = {
    relation.setTagValue(Decision.NativeTag, decision)
    relation
  }

  /** The read planned, and rewritten as the cost model says. */
  private def planAndRewrite(read: IcebergRead, rowsStayInReadTask: Boolean): LogicalPlan = {
    val table = read.table
    val snapshotId = read.snapshotId
    def leaveNative(reason: String, deletes: Option[ScanDeletes] = None): LogicalPlan =
      read.above(namedNative(read.relation, table,
        Decision.of(table.name(), snapshotId, Strategy.Native, reason, "read natively", deletes), deletes.map(_.scan),
        deletes.flatMap(_.scan.onlyFiles).map(FileSelection.Named).getOrElse(FileSelection.Unchanged)), withPushed = true)
    try {
      val readSchema = ScanFilters.schemaRead(read.relation.table, table, snapshotId)
      val filter = ScanFilters.icebergFilter(read.pushed)
      val onlyFiles = ScanFilters.fileRestriction(read.pushed)
      val (tasks, deletes) = ScanDeletesCache.planned(table, snapshotId, readSchema, filter, conf.caseSensitiveAnalysis, onlyFiles)
      deletes match {
        case None =>
          // Nothing to do: the relation stays as it was, only marked as looked at (and, when a
          // `_file` filter names its files, reading only those, from the tasks planned for them).
          val decision = Decision.of(table.name(), snapshotId, Strategy.Native,
            "no planned data file carries equality deletes", "read natively", None)
          read.above(onlyFiles.map(files => namedNative(read.relation, table, decision, Some(tasks), FileSelection.Named(files)))
            .getOrElse(marked(read.relation, decision)), withPushed = true)
        case Some(scanDeletes) =>
          val settings = CostSettings.from(conf, DriverMemory.heapBytes, session.sparkContext.defaultParallelism,
            rowsStayInReadTask)
          CostModel.plan(scanDeletes, readSchema, settings) match {
            case ScanRewritePlan.Native(reason) => leaveNative(reason, Some(scanDeletes))
            case filter: ScanRewritePlan.Filter =>
              build(read, readSchema, scanDeletes, filter, filter.layout,
                (scan, covered) => ApplyDeletesWithFilter.build(session, scan, filter, covered))
            case join: ScanRewritePlan.Join =>
              build(read, readSchema, scanDeletes, join, join.layout,
                (scan, covered) => ApplyDeletesWithJoin.build(session, scan, join, covered))
          }
      }
    } catch {
      case DeclinedException(reason) =>
        logWarning(s"eqdelete: cannot rewrite the scan of ${table.name()}: $reason; reading it natively")
        leaveNative(reason)
      // A delete file that cannot be read fails the query, as natively: a native fallback would
      // read it again.
      case e: Throwable if DeleteFileReadException.in(e).isDefined => throw DeleteFileReadException.in(e).get
      // Anything else (a LinkageError on a class path eqdelete was not built for, too) leaves
      // the scan as Iceberg plans it: never the user's session taken down.
      case e: Throwable if !e.isInstanceOf[InterruptedException] && !e.isInstanceOf[ControlThrowable] =>
        logWarning(s"eqdelete: cannot rewrite the scan of ${table.name()}; reading it natively", e)
        leaveNative(s"planning failed: $e")
    }
  }

  /**
   * The scan left native as Iceberg plans it, but named after the decision so EXPLAIN shows
   * why (auto's cost model chose native, or the rewrite was declined), and served the tasks the
   * delete planning got; the plain relation, with the decision in its tag, if that view cannot
   * be made.
   */
  private def namedNative(
      relation: DataSourceV2Relation,
      table: Table,
      decision: Decision,
      planned: Option[PlannedTasks],
      selection: FileSelection = FileSelection.Unchanged): LogicalPlan = {
    val view = try Some(IcebergViews.sameView(relation.table, decision.snapshotId,
      FileSelectingTable(table, selection, decision, planned))) catch {
      case NonFatal(_) | _: LinkageError => None
    }
    marked(view.map(v => relation.copy(table = v)).getOrElse(relation), decision)
  }

  /**
   * The read as `plan` lays it out, with `applyDeletes` (the strategy's builder) on the stripped
   * files, given a counter of covered delete rows per multi-column set the plan covers.
   */
  private def build(
      read: IcebergRead,
      readSchema: Schema,
      scanDeletes: ScanDeletes,
      plan: ScanRewritePlan,
      layout: ScanLayout,
      applyDeletes: (StrippedScan, Map[Seq[Int], CoveredRows]) => LogicalPlan): LogicalPlan = {
    val (relation, table) = (read.relation, read.table)
    val covered = plan.coveredSets.map(set => set.equalityIds -> CoveredRows.registered(session.sparkContext, set.describeKeys)).toMap
    val decision = Decision.of(table.name(), scanDeletes.snapshotId, plan.strategy, plan.reason, plan.describe,
      Some(scanDeletes), covered.values.toSeq)
    def view(selection: FileSelection): SparkCatalogTable =
      IcebergViews.sameView(read.relation.table, scanDeletes.snapshotId, FileSelectingTable(table, selection, decision, Some(scanDeletes.scan)))

    // The stripped scan reads what the query, its filters and the delete keys need, under fresh ids.
    val needed = read.needed
    val selection = layout match {
      case ScanLayout.OneScan => FileSelection.AllEqualityDeletesRemoved
      case ScanLayout.Union => FileSelection.EqualityDeletesRemoved
    }
    val (stripped, fresh) = StrippedScan.of(relation, view(selection), needed, read.pushed, scanDeletes, table, readSchema)
    val deletesApplied = applyDeletes(stripped, covered)
    // Back to the original's ids, so nothing above the read changes.
    val asOriginal = Project(needed.map(a => Alias(fresh(a), a.name)(a.exprId, a.qualifier)), deletesApplied)
    logInfo(s"eqdelete: ${table.name()} snapshot ${scanDeletes.snapshotId}: ${decision.describe}")

    layout match {
      case ScanLayout.Union =>
        val plain = relation.copy(table = view(FileSelection.WithoutEqualityDeletes))
        val filteredPlain = read.pushed.reduceOption(And).map(Filter(_, plain)).getOrElse(plain)
        val prunedPlain = if (needed == relation.output) filteredPlain else Project(needed, filteredPlain)
        read.above(Union(prunedPlain, asOriginal), withPushed = false)
      case ScanLayout.OneScan =>
        read.above(asOriginal, withPushed = false)
    }
  }
}
