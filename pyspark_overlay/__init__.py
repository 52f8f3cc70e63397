"""Spark finds the ``overlay`` data source here without ``spark.dataSource.register``.

pyspark (4.0 and later) looks, once per Spark application, through the top-level modules on
the Python path whose names start ``pyspark_``, and registers each one's ``DefaultSource``
(a ``DataSource`` subclass) under its ``name()`` (``pyspark.sql.worker.lookup_data_sources``).
Installing this project installs this package, so ``format("overlay")`` just works; the
data source itself is ``overlay.spark.source.OverlayDataSource``.
"""

from overlay.spark.source import OverlayDataSource as DefaultSource

__all__ = ["DefaultSource"]
