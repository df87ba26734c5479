package eqdelete.changes

import com.fasterxml.jackson.databind.ObjectMapper
import org.apache.spark.sql.execution.streaming.Offset

/**
 * How far a stream of changes has read, in the table's history: the snapshot it is at, how many of
 * that snapshot's files (ChangesStream units) it has read, and whether it has read them all.
 *
 * @param snapshotId the snapshot, or [[StreamPosition.NoSnapshot]] before the table's first
 * @param ordinal    its `_change_ordinal`: its place in the stream, from 0 at the stream's first snapshot
 * @param full       whether this is the stream's first snapshot read whole (every row an insert),
 *                   not its changes: how a stream starts when the history before it expired
 * @param consumed   how many of its units are read
 * @param done       whether all of them are: the next batch starts at its child
 */
final case class StreamPosition(snapshotId: Long, ordinal: Int, full: Boolean, consumed: Int, done: Boolean)

object StreamPosition {
  val NoSnapshot: Long = -1L

  /** Before the snapshot whose parent is `parent` (None: the table's first): nothing of it read. */
  def before(parent: Option[Long]): StreamPosition = StreamPosition(parent.getOrElse(NoSnapshot), -1, full = false, 0, done = true)
}

/** A stream's offset: where it is (its start is kept beside its checkpoint, ChangesStreamLog). */
final case class ChangesOffset(position: StreamPosition) extends Offset {
  override def json(): String = s"""{"version":1,${ChangesOffset.fields(position)}}"""
}

object ChangesOffset {
  private val mapper = new ObjectMapper()

  def fields(p: StreamPosition): String =
    s""""snapshot_id":${p.snapshotId},"ordinal":${p.ordinal},"full":${p.full},"consumed":${p.consumed},"done":${p.done}"""

  def fromJson(json: String): ChangesOffset = {
    val node = mapper.readTree(json)
    def field(name: String) = Option(node.get(name)).getOrElse(throw new IllegalArgumentException(
      s"eqdelete-changes: the offset $json has no $name: it is not an offset of this source"))
    val version = Option(node.get("version")).map(_.asInt()).getOrElse(0)
    if (version != 1) {
      throw new IllegalArgumentException(s"eqdelete-changes: the offset $json is of version $version; " +
        "this eqdelete reads version 1")
    }
    ChangesOffset(StreamPosition(field("snapshot_id").asLong(), field("ordinal").asInt(), field("full").asBoolean(),
      field("consumed").asInt(), field("done").asBoolean()))
  }
}
