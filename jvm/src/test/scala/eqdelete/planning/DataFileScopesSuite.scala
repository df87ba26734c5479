package eqdelete.planning

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, ObjectInputStream, ObjectOutputStream}

import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/** What every read task deserializes: the data files' sequence numbers and scopes. */
class DataFileScopesSuite extends AnyFunSuite {

  private def path(i: Int) = f"file:/warehouse/db/table/data/region=${i % 8}/00000-$i%05d-6f1c2a3e-4b5d-4e6f-8a9b-0c1d2e3f4a5b-00001.parquet"

  private def roundTrip(scopes: DataFileScopes): (DataFileScopes, Int) = {
    val bytes = new ByteArrayOutputStream()
    val out = new ObjectOutputStream(bytes)
    out.writeObject(scopes)
    out.close()
    val read = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray)).readObject().asInstanceOf[DataFileScopes]
    (read, bytes.size())
  }

  test("shipped as its paths' bytes and two numbers each, it looks every file up after deserialization") {
    val entries = (0 until 1024).map(i => path(i) -> (i.toLong + 1, i % 8)).toMap
    val scopes = new DataFileScopes(entries)
    scopes.sequenceNumber(UTF8String.fromString(path(3))) // a map built on the driver is not shipped
    val (read, size) = roundTrip(scopes)
    val pathBytes = entries.keys.toSeq.map(_.length).sum
    assert(size < pathBytes + 1024 * 40, s"$size bytes for $pathBytes bytes of paths")
    assert(read == scopes && read.size == 1024 && read.newestSequenceNumber == 1024L)
    (0 until 1024 by 97).foreach { i =>
      assert(read.sequenceNumber(UTF8String.fromString(path(i))) == i + 1L)
      assert(read.scope(UTF8String.fromString(path(i))) == (i % 8).toLong)
    }
    val error = intercept[IllegalStateException](read.scope(UTF8String.fromString("file:/elsewhere.parquet")))
    assert(error.getMessage.contains("file:/elsewhere.parquet was not part of the delete planning"))
  }

  test("no data files") {
    val (read, _) = roundTrip(new DataFileScopes(Map.empty))
    assert(read.size == 0 && read.newestSequenceNumber == Long.MinValue)
  }
}
