package eqdelete.scan

import eqdelete.planning.DataFileScopes

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, NonSQLExpression, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode, FalseLiteral}
import org.apache.spark.sql.catalyst.expressions.codegen.Block._
import org.apache.spark.sql.types.{DataType, LongType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * The data sequence number or the partition scope of the data file a row comes from, looked
 * up by the `_file` metadata column. Fails the query for a file the planning did not see.
 */
case class DataFileProperty(child: Expression, index: DataFileScopes, property: String)
  extends UnaryExpression with NonSQLExpression {
  require(property == DataFileProperty.Sequence || property == DataFileProperty.Scope)

  override def dataType: DataType = LongType
  override def nullable: Boolean = false
  override def prettyName: String = s"eqdelete_data_file_$property"
  override def toString: String = s"$prettyName($child)"

  override def eval(input: InternalRow): Any = {
    val path = child.eval(input).asInstanceOf[UTF8String]
    if (property == DataFileProperty.Sequence) index.sequenceNumber(path) else index.scope(path)
  }

  // Rows of one file arrive together: remember the last path (a copy, since readers may reuse
  // buffers) and its value, so most rows pay a comparison instead of a hash lookup. Iceberg's
  // readers hand out `_file` as one constant UTF8String per file, so the object is usually the
  // very one seen last and needs no byte comparison; readers that decode a value per row hand
  // out a new object each time, which is compared by its bytes.
  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val indexRef = ctx.addReferenceObj("dataFileScopes", index, classOf[DataFileScopes].getName)
    val method = if (property == DataFileProperty.Sequence) "sequenceNumber" else "scope"
    val utf8 = classOf[UTF8String].getName
    val lastSeen = ctx.addMutableState(utf8, "eqdeleteLastSeen", forceInline = true)
    val lastPath = ctx.addMutableState(utf8, "eqdeleteLastPath", forceInline = true)
    val lastValue = ctx.addMutableState("long", "eqdeleteLastValue", forceInline = true)
    val path = child.genCode(ctx)
    ev.copy(code = code"""
      ${path.code}
      if (${path.value} != $lastSeen) {
        if ($lastPath == null || !$lastPath.equals(${path.value})) {
          $lastValue = $indexRef.$method(${path.value});
          $lastPath = ${path.value}.copy();
        }
        $lastSeen = ${path.value};
      }
      long ${ev.value} = $lastValue;""", isNull = FalseLiteral)
  }

  override protected def withNewChildInternal(newChild: Expression): DataFileProperty = copy(child = newChild)
}

object DataFileProperty {
  val Sequence = "seq"
  val Scope = "scope"
}
