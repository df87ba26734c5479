package eqdelete.commit

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import eqdelete.testing.{IcebergTables, TestSpark}

import org.apache.iceberg.{BaseTable, DataFiles, FileContent, FileFormat, FileMetadata, HasTableOperations, Table, TableMetadata, TableOperations}
import org.apache.iceberg.expressions.Expressions
import org.apache.iceberg.exceptions.{CommitFailedException, CommitStateUnknownException, ValidationException}
import org.apache.iceberg.io.{FileIO, LocationProvider}
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.scalatest.funsuite.AnyFunSuite

/**
 * Commits whose answer lies: each test puts a table operations that misreport commits between
 * Iceberg and the catalog, as a lost answer, a 409 to a commit sent again, or a catalog that
 * cannot be read do, and checks what the commit reports and that every file the table's current
 * snapshot names still exists. The first test shows what Iceberg alone does with the same fault.
 */
class GuardedCommitSuite extends AnyFunSuite {

  private lazy val spark = TestSpark.session
  private lazy val tables = new IcebergTables(spark, "guarded")
  private val noWaits = new SettleCommit(Nil, _ => ())

  /** What a fake catalog connection does with the n-th commit attempt (1-based) and with reads. */
  private final class LyingOperations(delegate: TableOperations, onCommit: (Int, () => Unit) => Unit,
      readable: () => Boolean = () => true) extends TableOperations {
    val manifestLists = mutable.Buffer.empty[String]
    private var attempts = 0
    override def current(): TableMetadata = delegate.current()
    override def refresh(): TableMetadata =
      if (readable()) delegate.refresh() else throw new RuntimeException(new java.net.SocketTimeoutException("read timed out"))
    override def commit(base: TableMetadata, metadata: TableMetadata): Unit = {
      attempts += 1
      Option(metadata.currentSnapshot()).foreach(s => manifestLists += s.manifestListLocation())
      onCommit(attempts, () => delegate.commit(base, metadata))
    }
    override def io(): FileIO = delegate.io()
    override def metadataFileLocation(fileName: String): String = delegate.metadataFileLocation(fileName)
    override def locationProvider(): LocationProvider = delegate.locationProvider()
    override def newSnapshotId(): Long = delegate.newSnapshotId()
  }

  /** A table with one equality delete file, and that file. */
  private def tableWithAnEqualityDelete(): (String, Table) = {
    val name = tables.create()
    tables.insert(name, (1L to 6L).map(k => (k, s"v$k", 0)))
    tables.deleteKeys(name, Seq((2L, 0)))
    (name, IcebergSparkTables.load(spark, name))
  }

  private def lying(table: Table, ops: LyingOperations): Table = new BaseTable(ops, table.name())

  private def operations(table: Table) = table.asInstanceOf[HasTableOperations].operations()

  /**
   * A commit shaped as resolve's: a position delete file added (its content is not read here),
   * the equality delete file removed, validated from the starting snapshot against new delete
   * files, with the marker. Its own landed attempt fails that validation when Iceberg retries it.
   */
  private def removeEqualityDeletes(marker: (String, String))(table: Table): Unit = {
    val tasks = table.newScan().planFiles().asScala.toSeq
    val equalityDeletes = tasks.flatMap(_.deletes().asScala).filter(_.content() == FileContent.EQUALITY_DELETES)
    val location = table.locationProvider().newDataLocation(s"pos-${java.util.UUID.randomUUID()}.parquet")
    val out = table.io().newOutputFile(location).create()
    try out.write(Array[Byte](1, 2, 3)) finally out.close()
    val positionDeletes = FileMetadata.deleteFileBuilder(table.spec()).ofPositionDeletes().withPath(location)
      .withFormat(FileFormat.PARQUET).withFileSizeInBytes(3).withRecordCount(1).build()
    val delta = table.newRowDelta().addDeletes(positionDeletes)
    equalityDeletes.foreach(delta.removeDeletes)
    delta.set(marker._1, marker._2)
    delta.validateFromSnapshot(table.currentSnapshot().snapshotId())
      .conflictDetectionFilter(Expressions.alwaysTrue())
      .validateNoConflictingDeleteFiles()
      .validateDataFilesExist(tasks.map(t => t.file().location(): CharSequence).asJava)
      .commit()
  }

  /** Every file the current snapshot names that is missing: its manifest list, manifests, data and delete files. */
  private def missingFiles(name: String): Seq[String] = {
    val table = IcebergSparkTables.load(spark, name)
    table.refresh()
    val io = table.io()
    def missing(paths: Seq[String]) = paths.filterNot(p => io.newInputFile(p).exists())
    val snapshot = table.currentSnapshot()
    val list = missing(Seq(snapshot.manifestListLocation()))
    lazy val manifests = missing(snapshot.allManifests(io).asScala.map(_.path()).toSeq)
    if (list.nonEmpty) list
    else if (manifests.nonEmpty) manifests
    else missing(spark.sql(s"SELECT file_path FROM $name.all_files").collect().map(_.getString(0)).toSeq)
  }

  private def marker() = "eqdelete.test-id" -> java.util.UUID.randomUUID().toString

  private val landThen409: (Int, () => Unit) => Unit = (attempt, send) => {
    if (attempt == 1) {
      send()
      throw new CommitFailedException("Requirement failed: branch main has changed (injected after the commit landed)")
    }
    send()
  }

  test("without the guard, Iceberg undoes a landed commit answered 409: the table names missing files") {
    val (name, table) = tableWithAnEqualityDelete()
    val ops = new LyingOperations(operations(table), landThen409)
    intercept[ValidationException](removeEqualityDeletes(marker())(lying(table, ops)))
    // If Iceberg ever settles this itself, the guard may be simplified: this test then fails.
    assert(missingFiles(name).nonEmpty)
  }

  /** An append of one (unreadable) data file, answered 409 after it landed and after a writer's commit on top. */
  private def appendAnsweredLate(guarded: Boolean): (Seq[Long], Long, Long) = {
    val (name, table) = tableWithAnEqualityDelete()
    var writers = 0L
    val ops = new LyingOperations(operations(table), (attempt, send) => {
      send()
      if (attempt == 1) {
        tables.insert(name, Seq((7L, "v7", 0)))
        writers = { val t = IcebergSparkTables.load(spark, name); t.refresh(); t.currentSnapshot().snapshotId() }
        throw new CommitFailedException("Requirement failed: branch main has changed (injected after the commit landed)")
      }
    })
    val location = table.locationProvider().newDataLocation(s"appended-${java.util.UUID.randomUUID()}.parquet")
    val file = DataFiles.builder(table.spec()).withPath(location).withFormat(FileFormat.PARQUET)
      .withFileSizeInBytes(3).withRecordCount(1).build()
    val mark = marker()
    def append(t: Table): Unit = t.newAppend().appendFile(file).set(mark._1, mark._2).commit()
    if (guarded) GuardedCommit.run(lying(table, ops), mark, noWaits)(append) else append(lying(table, ops))
    table.refresh()
    val appended = table.snapshots().asScala.find(_.summary().get(mark._1) == mark._2).map(_.snapshotId()).get
    (ancestors(table), writers, appended)
  }

  private def ancestors(table: Table): Seq[Long] =
    Iterator.iterate(Option(table.currentSnapshot()))(_.flatMap(s => Option(s.parentId()).map(id => table.snapshot(id.longValue()))))
      .takeWhile(_.isDefined).flatten.map(_.snapshotId()).toSeq

  test("without the guard, a landed append answered 409 sets the branch back over a writer's commit") {
    // Iceberg retries it, finds its own snapshot id in the table and takes the retry for a rollback
    // to it. If Iceberg ever keeps the writer's commit here, this test fails: say so in the docs.
    val (branch, writers, appended) = appendAnsweredLate(guarded = false)
    assert(branch.head == appended && !branch.contains(writers))
  }

  test("with the guard, the writer's commit stays in the branch") {
    val (branch, writers, appended) = appendAnsweredLate(guarded = true)
    assert(branch.head == writers && branch.contains(appended))
  }

  test("a landed commit answered 409 is committed, and Iceberg deletes nothing it references") {
    val (name, table) = tableWithAnEqualityDelete()
    val ops = new LyingOperations(operations(table), landThen409)
    val mark = marker()
    val outcome = GuardedCommit.run(lying(table, ops), mark, noWaits)(removeEqualityDeletes(mark))
    table.refresh()
    outcome match {
      case CommitOutcome.Committed(id, Some(why)) =>
        assert(id == table.currentSnapshot().snapshotId() && why.contains("CommitFailedException"))
      case other => fail(s"not committed: $other")
    }
    assert(missingFiles(name).isEmpty)
    assert(table.currentSnapshot().summary().get(mark._1) == mark._2)
  }

  test("a lost answer while a writer commits on top is still found") {
    val (name, table) = tableWithAnEqualityDelete()
    val ops = new LyingOperations(operations(table), (attempt, send) => {
      send()
      if (attempt == 1) {
        tables.insert(name, Seq((7L, "v7", 0)))  // the writer's commit, before the client hears back
        throw new RuntimeException("Error occurred while processing POST request", new java.io.IOException("no response"))
      }
    })
    val mark = marker()
    val outcome = GuardedCommit.run(lying(table, ops), mark, noWaits)(removeEqualityDeletes(mark))
    assert(outcome.isInstanceOf[CommitOutcome.Committed], outcome)
    assert(missingFiles(name).isEmpty)
  }

  test("a 409 that left the head where it was is a refusal: Iceberg retries and the retry lands") {
    val (name, table) = tableWithAnEqualityDelete()
    val ops = new LyingOperations(operations(table), (attempt, send) =>
      if (attempt == 1) throw new CommitFailedException("injected 409 before the catalog") else send())
    val mark = marker()
    val outcome = GuardedCommit.run(lying(table, ops), mark, noWaits)(removeEqualityDeletes(mark))
    assert(outcome.isInstanceOf[CommitOutcome.Committed] && ops.manifestLists.size == 2, outcome)
    assert(missingFiles(name).isEmpty)
  }

  test("a refused connection never reached the catalog: Iceberg retries") {
    val (name, table) = tableWithAnEqualityDelete()
    val ops = new LyingOperations(operations(table), (attempt, send) =>
      if (attempt == 1) throw new RuntimeException(new java.net.ConnectException("Connection refused")) else send())
    val mark = marker()
    assert(GuardedCommit.run(lying(table, ops), mark, noWaits)(removeEqualityDeletes(mark)).isInstanceOf[CommitOutcome.Committed])
    assert(missingFiles(name).isEmpty)
  }

  test("refused every time: not committed, and nothing can land later") {
    val (name, table) = tableWithAnEqualityDelete()
    val before = { table.refresh(); table.currentSnapshot().snapshotId() }
    val ops = new LyingOperations(operations(table), (_, _) => throw new CommitFailedException("injected 409"))
    val mark = marker()
    val outcome = GuardedCommit.run(lying(table, ops), mark, noWaits)(removeEqualityDeletes(mark))
    assert(outcome.isInstanceOf[CommitOutcome.NotCommitted], outcome)
    table.refresh()
    assert(table.currentSnapshot().snapshotId() == before && missingFiles(name).isEmpty)
  }

  test("no answer and the head where it was: unknown, and the attempt's files are kept") {
    val (name, table) = tableWithAnEqualityDelete()
    val ops = new LyingOperations(operations(table), (_, _) => throw new CommitStateUnknownException(
      new RuntimeException("Service failed: 504: gateway timeout")))
    val mark = marker()
    val outcome = GuardedCommit.run(lying(table, ops), mark, noWaits)(removeEqualityDeletes(mark))
    assert(outcome.isInstanceOf[CommitOutcome.Unknown], outcome)
    // It may still land: its manifest list must survive.
    assert(ops.manifestLists.size == 1 && table.io().newInputFile(ops.manifestLists.head).exists())
    assert(missingFiles(name).isEmpty)
  }

  test("a landed commit whose table cannot be read afterwards is unknown, and keeps its files") {
    val (name, table) = tableWithAnEqualityDelete()
    var readable = true
    val ops = new LyingOperations(operations(table), (_, send) => {
      send()
      readable = false
      throw new RuntimeException("Error occurred while processing POST request")
    }, () => readable)
    val mark = marker()
    val outcome = GuardedCommit.run(lying(table, ops), mark, noWaits)(removeEqualityDeletes(mark))
    assert(outcome.isInstanceOf[CommitOutcome.Unknown], outcome)
    assert(missingFiles(name).isEmpty)
  }

  test("an operation with nothing to commit sends nothing") {
    val (_, table) = tableWithAnEqualityDelete()
    val outcome = GuardedCommit.run(table, marker(), noWaits)(_ => ())
    assert(outcome == CommitOutcome.NothingToCommit)
  }
}
