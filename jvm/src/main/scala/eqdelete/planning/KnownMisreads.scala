package eqdelete.planning

import scala.jdk.CollectionConverters._

import org.apache.iceberg.{DeleteFile, Schema}
import org.apache.iceberg.types.{Type, TypeUtil}

/**
 * Why Iceberg's own reader reads a table's equality deletes wrongly, from metadata only: the
 * cases of docs/known-iceberg-issues.md that a delete file's key shows by itself (a `uuid` key, a
 * key nested in a struct). The rule's decisions say it per scan ([[ScanDeletes.nativeIsWrong]]);
 * `status` says it per table, so a user knows which tables every other reader gets wrong until
 * they are resolved.
 */
object KnownMisreads {

  /** Why Iceberg leaves deletes on the `uuid` key `keys` out of the tasks they apply to. */
  def uuidKey(keys: String): String =
    s"the key $keys has Iceberg's uuid type, whose bounds Parquet writes in unsigned byte order and Iceberg compares " +
      "signed, so its pairing of delete and data files by bounds leaves deletes out (Iceberg #14216)"

  /** Why Iceberg's reader mishandles deletes on the nested key `keys`. */
  def nestedKey(keys: String): String =
    s"Iceberg's own reader mishandles equality deletes on nested fields such as $keys"

  /** The ids of `schema`'s `uuid` columns, at any depth. */
  def uuidFields(schema: Schema): Set[Int] = TypeUtil.indexById(schema.asStruct()).asScala.collect {
    case (id, f) if f.`type`().typeId() == Type.TypeID.UUID => id.intValue
  }.toSet

  /** Why Iceberg's reader reads the live equality delete files `deletes` of a table of `schema` wrongly, if it does. */
  def of(schema: Schema, deletes: Seq[DeleteFile]): Option[String] = {
    val uuids = uuidFields(schema)
    val parents = TypeUtil.indexParents(schema.asStruct())
    def keysOf(delete: DeleteFile): Seq[Int] = delete.equalityFieldIds().asScala.map(_.intValue).toSeq
    def describe(ids: Seq[Int]): String = ids.map(id => Option(schema.findColumnName(id)).getOrElse(s"field $id"))
      .mkString("(", ", ", ")")
    deletes.map(keysOf).distinct.collectFirst { case ids if ids.exists(uuids) => uuidKey(describe(ids)) }
      .orElse(deletes.map(keysOf).distinct.collectFirst { case ids if ids.exists(parents.containsKey(_)) => nestedKey(describe(ids)) })
  }
}
