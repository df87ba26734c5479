package eqdelete.filter

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, NonSQLExpression, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode, FalseLiteral}
import org.apache.spark.sql.catalyst.expressions.codegen.Block._
import org.apache.spark.sql.execution.metric.SQLMetric
import org.apache.spark.sql.types.{BooleanType, DataType}

/**
 * The filter's read of a column [[LookUpDeletedKeysExec]] appends (`child`): whether the row is
 * deleted, counted into `removed` where it is, as [[EqualityDeleteMatch]] counted: only where the
 * filter's predicate asks, so a row two sets delete counts once, for the set asked first.
 */
case class DeletedInBatch(child: Expression, removed: Option[SQLMetric]) extends UnaryExpression with NonSQLExpression {
  override def dataType: DataType = BooleanType
  override def nullable: Boolean = false
  override def prettyName: String = "eqdelete_deleted_in_batch"
  override def toString: String = s"$prettyName($child)"

  override def eval(input: InternalRow): Any = {
    val deleted = child.eval(input).asInstanceOf[Boolean]
    if (deleted) removed.foreach(_.add(1L))
    deleted
  }

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val value = child.genCode(ctx)
    val count = removed.map(m => s"if (${ev.value}) ${ctx.addReferenceObj("rowsRemoved", m)}.add(1L);").getOrElse("")
    ev.copy(code = code"""
      ${value.code}
      boolean ${ev.value} = ${value.value};
      $count""", isNull = FalseLiteral)
  }

  override protected def withNewChildInternal(newChild: Expression): DeletedInBatch = copy(child = newChild)
}
