package org.apache.spark.sql.eqdelete.compat

import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.execution.datasources.DataSourceStrategy
import org.apache.spark.sql.connector.expressions.filter.Predicate
import org.apache.spark.sql.sources.Filter

/** Spark's own Catalyst-to-data-source filter translation, which is `protected[sql]`. */
object FilterTranslation {
  def toSourceFilter(predicate: Expression): Option[Filter] =
    DataSourceStrategy.translateFilter(predicate, supportNestedPredicatePushdown = true)

  /** The same filter as a V2 predicate (`toV2` is `private[sql]`). */
  def toV2(filter: Filter): Predicate = filter.toV2
}
