package eqdelete.sql

import java.util.Locale

import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.catalyst.CatalystTypeConverters
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, Cast, Expression, Literal, NamedArgumentExpression}
import org.apache.spark.sql.catalyst.plans.logical.{OneRowRelation, Project}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.eqdelete.compat.SparkShim
import org.apache.spark.sql.execution.command.LeafRunnableCommand
import org.apache.spark.sql.types.NullType

/**
 * `CALL` of an eqdelete procedure on Spark 3.5, run when the statement runs, as Spark 4.x runs
 * its own `CALL`: the arguments are bound to the procedure's parameters as Spark 4.x binds them
 * (positional first, then by name; an optional one left out is NULL), each evaluated once and
 * up-cast to its parameter's type.
 */
private[sql] final case class EqDeleteCallCommand(procedure: EqDeleteProcedure, arguments: Seq[Expression])
    extends LeafRunnableCommand {

  override val output: Seq[Attribute] = DataTypeUtils.toAttributes(procedure.output)

  override def simpleString(maxFields: Int): String =
    s"CALL eqdelete procedure ${procedure.name}(${arguments.map(_.sql).mkString(", ")})"

  override def run(session: SparkSession): Seq[Row] = {
    val values = bound.zip(procedure.parameters).map { case (argument, parameter) => value(session, parameter, argument) }
    val toRow = CatalystTypeConverters.createToScalaConverter(procedure.output)
    procedure.call(session, org.apache.spark.sql.catalyst.InternalRow.fromSeq(values)).map(toRow(_).asInstanceOf[Row])
  }

  private def fail(message: String): Nothing = throw new IllegalArgumentException(s"eqdelete: ${procedure.name}: $message")

  /** The arguments in the order of the procedure's parameters. */
  private def bound: Seq[Expression] = {
    val parameters = procedure.parameters
    val (positional, rest) = arguments.span(!_.isInstanceOf[NamedArgumentExpression])
    val named = rest.map {
      case NamedArgumentExpression(name, value) => name.toLowerCase(Locale.ROOT) -> value
      case other => fail(s"a positional argument (${other.sql}) cannot follow a named one")
    }
    if (positional.size > parameters.size) fail(s"takes at most ${parameters.size} arguments, not ${positional.size}")
    named.map(_._1).diff(named.map(_._1).distinct).foreach(name => fail(s"argument $name is given twice"))
    named.map(_._1).foreach { name =>
      val i = parameters.indexWhere(_.name == name)
      if (i < 0) fail(s"has no parameter $name; its parameters are ${parameters.map(_.name).mkString(", ")}")
      if (i < positional.size) fail(s"argument $name is given both by position and by name")
    }
    val byName = named.toMap
    parameters.zipWithIndex.map { case (parameter, i) =>
      if (i < positional.size) positional(i)
      else byName.getOrElse(parameter.name,
        if (parameter.required) fail(s"needs argument ${parameter.name}") else Literal(null, parameter.dataType))
    }
  }

  private def value(session: SparkSession, parameter: ProcedureParameter, argument: Expression): Any = {
    def evaluated(e: Expression) = SparkShim.dataFrame(session, Project(Seq(Alias(e, parameter.name)()), OneRowRelation()))
    val given = evaluated(argument).schema.head.dataType
    if (given != parameter.dataType && given != NullType && !Cast.canUpCast(given, parameter.dataType)) {
      fail(s"${parameter.name} must be ${parameter.dataType.simpleString}, not ${given.simpleString} (${argument.sql})")
    }
    evaluated(Cast(argument, parameter.dataType)).queryExecution.executedPlan.executeCollect().head.get(0, parameter.dataType)
  }
}
