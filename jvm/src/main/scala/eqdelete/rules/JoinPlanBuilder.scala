package eqdelete.rules

import eqdelete.planning.{EqualityDeleteRef, EqualityDeleteSet}

import org.apache.spark.sql.{SparkSession => ApiSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeReference, EqualNullSafe, EqualTo, Expression, GenericInternalRow, LessThan}
import org.apache.spark.sql.catalyst.expressions.aggregate.Max
import org.apache.spark.sql.catalyst.plans.LeftAnti
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, BROADCAST, HintInfo, Join, JoinHint, LogicalPlan, Project, Statistics}
import org.apache.spark.sql.catalyst.plans.physical.{SinglePartition, UnknownPartitioning}
import org.apache.spark.sql.eqdelete.compat.SparkShim
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{DataType, LongType}

/**
 * join: the delete rows become a relation read by Spark tasks through Iceberg's delete
 * loader, and the rows of files with equality deletes are anti-joined against it:
 * {{{
 *   Project(columns)
 *     Join(LeftAnti, keys <=> keys AND scope = scope AND data_seq < seq)
 *       Project(columns, data_seq, scope) -> scan
 *       delete rows (key, scope, seq)   -- reduced to max(seq) per (key, scope) when shuffled
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
    val deleteKeys = dataKeys.zipWithIndex.map { case (k, i) =>
      AttributeReference(s"_eqdelete_${k.name}", k.dataType, nullable = set.keyMayBeNull(i))()
    }
    val scope = AttributeReference("_eqdelete_delete_scope", LongType, nullable = false)()
    val seq = AttributeReference("_eqdelete_delete_seq", LongType, nullable = false)()
    val rows = deleteRows(session, scan, set, files, deleteKeys, Seq(scope, seq))

    // Broadcast up to eqdelete's own limit (Spark's default of 10 MB is small for a hash set
    // of keys) and the driver's heap share; above it, Spark chooses, shuffling both sides for
    // sets larger than memory.
    val broadcast = broadcasts(files, deleteKeys.map(_.dataType), DriverMemory.broadcastLimit(SQLConf.get, DriverMemory.heapBytes))

    // A row is deleted when any delete row of its key and scope is newer, so repeated keys
    // need no reduction for correctness. A broadcast side is built as it is read; a shuffled
    // one is first reduced to (key, scope) -> max(seq), which shrinks what both sides shuffle.
    val (deleteSide, newest) = if (broadcast) {
      (rows, seq)
    } else {
      val grouping: Seq[Attribute] = if (byScope) deleteKeys :+ scope else deleteKeys
      val maxSeq = Alias(Max(seq).toAggregateExpression(), "_eqdelete_max_seq")()
      (Aggregate(grouping, grouping ++ Seq(maxSeq), rows), maxSeq.toAttribute)
    }

    // NULL keys match only NULL keys, as in Iceberg; plain equality when no delete key is NULL
    // lets Spark use its single-long hash relation instead of composite keys.
    val keyMatch = dataKeys.zip(deleteKeys).map { case (d, k) =>
      if (k.nullable) EqualNullSafe(d, k) else EqualTo(d, k): Expression
    }
    val scopeMatch = if (byScope) Seq(EqualTo(scan.scope.toAttribute, scope)) else Nil
    val newer = LessThan(scan.sequence.toAttribute, newest)
    val condition = (keyMatch ++ scopeMatch :+ newer).reduce(And(_, _))
    val hint = if (broadcast) JoinHint(None, Some(HintInfo(strategy = Some(BROADCAST)))) else JoinHint.NONE
    Join(left, deleteSide, LeftAnti, Some(condition), hint)
  }

  /** A relation over the delete rows of `files`, read by Spark tasks, with size statistics. */
  private def deleteRows(
      session: ApiSession,
      scan: DeletedRowsScan,
      set: EqualityDeleteSet,
      files: Seq[EqualityDeleteRef],
      keys: Seq[AttributeReference],
      scopeAndSeq: Seq[AttributeReference]): LogicalPlan = {
    val rows = scan.deleteRows(session, set, files)
    val rdd = rows.map { case (keys, scope, seq) =>
      new GenericInternalRow((keys :+ scope :+ seq).asInstanceOf[Array[Any]]): InternalRow
    }
    // A single task declares it, so the reduction needs no shuffle.
    val partitioning = if (rows.getNumPartitions == 1) SinglePartition else UnknownPartitioning(rows.getNumPartitions)
    val records = BigInt(files.map(_.file.recordCount()).sum)
    val stats = Statistics(sizeInBytes = deleteSideBytes(files, keys.map(_.dataType)), rowCount = Some(records))
    SparkShim.logicalRDD(keys ++ scopeAndSeq, rdd, partitioning, session, stats)
  }

  /**
   * Whether the delete side of `files`, keys of `keyTypes`, is broadcast under `limit` bytes
   * (-1: never forced; Spark's own join selection decides).
   */
  def broadcasts(files: Seq[EqualityDeleteRef], keyTypes: Seq[DataType], limit: Long): Boolean =
    limit >= 0 && deleteSideBytes(files, keyTypes) <= limit

  /** Rows times width: the keys, scope and sequence number, plus a row's overhead. */
  private def deleteSideBytes(files: Seq[EqualityDeleteRef], keyTypes: Seq[DataType]): BigInt =
    BigInt(files.map(_.file.recordCount()).sum) * (keyTypes.map(_.defaultSize).sum + 3 * 8)
}
