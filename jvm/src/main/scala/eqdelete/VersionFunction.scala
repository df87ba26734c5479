package eqdelete

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry.FunctionBuilder
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionInfo, Literal}

/** `SELECT eqdelete_version()`: the version of the loaded extension jar. */
object VersionFunction {
  val name = "eqdelete_version"

  /** From the jar manifest; "dev" when running from unpackaged classes. */
  lazy val version: String =
    Option(getClass.getPackage.getImplementationVersion).getOrElse("dev")

  private val info = new ExpressionInfo(
    getClass.getName, null, name,
    "_FUNC_() - Returns the version of the eqdelete extension loaded in this session.",
    /* arguments */ "", /* examples */ "", /* note */ "", /* group */ "misc_funcs",
    /* since */ "0.1.0", /* deprecated */ "", /* source */ "scala_udf")

  private val builder: FunctionBuilder = {
    case Seq() => Literal(version)
    case args => throw new IllegalArgumentException(
      s"$name() takes no arguments, but ${args.size} were given")
  }

  val description: (FunctionIdentifier, ExpressionInfo, FunctionBuilder) =
    (FunctionIdentifier(name), info, builder)
}
