package eqdelete.join

import eqdelete.deleteindex.KeyBits

import org.apache.spark.sql.catalyst.expressions.{Expression, NonSQLExpression, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.types.{DataType, LongType}

/**
 * A float or double join key as [[KeyBits]], so the join compares as Iceberg does (NaN equals
 * NaN, -0.0 is not 0.0): Spark normalises floating-point join keys, which would not.
 */
case class KeyBitsExpression(child: Expression) extends UnaryExpression with NonSQLExpression {
  require(KeyBits.isFloating(child.dataType), s"not a floating-point key: ${child.dataType}")

  override def dataType: DataType = LongType
  override def prettyName: String = "eqdelete_key_bits"
  override protected def nullSafeEval(value: Any): Any = KeyBits.of(value)
  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode =
    defineCodeGen(ctx, ev, value => KeyBits.code(child.dataType, value))
  override protected def withNewChildInternal(newChild: Expression): KeyBitsExpression = copy(child = newChild)
}
