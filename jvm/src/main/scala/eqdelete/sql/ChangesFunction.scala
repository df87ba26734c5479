package eqdelete.sql

import eqdelete.changes.{ChangesOptions, ChangesPlan}

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionInfo}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.util.MapData
import org.apache.spark.sql.types.{ByteType, DataType, IntegerType, LongType, MapType, NullType, ShortType, StringType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * `SELECT * FROM eqdelete_changes('cat.db.t' [, start_snapshot_id [, end_snapshot_id [, options]]])`:
 * the rows each snapshot after `start_snapshot_id` (exclusive; NULL or absent: from the first) up
 * to `end_snapshot_id` (inclusive; NULL or absent: the current) inserted and deleted; `options` a
 * map of Iceberg's changelog options by their names (ChangesOptions)
 * (eqdelete.changes.ChangesPlan, docs/changes.md). The snapshots are chosen from metadata while
 * the query is planned; their rows are read when it runs.
 */
private[eqdelete] object ChangesFunction {
  val name = "eqdelete_changes"
  private val usage = s"$name(table, start_snapshot_id, end_snapshot_id, options)"

  val description: TableFunctions.Description = {
    val info = new ExpressionInfo(
      getClass.getName, null, name,
      s"$usage - the rows each snapshot of the range inserted and deleted, with _change_type, " +
        "_change_ordinal and _commit_snapshot_id",
      "", "", "", "", "0.1.0", "", "scala_udf")
    (FunctionIdentifier(name), info, plan)
  }

  private def plan(arguments: Seq[Expression]): LogicalPlan = {
    if (arguments.isEmpty || arguments.size > 4) {
      throw new IllegalArgumentException(s"eqdelete: $usage takes 1 to 4 arguments, not ${arguments.size}")
    }
    val table = arguments.head match {
      case a if a.foldable && a.dataType == StringType && Option(a.eval()).exists(_.toString.trim.nonEmpty) => a.eval().toString
      case a => throw new IllegalArgumentException(s"eqdelete: $usage: table must be a constant string, not ${a.sql}")
    }
    def snapshot(index: Int, argument: String): Option[(String, String)] = arguments.lift(index).flatMap {
      case a if a.foldable && Seq[DataType](ByteType, ShortType, IntegerType, LongType, NullType).contains(a.dataType) =>
        Option(a.eval()).map(id => argument -> id.toString)
      case a => throw new IllegalArgumentException(s"eqdelete: $usage: $argument must be a constant snapshot id or NULL, not ${a.sql}")
    }
    val options: Map[String, String] = arguments.lift(3).map {
      case a if a.foldable && (a.dataType match {
            case MapType(k, v, _) => Seq(k, v).forall(t => t == StringType || t == NullType)  // map(): NULL types
            case t => t == NullType
          }) =>
        Option(a.eval().asInstanceOf[MapData]).map { map =>
          val keys = map.keyArray().toSeq[UTF8String](StringType).map(_.toString)
          val values = map.valueArray().toSeq[UTF8String](StringType).map(v => Option(v).map(_.toString).orNull)
          keys.zip(values).toMap
        }.getOrElse(Map.empty[String, String])
      case a => throw new IllegalArgumentException(s"eqdelete: $usage: options must be a constant map of strings, not ${a.sql}")
    }.getOrElse(Map.empty)
    val bounds = snapshot(1, ChangesOptions.StartSnapshotId).toSeq ++ snapshot(2, ChangesOptions.EndSnapshotId)
    bounds.map(_._1).filter(k => options.keySet.exists(_.equalsIgnoreCase(k))).foreach { key =>
      throw new IllegalArgumentException(s"eqdelete: $usage: $key is given both as an argument and in options")
    }
    ChangesPlan.of(SparkSession.active, table, ChangesOptions.parse(options ++ bounds)).queryExecution.analyzed
  }
}
