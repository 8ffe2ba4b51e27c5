"""Kafka's ISR replication of one partition (the design of kafka-replication-design-v3, with
KIP-101's leader epochs): a second explorable system beside the KRaft quorum.

state       the replica, controller and history states
events      what reaches a replica and the ISR write it asks for
config      the partition's settings and the environment's bounds
replica     one replica: step(config, state, event) -> Transition
controller  leader election from the ISR and the conditional ISR write
cluster     the replicas, the controller and the network together: enabled actions, apply
properties  the ISR-SAFE-* safety properties
"""
