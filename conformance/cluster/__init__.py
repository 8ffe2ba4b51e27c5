"""A real Kafka controller quorum under faults (`kraftcheck cluster`): Kafka's own server from
Maven Central, N controllers as JVMs on 127.0.0.1 (quorum.py), each in a network namespace of its
own linked to the others through relays that can be cut (network.py, relays.py), a workload
writing through Kafka's admin client (workload.py), a seeded nemesis that kills, pauses,
partitions and wipes them while each node's quorum-state file is sampled (run.py), every node's
metadata log read at the end (metadata_log.py), and the history checked against the model's
safety properties, a bounded check-quorum and a liveness bound (history.py)."""
