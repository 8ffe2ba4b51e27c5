"""The executable reference model of KIP-595 (a KRaft node and cluster) and, in model/isr/,
of KIP-101 ISR replication: pure, deterministic state machines with no I/O.

A node is `node.step(config, state, event) -> Transition(state, outputs, rules)`, one
handler module per RPC (vote, begin_epoch, end_epoch, fetch, describe, offsets), every
branch citing its rule IDs; `cluster` puts nodes on a bag network with faults; `properties`
holds the safety properties. Imports spec/ (schemas, errors) only; used by every stage.
"""
