package eqdelete.deleteindex.build

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, InputStream, ObjectInputStream, ObjectOutputStream, ObjectStreamClass}

import eqdelete.deleteindex.DeleteKeyIndex

import org.apache.spark.broadcast.Broadcast

/**
 * A broadcast index as a SQL value (bytes), so a scalar subquery can hand it to the filter:
 * the handle is a few hundred bytes; the index itself travels once per executor, as any
 * broadcast does.
 */
object BroadcastHandle {
  def write(broadcast: Broadcast[DeleteKeyIndex]): Array[Byte] = {
    val bytes = new ByteArrayOutputStream()
    val out = new ObjectOutputStream(bytes)
    try out.writeObject(broadcast) finally out.close()
    bytes.toByteArray
  }

  def read(handle: Array[Byte]): Broadcast[DeleteKeyIndex] = {
    val in = new ContextClassLoaderInput(new ByteArrayInputStream(handle))
    try in.readObject().asInstanceOf[Broadcast[DeleteKeyIndex]] finally in.close()
  }

  /** Resolves classes as Spark's tasks do, through the thread's context class loader (added jars). */
  private final class ContextClassLoaderInput(in: InputStream) extends ObjectInputStream(in) {
    override def resolveClass(desc: ObjectStreamClass): Class[_] = {
      val loader = Option(Thread.currentThread().getContextClassLoader).getOrElse(getClass.getClassLoader)
      try Class.forName(desc.getName, false, loader) catch { case _: ClassNotFoundException => super.resolveClass(desc) }
    }
  }
}
