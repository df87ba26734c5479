package org.apache.spark.sql.eqdelete.compat

import java.lang.reflect.{InvocationTargetException, Method}

import org.apache.iceberg.{FileFormat, Schema, Table}
import org.apache.iceberg.data.Record
import org.apache.iceberg.io.FileWriterFactory

/**
 * Iceberg's writer factory of generic `Record`s, `GenericFileWriterFactory`, built as its own
 * builder builds it. The class is public from Iceberg 1.11 and package-private in 1.10, with the
 * same builder in both, so the builder is reached reflectively: one jar serves every release.
 */
final class GenericWriterFactory private (builder: AnyRef) {
  private def set(name: String, parameter: Class[_], value: AnyRef): GenericWriterFactory = {
    GenericWriterFactory.call(GenericWriterFactory.method(name, parameter), builder, value)
    this
  }

  def dataFileFormat(format: FileFormat): GenericWriterFactory = set("dataFileFormat", classOf[FileFormat], format)
  def dataSchema(schema: Schema): GenericWriterFactory = set("dataSchema", classOf[Schema], schema)
  def deleteFileFormat(format: FileFormat): GenericWriterFactory = set("deleteFileFormat", classOf[FileFormat], format)
  def equalityFieldIds(ids: Array[Int]): GenericWriterFactory = set("equalityFieldIds", classOf[Array[Int]], ids)
  def equalityDeleteRowSchema(schema: Schema): GenericWriterFactory =
    set("equalityDeleteRowSchema", classOf[Schema], schema)

  def build(): FileWriterFactory[Record] =
    GenericWriterFactory.call(GenericWriterFactory.method("build"), builder).asInstanceOf[FileWriterFactory[Record]]
}

object GenericWriterFactory {
  private lazy val builderClass: Class[_] =
    Class.forName("org.apache.iceberg.data.GenericFileWriterFactory$Builder", true, classOf[Table].getClassLoader)

  /** A builder for `table`'s files, as `new GenericFileWriterFactory.Builder(table)`. */
  def builder(table: Table): GenericWriterFactory = {
    val constructor = builderClass.getDeclaredConstructor(classOf[Table])
    constructor.setAccessible(true)
    new GenericWriterFactory(unwrapped(constructor.newInstance(table).asInstanceOf[AnyRef]))
  }

  private def method(name: String, parameters: Class[_]*): Method = {
    val method = builderClass.getDeclaredMethod(name, parameters: _*)
    method.setAccessible(true)
    method
  }

  private def call(method: Method, target: AnyRef, arguments: AnyRef*): AnyRef = unwrapped(method.invoke(target, arguments: _*))

  private def unwrapped[T](value: => T): T =
    try value catch { case e: InvocationTargetException if e.getCause != null => throw e.getCause }
}
