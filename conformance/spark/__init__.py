"""Running kraftcheck's jobs on Apache Spark: the session and a loopback standalone cluster.

session     a SparkSession for `--engine spark`: an existing one (spark-submit) or a new one whose
            JVM's console output goes to a log file, bound to loopback, shipping kraftcheck's code
standalone  a Spark standalone master and workers started from the pyspark installation

Imports model.config (its ConfigError), conformance.outputs (what makes a directory writable) and adapters.process_lifetime (no Spark process outlives kraftcheck); the Spark engines of explore, corpus and certify use it.
"""
