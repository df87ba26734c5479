package eqdelete.join

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, NonSQLExpression, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.catalyst.expressions.codegen.Block._
import org.apache.spark.sql.execution.metric.SQLMetric
import org.apache.spark.sql.types.{BooleanType, DataType}

/**
 * The last conjunct of a delete join's condition (the delete is newer than the row), counting in
 * `counted` each time it holds: an anti or semi join stops at the first delete row for which the
 * whole condition holds, so the count is the rows the join removes (or, semi, finds deleted).
 */
case class CountingCondition(child: Expression, counted: SQLMetric) extends UnaryExpression with NonSQLExpression {
  require(child.dataType == BooleanType, s"not a condition: ${child.dataType}")

  override def dataType: DataType = BooleanType
  override def prettyName: String = "eqdelete_counted"
  override def toString: String = child.toString

  override def eval(input: InternalRow): Any = {
    val holds = child.eval(input)
    if (holds == true) counted.add(1L)
    holds
  }

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val metric = ctx.addReferenceObj("rowsRemoved", counted)
    val c = child.genCode(ctx)
    ev.copy(code = code"""
      ${c.code}
      boolean ${ev.isNull} = ${c.isNull};
      boolean ${ev.value} = ${c.value};
      if (!${ev.isNull} && ${ev.value}) $metric.add(1L);""")
  }

  override protected def withNewChildInternal(newChild: Expression): CountingCondition = copy(child = newChild)
}
