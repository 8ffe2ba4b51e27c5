"""Exploration: breadth-first search of a system's states within bounds, checking safety properties.

engine        the System protocol, results, and the in-process level-synchronous engine
sharded       the same search on several worker processes, with identical results
spark_engine  the same search on Spark, with identical results
packed        states packed side by side: what the engines move between processes and to disk
interned      values stored once with fingerprints stable across processes: a cluster state's parts
kraft_system  the KRaft cluster (model.cluster) as an explorable system: interned, reduced, symmetric
isr_system    the ISR partition (model.isr) as an explorable system
configs       named configurations (configs.toml) and their overrides
check         a `check` run: the system for a configuration, its summary, its counterexamples
simulate      seeded random runs, every property checked after every step
swarm         every seed run (in-process or on Spark), each violated property with its shortest run

Imports spec/, model/, adapters.process_lifetime (workers die with the coordinator),
conformance.spark (the Spark session) and conformance.diagrams (`check` draws its counterexamples).
A new engine goes beside `engine` and `sharded`.
"""
