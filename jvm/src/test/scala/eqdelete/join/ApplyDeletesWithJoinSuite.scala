package eqdelete.join

import eqdelete.covering.CoveredDeleteRow
import eqdelete.testing.{IcebergTables, TestSpark}

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.expressions.{AttributeReference, EqualTo, Expression, LessThan, Not}
import org.apache.spark.sql.catalyst.plans.LeftAnti
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, LogicalPlan}
import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/** The join strategy's plan shapes, on the optimized plan, and their rows. */
class ApplyDeletesWithJoinSuite extends AnyFunSuite with BeforeAndAfterEach {

  private lazy val spark = TestSpark.session
  private lazy val tables = new IcebergTables(spark, "join")

  override def beforeEach(): Unit = spark.conf.set("spark.eqdelete.strategy", "join")
  override def afterEach(): Unit = {
    spark.conf.unset("spark.eqdelete.strategy")
    spark.conf.unset("spark.eqdelete.join.broadcastMaxBytes")
  }

  private def antiJoins(df: DataFrame): Seq[Join] =
    df.queryExecution.optimizedPlan.collect { case j: Join if j.joinType == LeftAnti => j }
  private def comparesAttribute(condition: Expression, name: String): Boolean =
    condition.collect {
      case EqualTo(_, a: AttributeReference) if a.name == name => a
      case LessThan(_, a: AttributeReference) if a.name == name => a
    }.nonEmpty
  private def keys(df: DataFrame): Set[Long] = df.collect().map(_.getLong(0)).toSet

  test("a partition's deletes join by key and scope, global ones by key alone; both only on older rows") {
    val table = tables.create(partitioned = true)
    tables.insert(table, (1L to 6L).map(k => (k, s"v$k", (k % 2).toInt)))
    tables.deleteKeys(table, Seq((2L, 0), (3L, 0)))              // partition p=0: deletes 2; 3 lives in p=1
    tables.deleteKeys(table, Seq((5L, 0)), global = true)        // every partition
    tables.insert(table, Seq((5L, "new", 1)))                   // newer than the global delete: stays

    val joins = antiJoins(spark.table(table))
    assert(joins.size == 2, joins)
    val (scoped, global) = joins.partition(j => comparesAttribute(j.condition.get, "_eqdelete_delete_scope"))
    assert(scoped.size == 1 && global.size == 1, joins.map(_.condition))
    assert(joins.forall(j => comparesAttribute(j.condition.get, "_eqdelete_delete_seq")), joins.map(_.condition))
    assert(keys(spark.table(table)) == Set(1L, 3L, 4L, 5L, 6L))
    assert(spark.table(table).where("k = 5").collect().map(_.getString(1)).toSeq == Seq("new"))
  }

  test("a shuffled multi-column part drops the delete rows a single-column set covers before the shuffle") {
    import spark.implicits._
    val table = tables.create()
    tables.insert(table, (1L to 20L).map(k => (k, s"v$k", 0)))
    tables.deleteKeys(table, Seq((1L, 0), (2L, 0)))
    // (k, v) rows: (1, v1) is covered by k = 1; (3, v3) deletes; (4, other) matches nothing.
    tables.delete(table, Seq("k", "v"), Seq((1L, "v1", 0), (3L, "v3", 0), (4L, "other", 0)).toDF("k", "v", "p"))

    spark.conf.set("spark.eqdelete.join.broadcastMaxBytes", "-1")
    val shuffled = antiJoins(spark.table(table))
    def coveredFilter(side: LogicalPlan) = side.collectFirst {
      case Filter(Not(check), _) if check.collect { case c: CoveredDeleteRow => c }.nonEmpty => check
    }
    assert(shuffled.size == 2, shuffled)
    assert(shuffled.count(j => coveredFilter(j.right).isDefined) == 1, shuffled.map(_.right))
    assert(keys(spark.table(table)) == (1L to 20L).toSet -- Set(1L, 2L, 3L))

    spark.conf.unset("spark.eqdelete.join.broadcastMaxBytes")
    val broadcast = antiJoins(spark.table(table))
    assert(broadcast.forall(j => coveredFilter(j.right).isEmpty), broadcast.map(_.right))
    assert(keys(spark.table(table)) == (1L to 20L).toSet -- Set(1L, 2L, 3L))
  }
}
