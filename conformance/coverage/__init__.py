"""Rule coverage, measured rather than declared: which rule IDs the rule tests' model calls cite.

`recorder` is a pytest plugin that wraps the model's citing entry points; `measure` runs
tests/rules with it. Imports spec/ and model/ only; called by `kraftcheck rules --coverage`.
"""
