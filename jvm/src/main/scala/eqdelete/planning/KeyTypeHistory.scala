package eqdelete.planning

import scala.jdk.CollectionConverters._

import org.apache.iceberg.Table
import org.apache.iceberg.types.Type

/**
 * The types a key column has had in the table's schemas. Iceberg's reader keeps the equality
 * delete rows it read in an executor cache under the delete file's path (grouped by the table's
 * name), with the values of the type the key had then. After `int` became `bigint` or `float`
 * became `double`, a read served those rows probes `Long`s against `Integer`s (`Double`s against
 * `Float`s), matches none, and returns rows the deletes removed: measured on Iceberg 1.12 with
 * Spark 4.1, 7 of 8 and 5 of 8 tries (it depends on when Spark's cleaner frees the cache), never
 * for a widened decimal, whose values are `BigDecimal` either way (docs/known-iceberg-issues.md).
 */
object KeyTypeHistory {

  /**
   * For each of `fieldIds` whose values changed class over the table's schemas (the oldest
   * first), `name: before -> after`; empty when none did. From metadata only: the schemas are
   * the table's, not the delete files', so a key promoted before every delete was written
   * counts too (the rewrite then applies them, which is right either way).
   */
  def promotedKeys(table: Table, fieldIds: Seq[Int]): Seq[String] = {
    val schemas = table.schemas().asScala.toSeq.sortBy(_._1.intValue).map(_._2)
    fieldIds.flatMap { id =>
      val types = schemas.flatMap(s => Option(s.findType(id))).foldLeft(Vector.empty[Type]) { (seen, t) =>
        if (seen.lastOption.contains(t)) seen else seen :+ t
      }
      val classes = types.map(_.typeId())
      if (classes.distinct.size <= 1) None
      else Some(s"${Option(schemas.last.findColumnName(id)).getOrElse(s"field $id")}: ${types.mkString(" -> ")}")
    }
  }
}
