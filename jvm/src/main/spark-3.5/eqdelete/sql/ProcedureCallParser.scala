package eqdelete.sql

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.{FunctionIdentifier, TableIdentifier}
import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.parser.ParserInterface
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * Spark 3.5's parser with one statement more: `CALL <catalog>.system.<procedure>(<arguments>)`
 * where `<catalog>` is registered as eqdelete's `EqDeleteProcedureCatalog`. Spark 3.5 has no
 * `CALL`, and Iceberg's SQL extensions pass on every `CALL` that does not name one of Iceberg's
 * own procedures, so this parser takes those statements and hands everything else, unchanged,
 * to the parser it wraps (Spark's, or Iceberg's when its extensions are loaded). The arguments
 * are parsed by that parser, as a function call's: positional, or named with `=>`.
 */
private[sql] final class ProcedureCallParser(session: SparkSession, delegate: ParserInterface) extends ParserInterface {
  override def parsePlan(sqlText: String): LogicalPlan = procedureCall(sqlText).getOrElse(delegate.parsePlan(sqlText))

  private def procedureCall(sqlText: String): Option[LogicalPlan] =
    ProcedureCallParser.Call.findFirstMatchIn(ProcedureCallParser.withoutLeadingComments(sqlText)).flatMap { m =>
      val path = scala.util.Try(delegate.parseMultipartIdentifier(m.group(1))).getOrElse(Nil)
      path match {
        case Seq(catalog, namespace @ _*) if path.size > 1 && isProcedureCatalog(catalog) =>
          val procedure = (if (namespace.init == EqDeleteProcedure.namespace) EqDeleteProcedure.named(namespace.last) else None)
            .getOrElse(throw EqDeleteProcedure.unknown(catalog, namespace))
          val arguments = delegate.parseExpression(s"${procedure.name}(${m.group(2)})") match {
            case f: UnresolvedFunction => f.arguments
            case other => throw new IllegalArgumentException(s"eqdelete: cannot read the arguments of ${path.mkString(".")}: $other")
          }
          Some(EqDeleteCallCommand(procedure, arguments))
        case _ => None
      }
    }

  private def isProcedureCatalog(catalog: String): Boolean =
    session.conf.getOption(s"spark.sql.catalog.$catalog").contains(classOf[EqDeleteProcedureCatalog].getName)

  override def parseExpression(sqlText: String): Expression = delegate.parseExpression(sqlText)
  override def parseTableIdentifier(sqlText: String): TableIdentifier = delegate.parseTableIdentifier(sqlText)
  override def parseFunctionIdentifier(sqlText: String): FunctionIdentifier = delegate.parseFunctionIdentifier(sqlText)
  override def parseMultipartIdentifier(sqlText: String): Seq[String] = delegate.parseMultipartIdentifier(sqlText)
  override def parseQuery(sqlText: String): LogicalPlan = delegate.parseQuery(sqlText)
  override def parseTableSchema(sqlText: String): StructType = delegate.parseTableSchema(sqlText)
  override def parseDataType(sqlText: String): DataType = delegate.parseDataType(sqlText)
}

private object ProcedureCallParser {
  /** `CALL name(arguments)`, an optional `;` after: the name, then the argument text. */
  private val Call = """(?is)\ACALL\s+([^(]+?)\s*\((.*)\)\s*;?\s*\z""".r

  private val LeadingComment = """(?s)\A\s*(--[^\n]*(\n|\z)|/\*.*?\*/)""".r

  def withoutLeadingComments(sqlText: String): String = {
    var text = sqlText
    var next = LeadingComment.findPrefixMatchOf(text)
    while (next.isDefined) {
      text = text.substring(next.get.end)
      next = LeadingComment.findPrefixMatchOf(text)
    }
    text.trim
  }
}
