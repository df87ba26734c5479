package eqdelete.deleteindex.build

import eqdelete.deleteindex.{DeleteKeyIndex, TwoLongKeyIndex}

import org.apache.spark.broadcast.Broadcast
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, GenericInternalRow, UnsafeProjection}
import org.apache.spark.sql.execution.{LeafExecNode, SQLExecution}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}

/**
 * Builds (or takes from [[DeleteIndexCache]]) the index of one equality set on the driver,
 * broadcasts it, and returns one row holding the broadcast's handle. It runs when the scalar
 * subquery over it is prepared, once per query; the job that reads the delete files shows in
 * Spark's UI under the index's description.
 */
final case class BuildDeleteKeyIndexExec(@transient source: DeleteKeyIndexSource, output: Seq[Attribute]) extends LeafExecNode {
  // `source` is transient: this node runs on the driver only, but the plan above a filter that
  // reads its subquery is serialized into every read task (Spark's hash aggregate references its
  // own subtree), and the source holds every delete file of the set with its metrics: 1.4 MB a
  // task for 1,920 delete files, ~15 ms of deserialization each, where the floor's plan was 41 KB.

  // Built at most once per physical plan, however many times the row is asked for. The plan
  // holds the broadcast itself for as long as the query runs: the handles its expressions read
  // are copies, which would not keep Spark's cleaner from removing its blocks.
  // Covering indexes come from the cache, where their own subqueries put them (or find them).
  @transient private lazy val broadcast: Broadcast[DeleteKeyIndex] = {
    val started = System.nanoTime()
    val coverers = source.coverers.map { case (coverer, position) =>
      (DeleteIndexCache.getOrBuild(sparkContext, conf, coverer).index, position)
    }
    val built = DeleteIndexCache.getOrBuild(sparkContext, conf, source, coverers)
    source.covered.foreach(_.record(0, built.coveredRows))
    report(built, System.nanoTime() - started)
    built.index
  }

  // What the index cost, on this node in Spark's UI (built on the driver: posted as driver metrics).
  override lazy val metrics: Map[String, SQLMetric] = Map(
    "deleteRows" -> SQLMetrics.createMetric(sparkContext, "delete rows of the index"),
    "distinctKeys" -> SQLMetrics.createMetric(sparkContext, "distinct keys in the index"),
    "coveredRows" -> SQLMetrics.createMetric(sparkContext, "delete rows dropped as covered"),
    "buildTime" -> SQLMetrics.createTimingMetric(sparkContext, "time to build the index (0 if kept)"),
    "kept" -> SQLMetrics.createMetric(sparkContext, "index kept from an earlier query (1) or built (0)"),
    "indexBytes" -> SQLMetrics.createSizeMetric(sparkContext, "index size in memory"),
    "keysInTwoLongs" -> SQLMetrics.createMetric(sparkContext, "keys held in two longs: UUIDs (1), strings of at most 15 bytes (2), or not (0)")) ++
    Option(source).flatMap(_.removed).map("rowsRemoved" -> _)

  private def report(built: DeleteIndexCache.BuiltIndex, nanos: Long): Unit = {
    metrics("deleteRows").set(source.indexed.set.records)
    metrics("distinctKeys").set(built.index.value.distinctKeys.toLong)
    metrics("coveredRows").set(built.coveredRows)
    metrics("buildTime").set(if (built.kept) 0L else nanos / 1000000L)
    metrics("kept").set(if (built.kept) 1L else 0L)
    metrics("indexBytes").set(built.bytes)
    metrics("keysInTwoLongs").set(built.index.value match { case pairs: TwoLongKeyIndex => pairs.form.id.toLong; case _ => 0L })
    SQLMetrics.postDriverMetricUpdates(sparkContext, sparkContext.getLocalProperty(SQLExecution.EXECUTION_ID_KEY),
      metrics.collect { case (name, metric) if name != "rowsRemoved" => metric }.toSeq)
  }

  // Spark's subquery reads rows as UnsafeRows.
  @transient private lazy val handleRow: InternalRow =
    UnsafeProjection.create(schema)(new GenericInternalRow(Array[Any](BroadcastHandle.write(broadcast)))).copy()

  override def executeCollect(): Array[InternalRow] = Array(handleRow)
  override def executeTake(limit: Int): Array[InternalRow] = if (limit <= 0) Array.empty else executeCollect()
  override protected def doExecute(): RDD[InternalRow] = sparkContext.parallelize(executeCollect().toSeq, 1)
  // Once built, the count of covered rows dropped shows in EXPLAIN of the executed plan.
  private def described: String = Option(source) match {
    case Some(s) => s.describe + s.covered.flatMap(_.rows).map(n => s": $n covered").getOrElse("")
    case None => "(deserialized: built on the driver)"
  }
  override def simpleString(maxFields: Int): String = s"BuildDeleteKeyIndex $described"
  override def argString(maxFields: Int): String = described
}
