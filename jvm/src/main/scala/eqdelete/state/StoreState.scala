package eqdelete.state

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import com.fasterxml.jackson.databind.node.ObjectNode

/** One version of a store: its number (versions of an index's stores grow together) and an id no other version has. */
final case class StoreVersion(number: Long, id: String)

/**
 * A file of kept state: where it is (relative to its index's directory), what RocksDB calls it
 * locally, its bytes, and the CRC32C of its bytes when it was copied there (a sorted file linked
 * has none: RocksDB checks its blocks' own checksums when it is loaded).
 */
final case class StoredFile(rel: String, local: String, size: Long, crc: Option[Long] = None)

/** A store's whole content at a version: its RocksDB files (a RocksDB checkpoint) and its own properties. */
final case class StoreSnapshot(version: StoreVersion, files: Seq[StoredFile], properties: Map[String, String])

/** What one step changed in a store (its [[DeltaLog]]), or nothing (no file). */
final case class StoreDelta(version: StoreVersion, file: Option[StoredFile])

/**
 * How to load one store at its version: the last snapshot (none: it started empty) and the
 * deltas after it, as Spark's RocksDB state store loads a version from `{version}.zip` and the
 * `{version}.changelog` files after it.
 */
final case class StoreState(snapshot: Option[StoreSnapshot], deltas: Seq[StoreDelta]) {
  def version: StoreVersion = deltas.lastOption.map(_.version).orElse(snapshot.map(_.version)).getOrElse(StoreState.EmptyVersion)

  /** The ids of the versions it passes through from its snapshot: a store at any of them reaches it by these deltas. */
  def versionIds: Seq[String] = snapshot.map(_.version.id).toSeq ++ deltas.map(_.version.id)

  /** The files it needs, relative to the index's directory. */
  def files: Seq[StoredFile] = snapshot.toSeq.flatMap(_.files) ++ deltas.flatMap(_.file)

  def after(delta: StoreDelta): StoreState = copy(deltas = deltas :+ delta)
}

object StoreState {
  val EmptyVersion: StoreVersion = StoreVersion(0, "empty")
  val Empty: StoreState = StoreState(None, Nil)

  private val mapper = new ObjectMapper()

  def toJson(s: StoreState): JsonNode = {
    val node = mapper.createObjectNode()
    s.snapshot.foreach { snap =>
      val n = node.putObject("snapshot")
      version(n, snap.version)
      val files = n.putArray("files")
      snap.files.foreach(f => file(files.addObject(), f))
      val props = n.putObject("properties")
      snap.properties.foreach { case (k, v) => props.put(k, v) }
    }
    val deltas = node.putArray("deltas")
    s.deltas.foreach { d =>
      val n = deltas.addObject()
      version(n, d.version)
      d.file.foreach(f => file(n.putObject("file"), f))
    }
    node
  }

  def fromJson(node: JsonNode): StoreState = StoreState(
    Option(node.get("snapshot")).map { n =>
      StoreSnapshot(version(n), n.get("files").elements().asScala.map(file).toVector,
        n.get("properties").fieldNames().asScala.map(k => k -> n.get("properties").get(k).asText()).toMap)
    },
    node.get("deltas").elements().asScala.map(n => StoreDelta(version(n), Option(n.get("file")).map(file))).toVector)

  private def version(n: ObjectNode, v: StoreVersion): Unit = { n.put("number", v.number); n.put("id", v.id) }
  private def version(n: JsonNode): StoreVersion = StoreVersion(n.get("number").asLong(), n.get("id").asText())
  private def file(n: ObjectNode, f: StoredFile): Unit = {
    n.put("rel", f.rel); n.put("local", f.local); n.put("size", f.size); f.crc.foreach(n.put("crc", _))
  }
  private def file(n: JsonNode): StoredFile = StoredFile(n.get("rel").asText(), n.get("local").asText(), n.get("size").asLong(),
    Option(n.get("crc")).map(_.asLong()))
}
