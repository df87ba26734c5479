package eqdelete.rules

import eqdelete.planning.{EqualityDeleteRef, EqualityDeleteSet}

import org.apache.spark.sql.{SparkSession => ApiSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeReference, EqualNullSafe, EqualTo, Expression, GenericInternalRow, LessThan}
import org.apache.spark.sql.catalyst.expressions.aggregate.Max
import org.apache.spark.sql.catalyst.plans.LeftAnti
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, BROADCAST, HintInfo, Join, JoinHint, LogicalPlan, Project, Statistics}
import org.apache.spark.sql.catalyst.plans.physical.{SinglePartition, UnknownPartitioning}
import org.apache.spark.sql.classic.{SparkSession => ClassicSession}
import org.apache.spark.sql.eqdelete.EqDeleteConf
import org.apache.spark.sql.execution.LogicalRDD
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.LongType

/**
 * join: the delete rows become a relation read by Spark tasks through Iceberg's delete
 * loader, reduced to (key, scope) -> max delete sequence number, and the rows of files with
 * equality deletes are anti-joined against it:
 * {{{
 *   Project(columns)
 *     Join(LeftAnti, keys <=> keys AND scope = scope AND data_seq < max_seq)
 *       Project(columns, data_seq, scope) -> scan
 *       Aggregate(keys, scope; max(seq)) -> delete rows
 * }}}
 * Global deletes get a join without the scope. The delete side is broadcast when its estimated
 * size is under spark.eqdelete.join.broadcastMaxBytes; above it Spark picks the join.
 */
object JoinPlanBuilder {

  def build(session: ApiSession, scan: DeletedRowsScan): LogicalPlan = {
    val data: LogicalPlan = Project(scan.columns ++ Seq(scan.sequence, scan.scope), scan.relation)
    val joined = scan.plan.deleteSets.foldLeft(data) { (left, set) =>
      val (global, scoped) = set.files.partition(_.isGlobal)
      val withScoped = if (scoped.isEmpty) left else antiJoin(session, scan, left, set, scoped, byScope = true)
      if (global.isEmpty) withScoped else antiJoin(session, scan, withScoped, set, global, byScope = false)
    }
    Project(scan.columns, joined)
  }

  private def antiJoin(
      session: ApiSession,
      scan: DeletedRowsScan,
      left: LogicalPlan,
      set: EqualityDeleteSet,
      files: Seq[EqualityDeleteRef],
      byScope: Boolean): LogicalPlan = {
    val dataKeys = scan.keyColumns(set)
    val deleteKeys = dataKeys.map(k => AttributeReference(s"_eqdelete_${k.name}", k.dataType, nullable = true)())
    val scope = AttributeReference("_eqdelete_delete_scope", LongType, nullable = false)()
    val seq = AttributeReference("_eqdelete_delete_seq", LongType, nullable = false)()
    val rows = deleteRows(session, scan, set, files, deleteKeys ++ Seq(scope, seq))

    val grouping: Seq[Attribute] = if (byScope) deleteKeys :+ scope else deleteKeys
    val maxSeq = Alias(Max(seq).toAggregateExpression(), "_eqdelete_max_seq")()
    val reduced = Aggregate(grouping, grouping ++ Seq(maxSeq), rows)

    val keyMatch = dataKeys.zip(deleteKeys).map { case (d, k) => EqualNullSafe(d, k): Expression }
    val scopeMatch = if (byScope) Seq(EqualTo(scan.scope.toAttribute, scope)) else Nil
    val newer = LessThan(scan.sequence.toAttribute, maxSeq.toAttribute)
    val condition = (keyMatch ++ scopeMatch :+ newer).reduce(And(_, _))
    // Broadcast up to eqdelete's own limit (Spark's default of 10 MB is small for a hash set
    // of keys); above it, Spark chooses, shuffling both sides for sets larger than memory.
    val limit = EqDeleteConf.joinBroadcastMaxBytes(SQLConf.get)
    val hint = if (estimate(files, deleteKeys ++ Seq(scope, seq)).sizeInBytes <= limit) {
      JoinHint(None, Some(HintInfo(strategy = Some(BROADCAST))))
    } else {
      JoinHint.NONE
    }
    Join(left, reduced, LeftAnti, Some(condition), hint)
  }

  /** A relation over the delete rows of `files`, read by Spark tasks, with size statistics. */
  private def deleteRows(
      session: ApiSession,
      scan: DeletedRowsScan,
      set: EqualityDeleteSet,
      files: Seq[EqualityDeleteRef],
      output: Seq[AttributeReference]): LogicalPlan = {
    val classic = session.asInstanceOf[ClassicSession]
    val rows = scan.deleteRows(session, set, files)
    val rdd = rows.map { case (keys, scope, seq) =>
      new GenericInternalRow((keys :+ scope :+ seq).asInstanceOf[Array[Any]]): InternalRow
    }
    // A single task declares it, so the reduction needs no shuffle.
    val partitioning = if (rows.getNumPartitions == 1) SinglePartition else UnknownPartitioning(rows.getNumPartitions)
    LogicalRDD(output, rdd, partitioning, Nil, isStreaming = false, stream = None)(
      classic, Some(estimate(files, output)), None)
  }

  private def estimate(files: Seq[EqualityDeleteRef], output: Seq[AttributeReference]): Statistics = {
    val records = files.map(_.file.recordCount()).sum
    val rowBytes = output.map(_.dataType.defaultSize).sum + 8
    Statistics(sizeInBytes = BigInt(records) * rowBytes, rowCount = Some(BigInt(records)))
  }
}
