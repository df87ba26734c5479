package eqdelete.liveindex

import eqdelete.state.HeldStores

/** The live-row index's stores ([[LiveKeyStore]]) this JVM holds. */
object LiveKeyStores extends HeldStores[LiveKeyStore]("live-index", LiveKeyStore.open)

/** Kept row images' stores ([[RowImageStore]]) this JVM holds. */
object RowImageStores extends HeldStores[RowImageStore]("row-images", RowImageStore.open)
