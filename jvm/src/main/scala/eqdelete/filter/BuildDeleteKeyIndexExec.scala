package eqdelete.filter

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, GenericInternalRow, UnsafeProjection}
import org.apache.spark.sql.execution.LeafExecNode

/**
 * Builds (or takes from [[DeleteIndexCache]]) the index of one equality set on the driver,
 * broadcasts it, and returns one row holding the broadcast's handle. It runs when the scalar
 * subquery over it is prepared, once per query; the job that reads the delete files shows in
 * Spark's UI under the index's description.
 */
final case class BuildDeleteKeyIndexExec(source: DeleteKeyIndexSource, output: Seq[Attribute]) extends LeafExecNode {

  // Built at most once per physical plan, however many times the row is asked for.
  @transient private lazy val handleRow: InternalRow = {
    val broadcast = DeleteIndexCache.getOrBuild(sparkContext, conf, source)
    // Spark's subquery reads rows as UnsafeRows.
    UnsafeProjection.create(schema)(new GenericInternalRow(Array[Any](BroadcastHandle.write(broadcast)))).copy()
  }

  override def executeCollect(): Array[InternalRow] = Array(handleRow)
  override def executeTake(limit: Int): Array[InternalRow] = if (limit <= 0) Array.empty else executeCollect()
  override protected def doExecute(): RDD[InternalRow] = sparkContext.parallelize(executeCollect().toSeq, 1)
  override def simpleString(maxFields: Int): String = s"BuildDeleteKeyIndex ${source.describe}"
  override def argString(maxFields: Int): String = source.describe
}
