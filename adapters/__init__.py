"""Adapters: the node-level contract an implementation is driven through, and its implementations.

contract            the Adapter protocol (start, step, observe, close) and AdapterError
node_models         the KRaft node and the ISR replica behind one interface
model_adapter       `reference`: the model itself
mutants             `mutant:NAME`: the model with one seeded bug each
subprocess_adapter  `subprocess:COMMAND`: any language, JSON lines over stdin/stdout
example_node        an implementation of that protocol, run as a separate process
kafka_build         `kafka:VERSION`: Apache Kafka's KafkaRaftClient, the Java program in kafka/ built with Maven on first use
registry            adapter names to factories
process_lifetime    no process outlives kraftcheck: children that die with it, process trees killed whole

Imports spec/ (the trace types) and model/ only; called by conformance.certify and conformance.corpus.
"""
