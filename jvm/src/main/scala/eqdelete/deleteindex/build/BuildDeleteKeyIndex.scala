package eqdelete.deleteindex.build

import eqdelete.cost.IndexedSet
import eqdelete.explain.CoveredRows

import org.apache.iceberg.Schema
import org.apache.iceberg.io.FileIO
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeReference}
import org.apache.spark.sql.catalyst.plans.logical.{LeafNode, LogicalPlan, Statistics}
import org.apache.spark.sql.execution.metric.SQLMetric
import org.apache.spark.sql.types.BinaryType

/**
 * What building one equality set's index needs: the set as the cost model planned it, how to
 * read it, where to count the rows its coverings drop, and where the filter counts the rows it removes.
 */
final case class DeleteKeyIndexSource(indexed: IndexedSet, io: FileIO, readSchema: Schema, covered: Option[CoveredRows] = None,
    removed: Option[SQLMetric] = None) {
  def describe: String = indexed.describe

  /** The indexes of the single-column sets covering this one's rows, with the key position each covers. */
  def coverers: Seq[(DeleteKeyIndexSource, Int)] =
    indexed.coveredBy.map(c => (DeleteKeyIndexSource(c.by, io, readSchema), c.keyPosition))
}

/**
 * The filter strategy's index of one equality set, as a one-row relation: its single value is
 * the handle of the broadcast index ([[BroadcastHandle]]). Planned only as the plan of a scalar
 * subquery that the filter strategy's `EqualityDeleteMatch` (and the join's `CoveredDeleteRow`) reads, so the index is built during execution, before
 * the filter runs, the way Spark builds its runtime Bloom filters; optimizing a plan (EXPLAIN,
 * `decisions(df)`) reads no delete file and runs no job.
 */
final case class BuildDeleteKeyIndex(source: DeleteKeyIndexSource, output: Seq[Attribute]) extends LeafNode {
  override def maxRows: Option[Long] = Some(1)
  override def computeStats(): Statistics = Statistics(sizeInBytes = BigInt(256), rowCount = Some(1))
  override def simpleString(maxFields: Int): String = s"BuildDeleteKeyIndex ${source.describe}"
  override def argString(maxFields: Int): String = source.describe
}

object BuildDeleteKeyIndex {
  def apply(source: DeleteKeyIndexSource): BuildDeleteKeyIndex =
    BuildDeleteKeyIndex(source, Seq(AttributeReference("eqdelete_delete_key_index", BinaryType, nullable = false)()))
}
