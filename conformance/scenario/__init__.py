"""Scenarios: conformance traces written for people (spec/scenario-format.md, spec/scenario.lark).

A scenario is a node-level trace in a readable language: messages by name with only the fields
that differ from their defaults, error codes by name, logs as epoch ranges. It parses and
compiles to a spec.trace.Trace, and any trace prints as one (`traces show --as scenario`);
`scenario run` replays scenarios through an adapter with conformance.certify's replay, and
`scenario record` fills in their expectations from the reference model. Imports the stages
before it; only conformance.commands imports it.
"""
