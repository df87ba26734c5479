package eqdelete.state

import java.io.{BufferedInputStream, BufferedOutputStream, DataInputStream, DataOutputStream, EOFException, InputStream, OutputStream}
import java.util.zip.{Deflater, DeflaterOutputStream, InflaterInputStream}

/**
 * What one step changed in a store, as the changelog file of a version (Spark's RocksDB state
 * store writes one per micro-batch, SPARK-43421): the puts and deletes in the order they were
 * made, and operations the store replays itself (a purge: one line here, a pass over the store
 * there). Compressed; ends with a mark, so a file cut short is refused, never half replayed.
 */
object DeltaLog {
  private val Put = 1
  private val Delete = 2
  private val Operation = 3
  private val End = 0xE0F

  final class Writer(out: OutputStream) {
    private val data = new DataOutputStream(new BufferedOutputStream(
      new DeflaterOutputStream(out, new Deflater(Deflater.BEST_SPEED), 1 << 16), 1 << 16))
    private var empty = true

    /** Whether nothing was recorded. */
    def isEmpty: Boolean = empty

    def put(key: Array[Byte], value: Array[Byte]): Unit = { data.writeByte(Put); bytes(key); bytes(value); empty = false }
    def delete(key: Array[Byte]): Unit = { data.writeByte(Delete); bytes(key); empty = false }
    def operation(code: Int, payload: Array[Byte]): Unit = { data.writeByte(Operation); data.writeInt(code); bytes(payload); empty = false }

    private def bytes(b: Array[Byte]): Unit = { data.writeInt(b.length); data.write(b) }

    def close(): Unit = { data.writeByte(0); data.writeInt(End); data.close() }
  }

  /** What a replay does with each record. */
  trait Replay {
    def put(key: Array[Byte], value: Array[Byte]): Unit
    def delete(key: Array[Byte]): Unit
    def operation(code: Int, payload: Array[Byte]): Unit
  }

  /** Replays the records of a delta, in order; `what` names it in errors. */
  def replay(in: InputStream, what: String, to: Replay): Unit = {
    val data = new DataInputStream(new BufferedInputStream(new InflaterInputStream(in), 1 << 16))
    def bytes(): Array[Byte] = { val b = new Array[Byte](data.readInt()); data.readFully(b); b }
    try {
      var more = true
      while (more) data.readByte() match {
        case Put => to.put(bytes(), bytes())
        case Delete => to.delete(bytes())
        case Operation => val code = data.readInt(); to.operation(code, bytes())
        case 0 if data.readInt() == End => more = false
        case other => throw new IllegalStateException(s"eqdelete: kept state delta $what is corrupt (record kind $other)")
      }
    } catch {
      case _: EOFException => throw new IllegalStateException(s"eqdelete: kept state delta $what is cut short")
    } finally data.close()
  }
}
