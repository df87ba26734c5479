package org.apache.spark.sql.eqdelete

import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.execution.datasources.DataSourceStrategy
import org.apache.spark.sql.sources.Filter

/** Spark's own Catalyst-to-data-source filter translation, which is `protected[sql]`. */
object FilterTranslation {
  def toSourceFilter(predicate: Expression): Option[Filter] =
    DataSourceStrategy.translateFilter(predicate, supportNestedPredicatePushdown = true)
}
