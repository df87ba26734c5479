package eqdelete.join

import eqdelete.cost.{DeleteJoin, JoinDistribution, ScanRewritePlan}
import eqdelete.explain.CoveredRows
import eqdelete.covering.CoveredDeleteRow
import eqdelete.deleteindex.KeyBits
import eqdelete.read.DeleteRows
import eqdelete.scan.StrippedScan

import org.apache.spark.sql.{SparkSession => ApiSession}
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeReference, EqualNullSafe, EqualTo, Expression, LessThan, NamedExpression, Not, Or}
import org.apache.spark.sql.catalyst.plans.{JoinType, LeftAnti, LeftSemi}
import org.apache.spark.sql.catalyst.plans.logical.{BROADCAST, Filter, HintInfo, Join, JoinHint, LogicalPlan, Project, Statistics, Union}
import org.apache.spark.sql.types.LongType

/**
 * join: the delete rows become a relation read by Spark tasks through Iceberg's delete
 * loader, and the rows of files with equality deletes are anti-joined against it, one join per
 * part the cost model planned (an equality set's scoped deletes, and its global ones):
 * {{{
 *   Project(columns)
 *     Join(LeftAnti, keys <=> keys AND scope = scope AND data_seq < seq)   -- global: no scope
 *       Project(columns, data_seq, scope) -> scan
 *       delete rows (key, scope, seq)   -- as read, broadcast or shuffled
 * }}}
 * A shuffled part of a multi-column set drops, first, the delete rows a single-column set
 * covers (`cost.Covering`): `Filter(NOT eqdelete_covered(key; index subquery))`, checked
 * against that set's filter index, counted in `covered`, so fewer rows are shuffled.
 * Nothing is read while the plan is optimized: the delete rows are an RDD read when the join runs.
 */
object ApplyDeletesWithJoin {

  def build(session: ApiSession, scan: StrippedScan, plan: ScanRewritePlan.Join,
      covered: Map[Seq[Int], CoveredRows]): LogicalPlan = {
    val (data, keyColumns) = carryKeys(scan, plan)
    val joined = plan.joins.foldLeft(data)((left, part) =>
      deleteJoin(session, scan, left, part, keyColumns, covered.get(part.set.equalityIds), LeftAnti))
    Project(scan.columns, joined)
  }

  /**
   * The opposite: the rows of `scan` that some part deletes, as `scan.columns`, one left semi
   * join per part in a union (a row several parts delete comes once per part). What resolving
   * equality deletes into position deletes reads.
   */
  def deletedRows(session: ApiSession, scan: StrippedScan, plan: ScanRewritePlan.Join): LogicalPlan = {
    val (data, keyColumns) = carryKeys(scan, plan)
    val parts = plan.joins.map(part => Project(scan.columns, deleteJoin(session, scan, data, part, keyColumns, None, LeftSemi)))
    if (parts.size == 1) parts.head else Union(parts)
  }

  /**
   * The scan's columns with the keys, sequence number and scope the joins compare. The keys
   * travel with the rows until every join has run, even those the query does not select;
   * fields of structs, and floats and doubles (compared by their bits), as columns.
   */
  private def carryKeys(scan: StrippedScan, plan: ScanRewritePlan.Join): (LogicalPlan, Map[Expression, Attribute]) = {
    val keyValues = plan.joins.flatMap(part => scan.keyColumns(part.set)).distinct
    val carriedAs: Seq[(Expression, NamedExpression)] = keyValues.zipWithIndex.map {
      case (a: Attribute, _) if !KeyBits.isFloating(a.dataType) => a -> a
      case (e, i) => e -> Alias(comparable(e), s"_eqdelete_key_$i")()
    }
    val keyColumns = carriedAs.map { case (e, carried) => e -> carried.toAttribute }.toMap
    val carried = carriedAs.map(_._2).filterNot(scan.columns.contains)
    (Project(scan.columns ++ carried ++ Seq(scan.sequence, scan.scope), scan.source), keyColumns)
  }

  /** A key as the join compares it: floats and doubles by their bits, anything else as it is. */
  private def comparable(key: Expression): Expression =
    if (KeyBits.isFloating(key.dataType)) KeyBitsExpression(key) else key

  /** `left` joined with the part's delete rows: anti (rows kept) or semi (rows deleted). */
  private def deleteJoin(
      session: ApiSession,
      scan: StrippedScan,
      left: LogicalPlan,
      part: DeleteJoin,
      keyColumns: Map[Expression, Attribute],
      covered: Option[CoveredRows],
      joinType: JoinType): LogicalPlan = {
    val keys = scan.keyColumns(part.set)
    val dataKeys = keys.map(keyColumns)
    val deleteKeys = keys.zipWithIndex.map { case (k, i) =>
      AttributeReference(s"_eqdelete_delete_key_$i", k.dataType, nullable = part.set.keyMayBeNull(i))()
    }
    val scope = AttributeReference("_eqdelete_delete_scope", LongType, nullable = false)()
    val seq = AttributeReference("_eqdelete_delete_seq", LongType, nullable = false)()
    val metrics = JoinMetrics(session.sparkContext)
    val rows = withoutCovered(scan, part, deleteRows(session, scan, part, deleteKeys, Seq(scope, seq), metrics),
      deleteKeys, scope, seq, covered)
    // The delete side's keys as the data side carries them (floats and doubles as bits).
    val (comparableRows, comparableKeys) = if (deleteKeys.exists(k => KeyBits.isFloating(k.dataType))) {
      val aliases = deleteKeys.map(k => Alias(comparable(k), k.name)())
      (Project(aliases ++ Seq(scope, seq), rows), aliases.map(_.toAttribute))
    } else {
      (rows, deleteKeys)
    }

    // A row is deleted when any delete row of its key and scope is newer, so repeated keys
    // need no reduction: the delete side joins as it is read, broadcast or shuffled. Reducing
    // it to (key, scope) -> max(seq) first cost more than it saved (PERFORMANCE.md, scale):
    // a hash aggregate over millions of mostly distinct keys is a cache miss per row.
    // NULL keys match only NULL keys, as in Iceberg; plain equality when no delete key is NULL
    // lets Spark use its single-long hash relation instead of composite keys.
    val keyMatch = dataKeys.zip(comparableKeys).map { case (d, k) =>
      if (k.nullable) EqualNullSafe(d, k) else EqualTo(d, k): Expression
    }
    val scopeMatch = if (part.byScope) Seq(EqualTo(scan.scope.toAttribute, scope)) else Nil
    val newer = CountingCondition(LessThan(scan.sequence.toAttribute, seq), metrics.rowsRemoved)
    val condition = (keyMatch ++ scopeMatch :+ newer).reduce(And(_, _))
    // Broadcast past Spark's own small default (10 MB is small for a hash set of keys); a
    // shuffled part is left to Spark's join selection, which shuffles sets larger than memory.
    val hint = if (part.distribution == JoinDistribution.Broadcast) JoinHint(None, Some(HintInfo(strategy = Some(BROADCAST)))) else JoinHint.NONE
    Join(left, comparableRows, joinType, Some(condition), hint)
  }

  /** `rows` without those the part's coverings cover (see `cost.Covering`). */
  private def withoutCovered(
      scan: StrippedScan,
      part: DeleteJoin,
      rows: LogicalPlan,
      keys: Seq[Attribute],
      scope: Attribute,
      seq: Attribute,
      covered: Option[CoveredRows]): LogicalPlan = (part.coveredBy, covered) match {
    case (Nil, _) | (_, None) => rows
    case (coverings, Some(counter)) =>
      val checks = coverings.map { covering =>
        CoveredDeleteRow.against(covering.by, scan.table.io(), scan.readSchema, keys(covering.keyPosition), scope, seq, counter,
          if (part.byScope) 0 else 1): Expression
      }
      Filter(Not(checks.reduce(Or(_, _))), rows)
  }

  /** A relation over the delete rows of the part, read by Spark tasks, with size statistics. */
  private def deleteRows(
      session: ApiSession,
      scan: StrippedScan,
      part: DeleteJoin,
      keys: Seq[AttributeReference],
      scopeAndSeq: Seq[AttributeReference],
      metrics: JoinMetrics): LogicalPlan = {
    val rdd = DeleteRows.rdd(session.sparkContext, scan.reader(part.set), part.read.files, part.read.tasks,
      part.set.describeKeys)
    val stats = Statistics(sizeInBytes = part.estimatedBytes, rowCount = Some(BigInt(part.read.records)))
    DeleteRowsRelation(keys ++ scopeAndSeq, rdd, part.describe, stats)(metrics)
  }
}
