package org.apache.spark.sql.eqdelete.compat

import org.apache.iceberg.spark.ExtendedParser
import org.apache.spark.sql.catalyst.parser.ParserInterface

/**
 * A parser wrapping `delegate` that is an Iceberg `ExtendedParser` too (an interface of
 * Iceberg's Spark module, not API), passing sort orders on to `delegate`: Iceberg 1.10 looks
 * for that interface on the session's outermost parser (a sort or z-order `rewrite_data_files`
 * needs it), later releases search the wrapped ones as well.
 */
abstract class SortOrderParsing(delegate: ParserInterface) extends ExtendedParser {
  override def parseSortOrder(orderText: String): java.util.List[ExtendedParser.RawOrderField] = delegate match {
    case iceberg: ExtendedParser => iceberg.parseSortOrder(orderText)
    case _ => throw new UnsupportedOperationException("Cannot parse order: parser is not an Iceberg ExtendedParser")
  }
}
