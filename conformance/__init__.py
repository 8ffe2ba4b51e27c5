"""The pipeline after the model, one sub-package per stage, data flowing one way:

explore/   exploration: the engine interface, the in-process and sharded engines, the
           explorable KRaft and ISR systems, named configurations, `check`, random simulation
corpus/    the conformance corpus: coverage cells, the reference's traces, searches and walks
           per system, generation with its manifest, counterexamples as traces
certify/   replay through an adapter, verdicts per rule, shortening, mutation score, the
           report formats (reports/), the pytest plugin
scenario/  scenarios, traces written for people: the language's parser and printer, runs
           through an adapter, expectations recorded from the model, quorum views
coverage/  rule coverage measured from the rule tests
diagrams/  message-sequence diagrams as SVG: counterexamples, traces, divergences
commands/  the body of each `kraftcheck` command
cli.py     the argument parser
text.py    actions, messages and changes as text for people; outside text made safe to show
outputs.py where kraftcheck writes: checked up front, never over what it does not own,
           report sets published whole

A stage imports spec/, model/, adapters/ and the stages before it (diagrams < explore <
corpus < certify < scenario), never one after it; tests/test_layout.py enforces it.
"""
