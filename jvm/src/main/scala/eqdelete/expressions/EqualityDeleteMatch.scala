package eqdelete.expressions

import eqdelete.planning.DeleteKeyIndex

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, NonSQLExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodeGenerator, CodegenContext, ExprCode, FalseLiteral}
import org.apache.spark.sql.catalyst.expressions.codegen.Block._
import org.apache.spark.sql.types.{BooleanType, DataType}

/**
 * True when the row's key (NULL equal to NULL) is deleted by a delete row of the same scope
 * or a global one, with a larger sequence number than the row's data file: set membership
 * against the delete rows compiled on the driver, for the filter strategy.
 */
case class EqualityDeleteMatch(keys: Seq[Expression], scope: Expression, sequence: Expression, index: DeleteKeyIndex)
  extends Expression with NonSQLExpression {

  override def children: Seq[Expression] = keys ++ Seq(scope, sequence)
  override def dataType: DataType = BooleanType
  override def nullable: Boolean = false
  override def prettyName: String = "eqdelete_deleted"
  override def toString: String =
    s"$prettyName(${keys.mkString(", ")}; ${index.distinctKeys} delete keys)"

  override def eval(input: InternalRow): Any = {
    val values = keys.map(_.eval(input)).toArray[Any]
    index.isDeleted(scope.eval(input).asInstanceOf[Long], sequence.eval(input).asInstanceOf[Long], values)
  }

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val indexRef = ctx.addReferenceObj("deleteKeys", index, classOf[DeleteKeyIndex].getName)
    val keyCodes = keys.map(_.genCode(ctx))
    val scopeCode = scope.genCode(ctx)
    val seqCode = sequence.genCode(ctx)
    def boxed(code: ExprCode, dataType: DataType): String =
      s"(${code.isNull} ? null : (Object) ${CodeGenerator.boxedType(dataType)}.valueOf(${code.value}))"
    def asObject(code: ExprCode, dataType: DataType): String =
      if (CodeGenerator.isPrimitiveType(dataType)) boxed(code, dataType) else s"(${code.isNull} ? null : (Object) ${code.value})"
    val args = keys.zip(keyCodes).map { case (k, c) => asObject(c, k.dataType) }
    val lookup = if (keys.size == 1) {
      s"$indexRef.isDeleted(${scopeCode.value}, ${seqCode.value}, ${args.head})"
    } else {
      s"$indexRef.isDeleted(${scopeCode.value}, ${seqCode.value}, new Object[] {${args.mkString(", ")}})"
    }
    ev.copy(code = code"""
      ${keyCodes.map(_.code).mkString("\n")}
      ${scopeCode.code}
      ${seqCode.code}
      boolean ${ev.value} = $lookup;""", isNull = FalseLiteral)
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): EqualityDeleteMatch = {
    val n = keys.length
    copy(keys = newChildren.take(n), scope = newChildren(n), sequence = newChildren(n + 1))
  }
}
