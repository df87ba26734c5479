package eqdelete.rule

import java.util.concurrent.atomic.AtomicInteger

import eqdelete.filter.EqualityDeleteMatch
import eqdelete.deleteindex.build.BuildDeleteKeyIndex
import eqdelete.scan.{FileSelectingTable, NamedNativeTable, ScanPlanning}
import eqdelete.testing.TestSpark
import eqdelete.write.EqualityDeleteWriter

import org.apache.iceberg.spark.source.SparkTable
import org.apache.spark.scheduler.{SparkListener, SparkListenerJobStart}
import org.apache.spark.sql.{DataFrame, Row}
import org.apache.spark.sql.catalyst.expressions.{EqualNullSafe, EqualTo, ScalarSubquery}
import org.apache.spark.sql.catalyst.plans.LeftAnti
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Join, LogicalPlan, Union}
import org.apache.spark.sql.eqdelete.compat.SparkInternals
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation
import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/** The shapes the rule builds, asserted on the optimized plan, and their rows against a model. */
class RewriteEqualityDeleteScansSuite extends AnyFunSuite with BeforeAndAfterEach {

  private lazy val spark = TestSpark.session
  private var tables = 0
  private var table: String = _

  override def beforeEach(): Unit = {
    tables += 1
    table = s"cat.db.t$tables"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS cat.db")
    spark.sql(s"CREATE TABLE $table (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")
  }

  override def afterEach(): Unit = spark.conf.unset("spark.eqdelete.join.broadcastMaxBytes")

  private def insert(rows: Seq[(java.lang.Long, String)]): Unit = {
    import spark.implicits._
    rows.toDF("k", "v").coalesce(1).writeTo(table).append() // one data file
  }

  private def deleteKeys(keys: Seq[java.lang.Long]): Unit = {
    import spark.implicits._
    EqualityDeleteWriter.commit(spark, table, java.util.Collections.singletonList("k"), keys.toDF("k").coalesce(1), null, false)
  }

  private def withStrategy[T](strategy: String)(body: => T): T = {
    spark.conf.set("spark.eqdelete.strategy", strategy)
    try body finally spark.conf.unset("spark.eqdelete.strategy")
  }

  private def plan(df: DataFrame): LogicalPlan = df.queryExecution.optimizedPlan
  private def antiJoins(p: LogicalPlan): Seq[Join] = p.collect { case j: Join if j.joinType == LeftAnti => j }
  private def rewrittenScans(p: LogicalPlan): Seq[DataSourceV2ScanRelation] = p.collect {
    case s: DataSourceV2ScanRelation if (s.relation.table match {
      case t: SparkTable => t.table().isInstanceOf[FileSelectingTable]
      case _ => false
    }) => s
  }
  private def rows(df: DataFrame): Set[Row] = df.collect().toSet
  private def aggregated(join: Join): Boolean = join.right.collectFirst { case a: Aggregate => a }.isDefined

  test("one scan when every file has deletes; a union beside a larger file without") {
    insert((1L to 10L).map(k => (java.lang.Long.valueOf(k), s"v$k")))
    deleteKeys(Seq(2L, 4L))
    withStrategy("filter") {
      assert(plan(spark.table(table)).collect { case u: Union => u }.isEmpty)
      insert((100L to 200L).map(k => (java.lang.Long.valueOf(k), s"v$k")))
      val p = plan(spark.table(table))
      assert(p.collect { case u: Union => u }.size == 1, p)
      assert(rows(spark.table(table)).map(_.getLong(0)) == ((1L to 10L).toSet -- Set(2L, 4L)) ++ (100L to 200L).toSet)
    }
  }

  test("join: the delete side as read, broadcast or shuffled, never aggregated") {
    insert((1L to 10L).map(k => (java.lang.Long.valueOf(k), s"v$k")))
    deleteKeys(Seq(3L))
    withStrategy("join") {
      val broadcast = antiJoins(plan(spark.table(table)))
      assert(broadcast.size == 1 && !aggregated(broadcast.head) && broadcast.head.hint.rightHint.isDefined)
      spark.conf.set("spark.eqdelete.join.broadcastMaxBytes", "-1")
      val shuffled = antiJoins(plan(spark.table(table)))
      assert(shuffled.size == 1 && !aggregated(shuffled.head) && shuffled.head.hint.rightHint.isEmpty)
      assert(rows(spark.table(table)).map(_.getLong(0)) == (1L to 10L).toSet - 3L)
    }
  }

  test("join: = when no delete key is NULL, <=> when one may be") {
    insert(Seq[(java.lang.Long, String)]((1L, "a"), (null, "n"), (2L, "b")))
    deleteKeys(Seq(1L))
    withStrategy("join") {
      val condition = antiJoins(plan(spark.table(table))).head.condition.get
      assert(condition.collect { case e: EqualTo => e }.nonEmpty && condition.collect { case e: EqualNullSafe => e }.isEmpty)
      deleteKeys(Seq(null))
      val withNull = antiJoins(plan(spark.table(table))).map(_.condition.get)
      assert(withNull.exists(_.collect { case e: EqualNullSafe => e }.nonEmpty), withNull)
      assert(rows(spark.table(table)).map(_.getString(1)) == Set("b"))
    }
  }

  test("the query's filters are pushed into the rewritten scans") {
    insert((1L to 10L).map(k => (java.lang.Long.valueOf(k), if (k % 2 == 0) "even" else "odd")))
    deleteKeys(Seq(2L, 3L))
    Seq("filter", "join").foreach { strategy =>
      withStrategy(strategy) {
        val df = spark.table(table).where("v = 'even'")
        val scans = rewrittenScans(plan(df))
        assert(scans.nonEmpty)
        scans.foreach(s => assert(s.scan.description().contains("v = 'even'") || s.scan.description().contains("v = \"even\""),
          s.scan.description()))
        assert(rows(df).map(_.getLong(0)) == Set(4L, 6L, 8L, 10L), strategy)
      }
    }
  }

  test("filter: one index subquery per equality set, and optimizing runs no job") {
    insert((1L to 10L).map(k => (java.lang.Long.valueOf(k), s"v$k")))
    deleteKeys(Seq(5L))
    val jobs = new AtomicInteger()
    val listener = new SparkListener { override def onJobStart(e: SparkListenerJobStart): Unit = jobs.incrementAndGet() }
    spark.sparkContext.addSparkListener(listener)
    try withStrategy("filter") {
      val df = spark.table(table)
      val p = plan(df)
      df.queryExecution.executedPlan
      SparkInternals.waitForListeners(spark)
      assert(jobs.get() == 0)
      val indexes = p.collect { case f => f.expressions.flatMap(_.collect { case m: EqualityDeleteMatch => m.index }) }.flatten
      assert(indexes.size == 1)
      assert(indexes.head.asInstanceOf[ScalarSubquery].plan.isInstanceOf[BuildDeleteKeyIndex])
      assert(rows(df).map(_.getLong(0)) == (1L to 10L).toSet - 5L)
    } finally spark.sparkContext.removeSparkListener(listener)
  }

  test("the rewritten scans are served the delete planning's tasks, not planned again") {
    insert((1L to 10L).map(k => (java.lang.Long.valueOf(k), if (k % 2 == 0) "even" else "odd")))
    deleteKeys(Seq(2L, 3L))
    insert((100L to 200L).map(k => (java.lang.Long.valueOf(k), "even"))) // a union: two scans
    Seq("filter", "join").foreach { strategy =>
      withStrategy(strategy) {
        val (served, again) = (ScanPlanning.servedPlanned.get(), ScanPlanning.plannedAgain.get())
        val df = spark.table(table).where("v = 'even' AND k < 150").select("k")
        assert(rows(df).map(_.getLong(0)) == Set(4L, 6L, 8L, 10L) ++ (100L until 150L).toSet, strategy)
        assert(ScanPlanning.plannedAgain.get() == again, strategy)
        assert(ScanPlanning.servedPlanned.get() - served == 2, strategy)
      }
    }
  }

  test("tables without equality deletes are left exactly as they were") {
    insert(Seq[(java.lang.Long, String)]((1L, "a")))
    withStrategy("filter") {
      assert(rewrittenScans(plan(spark.table(table))).isEmpty && antiJoins(plan(spark.table(table))).isEmpty)
    }
  }

  test("reads it does not model keep Iceberg's own table and options, named with the reason") {
    insert((1L to 10L).map(k => (java.lang.Long.valueOf(k), s"v$k")))
    val first = spark.sql(s"SELECT snapshot_id FROM $table.snapshots").head().getLong(0)
    deleteKeys(Seq(2L))
    insert(Seq[(java.lang.Long, String)]((20L, "new")))
    def namedNative(df: DataFrame): Seq[NamedNativeTable] = plan(df).collect {
      case s: DataSourceV2ScanRelation => s.relation.table
    }.collect { case n: NamedNativeTable => n }
    withStrategy("join") {
      val deleted = spark.sql(s"SELECT k, _deleted FROM $table")
      val Seq(named) = namedNative(deleted)
      assert(named.decision.reason.startsWith("reads the _deleted metadata column") && antiJoins(plan(deleted)).isEmpty)
      assert(named.iceberg.getClass == classOf[SparkTable] && named.name().contains("[eqdelete native: reads the _deleted"))
      assert(rows(deleted).map(r => (r.getLong(0), r.getBoolean(1))) == (1L to 10L).map(k => (k, k == 2L)).toSet + ((20L, false)))

      val incremental = spark.read.format("iceberg").option("start-snapshot-id", first.toString).load(table)
      assert(namedNative(incremental).map(_.decision.reason) == Seq(
        "incremental read (start-snapshot-id): Iceberg applies no deletes to the rows it appends"))
      assert(rows(incremental).map(_.getLong(0)) == Set(20L))

      // _file and _pos are modelled: rewritten, though Spark adds every metadata column to the relation.
      val files = spark.sql(s"SELECT k, _file, _pos FROM $table")
      assert(namedNative(files).isEmpty && antiJoins(plan(files)).size == 1)
    }
  }
}
