package eqdelete.expressions

import eqdelete.planning.DeleteKeyIndex

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, NonSQLExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.types.{BooleanType, DataType}

/**
 * True when the row's key (NULL equal to NULL) is deleted by a delete row of the same scope
 * or a global one, with a larger sequence number than the row's data file: set membership
 * against the delete rows compiled on the driver, for the filter strategy.
 */
case class EqualityDeleteMatch(keys: Seq[Expression], scope: Expression, sequence: Expression, index: DeleteKeyIndex)
  extends Expression with CodegenFallback with NonSQLExpression {

  override def children: Seq[Expression] = keys ++ Seq(scope, sequence)
  override def dataType: DataType = BooleanType
  override def nullable: Boolean = false
  override def prettyName: String = "eqdelete_deleted"
  override def toString: String =
    s"$prettyName(${keys.mkString(", ")}; ${index.distinctKeys} delete keys)"

  override def eval(input: InternalRow): Any = {
    val values = new Array[Any](keys.length)
    var i = 0
    while (i < keys.length) {
      values(i) = keys(i).eval(input)
      i += 1
    }
    index.isDeleted(scope.eval(input).asInstanceOf[Long], sequence.eval(input).asInstanceOf[Long], values)
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): EqualityDeleteMatch = {
    val n = keys.length
    copy(keys = newChildren.take(n), scope = newChildren(n), sequence = newChildren(n + 1))
  }
}
