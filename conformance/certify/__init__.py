"""Certification: replay the corpus through an adapter and judge, rule by rule.

replay         drive an adapter through one trace; the first divergence
comparison     a step's outputs against an allowed outcome's: the first differing part, in words and JSON
verdicts       the verdict per rule, the run's totals, the coverage matrix
shorten        a divergent trace cut to the steps that still make the adapter depart
certification  the whole run: replay every trace, shorten, write the reports
parallel       replay with several jobs, each a process making its own adapters
spark_replay   the same run on Spark: the corpus as tables, replay on the executors, totals by Spark SQL
mutation       the mutation score over the seeded-bug adapters
reports/       one module per report format (Markdown, JUnit XML, HTML, terminal) and their publishing
pytest_plugin  every trace a pytest test, for an implementer's CI

Imports spec/, model/, adapters/, conformance.diagrams, conformance.spark, conformance.explore and conformance.corpus.
"""
