package eqdelete.liveindex

import eqdelete.state.HeldStores

/** The live-row index's stores ([[LiveKeyStore]]) this JVM holds. */
object LiveKeyStores extends HeldStores[LiveKeyStore]("live-index", LiveKeyStore.open)
