package eqdelete.maintain

import scala.util.Try

import org.apache.spark.sql.SparkSession

/**
 * The tables a `--tables` pattern names, listed through the session's catalogs: a table
 * (`lake.db.orders`), a namespace (`lake.db`, every table in it and in the namespaces under it),
 * a catalog (`lake`), or a glob on any part (`lake.db.orders_*`, `lake.*.orders`), where `*`
 * and `?` stay within one part. Several patterns are separated by commas. A pattern without a
 * catalog is read in the session's current catalog. Listed again at each call, so tables
 * created or dropped since are picked up or let go.
 */
object TablePattern {

  /** The matching tables' names, `catalog.namespace.table`, sorted, each once. */
  def tables(session: SparkSession, patterns: String): Seq[String] = {
    val each = patterns.split(",").map(_.trim).filter(_.nonEmpty).toSeq
    if (each.isEmpty) throw new IllegalArgumentException(s"eqdelete: no table pattern in '$patterns'")
    each.flatMap(pattern => matching(session, pattern)).distinct.sorted
  }

  private def matching(session: SparkSession, pattern: String): Seq[String] = {
    val parts = split(pattern)
    if (parts.isEmpty || parts.exists(_.isEmpty)) {
      throw new IllegalArgumentException(s"eqdelete: '$pattern' is not a table pattern (catalog.namespace.table, any part a glob)")
    }
    val (catalog, rest) =
      if (isCatalog(session, parts.head)) (parts.head, parts.tail) else (session.catalog.currentCatalog(), parts)
    val globbed = rest.exists(isGlob)
    val named = catalog +: rest
    if (rest.size >= 2 && !globbed && exists(session, named)) return Seq(quote(named))
    val found = listUnder(session, catalog, if (globbed) rest.takeWhile(!isGlob(_)) else rest)
    val chosen = if (globbed) found.filter(name => name.size == rest.size && name.zip(rest).forall { case (n, p) => glob(p).pattern.matcher(n).matches() }) else found
    // A name that is neither a table nor a namespace with tables: kept, so its status says what is wrong.
    if (chosen.isEmpty && !globbed && rest.nonEmpty) Seq(quote(named)) else chosen.map(name => quote(catalog +: name))
  }

  /** Every table in namespace `namespace` of `catalog` and in the namespaces under it. */
  private def listUnder(session: SparkSession, catalog: String, namespace: Seq[String]): Seq[Seq[String]] = {
    val here = quote(catalog +: namespace)
    val tables =
      if (namespace.isEmpty) Nil
      else Try(session.sql(s"SHOW TABLES IN $here").collect().toSeq.filterNot(_.getAs[Boolean]("isTemporary"))
        .map(r => namespace :+ r.getAs[String]("tableName"))).getOrElse(Nil)
    val children = Try(session.sql(s"SHOW NAMESPACES IN $here").collect().toSeq.map(r => split(r.getString(0))))
      .getOrElse(Nil).map(child => if (child.size > namespace.size && child.startsWith(namespace)) child else namespace ++ child)
      .filter(_.size > namespace.size).distinct
    tables ++ children.flatMap(child => listUnder(session, catalog, child))
  }

  private def isCatalog(session: SparkSession, name: String): Boolean =
    name.equalsIgnoreCase("spark_catalog") || session.conf.getOption(s"spark.sql.catalog.$name").isDefined

  private def exists(session: SparkSession, name: Seq[String]): Boolean = Try(session.catalog.tableExists(quote(name))).getOrElse(false)

  private def isGlob(part: String): Boolean = part.exists(c => c == '*' || c == '?')

  private def glob(part: String): scala.util.matching.Regex =
    part.map {
      case '*' => ".*"
      case '?' => "."
      case c => java.util.regex.Pattern.quote(c.toString)
    }.mkString("(?i)", "", "").r

  /** A dotted name's parts; a part in backticks may hold dots. */
  private[maintain] def split(name: String): Seq[String] = {
    val parts = Vector.newBuilder[String]
    val part = new StringBuilder
    var quoted = false
    var i = 0
    while (i < name.length) {
      val c = name.charAt(i)
      if (c == '`' && quoted && i + 1 < name.length && name.charAt(i + 1) == '`') { part += '`'; i += 1 }
      else if (c == '`') quoted = !quoted
      else if (c == '.' && !quoted) { parts += part.toString.trim; part.clear() }
      else part += c
      i += 1
    }
    parts += part.toString.trim
    parts.result()
  }

  /** The name as SQL reads it: a part quoted only when it must be. */
  private[maintain] def quote(name: Seq[String]): String =
    name.map(p => if (p.matches("[A-Za-z_][A-Za-z0-9_]*")) p else s"`${p.replace("`", "``")}`").mkString(".")
}
