"""A real Kafka controller quorum under faults (`kraftcheck cluster`): Kafka's own server from
Maven Central, N controllers as JVMs on 127.0.0.1 (quorum.py), linked through relays that can be
cut (relays.py), a seeded nemesis that kills, pauses and partitions them while each node's
quorum-state file is sampled (run.py), and the history checked against the model's safety
properties, a bounded check-quorum and a liveness bound (history.py)."""
