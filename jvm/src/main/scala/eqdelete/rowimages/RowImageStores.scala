package eqdelete.rowimages

import eqdelete.state.HeldStores

/** Kept row images' stores ([[RowImageStore]]) this JVM holds. */
object RowImageStores extends HeldStores[RowImageStore]("row-images", RowImageStore.open)
