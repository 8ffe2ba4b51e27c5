"""Message-sequence (Lamport) diagrams as self-contained SVG, drawn by kraftcheck itself.

sequence  the diagram as data (lifelines, rows, arrows, marks, notes)
layout    its SVG layout: render
svg       SVG as text: escaping, elements in one fixed form (same input, same bytes)
labels    short words for messages and records
flights   messages through a cluster run, from the step that sent them to the one that took them
kraft     a KRaft cluster run (a `check` counterexample) as a diagram
isr       an ISR partition run (an ISR counterexample) as a diagram
traces    a node-level trace as a diagram; a divergence, expected and actual side by side

Imports spec/, model/, adapters/ and conformance.text; explore (`check`'s counterexamples),
certify (the HTML report's divergences) and commands (`traces show --as svg`) call it.
"""
