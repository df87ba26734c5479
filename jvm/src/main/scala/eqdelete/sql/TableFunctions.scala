package eqdelete.sql

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionInfo}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.types.StringType

/** eqdelete's table-valued functions, as `SparkSessionExtensions.injectTableFunction` takes them. */
private[eqdelete] object TableFunctions {
  type Description = (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan)

  val all: Seq[Description] = InformationFunction.all.map(describe)

  private def describe(function: InformationFunction): Description = {
    val info = new ExpressionInfo(
      function.getClass.getName, null, function.name, function.usage,
      /* arguments */ "", /* examples */ "", /* note */ "", /* group */ "",
      /* since */ "0.1.0", /* deprecated */ "", /* source */ "scala_udf")
    (FunctionIdentifier(function.name), info, arguments => InformationRelation(function, strings(function, arguments)))
  }

  /** The arguments as strings: each a constant string (a literal, or an expression of literals). */
  private def strings(function: InformationFunction, arguments: Seq[Expression]): Seq[String] = {
    val usage = s"${function.name}(${function.arguments.mkString(", ")})"
    if (arguments.size != function.arguments.size) {
      throw new IllegalArgumentException(s"eqdelete: $usage takes ${function.arguments.size} argument(s), not ${arguments.size}")
    }
    function.arguments.zip(arguments).map { case (name, argument) =>
      if (!argument.foldable || !argument.dataType.isInstanceOf[StringType]) {
        throw new IllegalArgumentException(s"eqdelete: $usage: $name must be a constant string, not ${argument.sql}")
      }
      Option(argument.eval()).map(_.toString).filter(_.trim.nonEmpty).getOrElse(
        throw new IllegalArgumentException(s"eqdelete: $usage: $name must not be NULL or empty"))
    }
  }
}
