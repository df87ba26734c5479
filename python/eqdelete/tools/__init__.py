"""eqdelete's tools, apart from the library: the command line (``python -m eqdelete``), the CDC
table generator, the benchmarks and sweeps, and the Flink writer the tests and benchmarks use.
They build on the library (``eqdelete``); the library never imports them."""
