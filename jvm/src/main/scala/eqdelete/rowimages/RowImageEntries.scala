package eqdelete.rowimages

import eqdelete.deleteindex.KeyBytes

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection}
import org.apache.spark.sql.types.StructType

/** A table's rows as what row images store of them. */
object RowImageEntries {
  /**
   * `rows` (the images' columns, `rowType`, then `_file` and `_pos`) as `make(key, file, position,
   * row bytes)`: the key the columns `keyOrdinals` packed, the file by its id in `fileIds`.
   */
  def encoded(rows: DataFrame, rowType: StructType, keyOrdinals: Array[Int], fileIds: Map[String, Int])(
      make: (Array[Byte], Int, Long, Array[Byte]) => (Array[Byte], Array[Byte])): RDD[(Array[Byte], Array[Byte])] = {
    require(StructType(rows.schema.fields.dropRight(2)) == rowType, s"rows in ${rows.schema.simpleString} for row images of ${rowType.simpleString}")
    val ids = rows.sparkSession.sparkContext.broadcast(fileIds)
    val (fields, keyTypes) = (rowType.fields, keyOrdinals.map(rowType(_).dataType))
    rows.queryExecution.toRdd.mapPartitions { it =>
      val project = UnsafeProjection.create(fields.toSeq.zipWithIndex.map { case (f, i) => BoundReference(i, f.dataType, f.nullable) })
      val n = fields.length
      it.map { row =>
        val file = row.getUTF8String(n).toString
        make(KeyBytes.packed(row, keyOrdinals, keyTypes), ids.value.getOrElse(file,
          throw new IllegalStateException(s"eqdelete: data file $file is not one the row images read")), row.getLong(n + 1),
          project(row).copy().getBytes)
      }
    }
  }
}
