package eqdelete.sql

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.{FunctionIdentifier, TableIdentifier}
import org.apache.spark.sql.catalyst.analysis.{UnresolvedAlias, UnresolvedFunction}
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.parser.ParserInterface
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, OneRowRelation, Project}
import org.apache.spark.sql.eqdelete.compat.SortOrderParsing
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * Spark 3.5's parser with one statement more: `CALL <catalog>.system.<procedure>(<arguments>)`
 * where `<catalog>` is registered as eqdelete's `EqDeleteProcedureCatalog`. Spark 3.5 has no
 * `CALL`, and Iceberg's SQL extensions pass on every `CALL` that does not name one of Iceberg's
 * own procedures, so this parser takes those statements and hands everything else, unchanged,
 * to the parser it wraps (Spark's, or Iceberg's when its extensions are loaded). The arguments
 * are parsed by that parser, as a function call's: positional, or named with `=>`.
 *
 * It passes sort orders on to the parser it wraps, as Iceberg's extensions need ([[SortOrderParsing]]).
 */
private[sql] final class ProcedureCallParser(session: SparkSession, delegate: ParserInterface)
  extends SortOrderParsing(delegate) {
  override def parsePlan(sqlText: String): LogicalPlan = procedureCall(sqlText).getOrElse(delegate.parsePlan(sqlText))

  private def procedureCall(sqlText: String): Option[LogicalPlan] =
    ProcedureCallParser.Call.findPrefixMatchOf(ProcedureCallParser.withoutLeadingComments(sqlText)).flatMap { m =>
      val path = scala.util.Try(delegate.parseMultipartIdentifier(m.group(1))).getOrElse(Nil)
      path match {
        case Seq(catalog, namespace @ _*) if path.size > 1 && isProcedureCatalog(catalog) =>
          val procedure = (if (namespace.init == EqDeleteProcedure.namespace) EqDeleteProcedure.named(namespace.last) else None)
            .getOrElse(throw EqDeleteProcedure.unknown(catalog, namespace))
          // The rest, from the opening parenthesis on, read by Spark's parser as a function call's
          // arguments, in a statement of its own so a `;` and comments may follow.
          delegate.parsePlan(s"SELECT ${procedure.name}(${m.after}") match {
            case Project(Seq(UnresolvedAlias(f: UnresolvedFunction, _)), _: OneRowRelation)
                if !f.isDistinct && f.filter.isEmpty && !f.ignoreNulls =>
              Some(EqDeleteCallCommand(procedure, f.arguments))
            case _ => throw new IllegalArgumentException(
              s"eqdelete: CALL ${path.mkString(".")} takes a plain argument list: (name => value, ...) or (value, ...)")
          }
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
  /** `CALL name(`: the name; the arguments follow. */
  private val Call = """(?is)CALL\s+([^(]+?)\s*\(""".r

  /** `sqlText` from its first token on: leading blanks, `--` comments and (nested) bracketed comments skipped. */
  def withoutLeadingComments(sqlText: String): String = {
    var i = 0
    var skipped = true
    while (skipped) {
      while (i < sqlText.length && sqlText(i).isWhitespace) i += 1
      if (sqlText.startsWith("--", i)) {
        val end = sqlText.indexOf('\n', i)
        i = if (end < 0) sqlText.length else end + 1
      } else if (sqlText.startsWith("/*", i)) {
        var depth = 1
        i += 2
        while (depth > 0 && i < sqlText.length) {
          if (sqlText.startsWith("/*", i)) { depth += 1; i += 2 }
          else if (sqlText.startsWith("*/", i)) { depth -= 1; i += 2 }
          else i += 1
        }
      } else skipped = false
    }
    sqlText.substring(i)
  }
}
