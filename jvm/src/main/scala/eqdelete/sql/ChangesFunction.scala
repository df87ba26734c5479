package eqdelete.sql

import eqdelete.changes.ChangesPlan

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionInfo}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.types.{ByteType, DataType, IntegerType, LongType, NullType, ShortType, StringType}

/**
 * `SELECT * FROM eqdelete_changes('cat.db.t' [, start_snapshot_id [, end_snapshot_id]])`: the
 * rows each snapshot after `start_snapshot_id` (exclusive; NULL or absent: from the first) up to
 * `end_snapshot_id` (inclusive; NULL or absent: the current) inserted and deleted
 * (eqdelete.changes.ChangesPlan, docs/changes.md). The snapshots are chosen from metadata while
 * the query is planned; their rows are read when it runs.
 */
private[eqdelete] object ChangesFunction {
  val name = "eqdelete_changes"
  private val usage = s"$name(table, start_snapshot_id, end_snapshot_id)"

  val description: TableFunctions.Description = {
    val info = new ExpressionInfo(
      getClass.getName, null, name,
      s"$usage - the rows each snapshot of the range inserted and deleted, with _change_type, " +
        "_change_ordinal and _commit_snapshot_id",
      "", "", "", "", "0.1.0", "", "scala_udf")
    (FunctionIdentifier(name), info, plan)
  }

  private def plan(arguments: Seq[Expression]): LogicalPlan = {
    if (arguments.isEmpty || arguments.size > 3) {
      throw new IllegalArgumentException(s"eqdelete: $usage takes 1 to 3 arguments, not ${arguments.size}")
    }
    val table = arguments.head match {
      case a if a.foldable && a.dataType == StringType && Option(a.eval()).exists(_.toString.trim.nonEmpty) => a.eval().toString
      case a => throw new IllegalArgumentException(s"eqdelete: $usage: table must be a constant string, not ${a.sql}")
    }
    def snapshot(index: Int, argument: String): Option[Long] = arguments.lift(index).flatMap {
      case a if a.foldable && Seq[DataType](ByteType, ShortType, IntegerType, LongType, NullType).contains(a.dataType) =>
        Option(a.eval()).map(_.asInstanceOf[Number].longValue())
      case a => throw new IllegalArgumentException(s"eqdelete: $usage: $argument must be a constant snapshot id or NULL, not ${a.sql}")
    }
    ChangesPlan.of(SparkSession.active, table, snapshot(1, "start_snapshot_id"), snapshot(2, "end_snapshot_id"))
      .queryExecution.analyzed
  }
}
