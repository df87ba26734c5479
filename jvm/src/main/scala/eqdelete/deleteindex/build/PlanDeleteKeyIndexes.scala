package eqdelete.deleteindex.build

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.{SparkPlan, SparkStrategy}

/** Plans [[BuildDeleteKeyIndex]] relations (the filter's index subqueries) for execution. */
object PlanDeleteKeyIndexes extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case BuildDeleteKeyIndex(source, output) => BuildDeleteKeyIndexExec(source, output) :: Nil
    case _ => Nil
  }
}
