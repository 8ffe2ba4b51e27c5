"""The conformance corpus: node-level traces chosen by coverage, made from exploration.

cells            coverage cells: what one node step exercised
reference        a node's inputs -> a trace whose every expectation is the reference model's
search           the coverage-guided search: the first place of every cell, in scan order
spark_search     the same search on Spark (traces generate --engine spark)
walks            seeded random walks
kraft, isr       per system: what the search needs (probes, places, paths), random walks
generate         the corpus of several configurations, writing it to disk
manifest         the corpus manifest: what it holds, the hashes that verify it
counterexamples  ISR counterexamples as one trace per replica

Imports spec/, model/, adapters/ (the node models) and conformance.explore. A new corpus
strategy is a module here, called from `generate`.
"""
