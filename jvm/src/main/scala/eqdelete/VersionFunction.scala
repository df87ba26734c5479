package eqdelete

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry.FunctionBuilder
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionInfo, Literal}
import org.apache.spark.sql.eqdelete.compat.SupportedVersions

/** `SELECT eqdelete_version()`: the loaded extension's version, and the Spark and Iceberg it runs on. */
object VersionFunction {
  val name = "eqdelete_version"

  private val info = new ExpressionInfo(
    getClass.getName, null, name,
    "_FUNC_() - Returns the version of the eqdelete extension loaded in this session, and the Spark and Iceberg versions it runs on.",
    /* arguments */ "", /* examples */ "", /* note */ "", /* group */ "misc_funcs",
    /* since */ "0.1.0", /* deprecated */ "", /* source */ "scala_udf")

  private val builder: FunctionBuilder = {
    case Seq() => Literal(SupportedVersions.describe)
    case args => throw new IllegalArgumentException(
      s"$name() takes no arguments, but ${args.size} were given")
  }

  val description: (FunctionIdentifier, ExpressionInfo, FunctionBuilder) =
    (FunctionIdentifier(name), info, builder)
}
