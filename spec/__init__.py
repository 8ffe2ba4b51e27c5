"""The formal specification, as data plus the code that loads it.

rules       the rule catalogue (rules.toml): a stable ID and one normative sentence per rule
schema      Kafka's JSON message schemas (schemas/*.json), parsed with lark (schema.lark)
errors      the error-code table (errors.toml): KIP name, Kafka name, wire code
trace       the conformance trace format (trace-format.md, trace.schema.json): types and codec

The bottom of the pipeline: rules, schema and errors import nothing of kraftcheck. `trace`
alone is written in the model's terms (its events, messages and configurations), so it may
import model/; model/ never imports it. Everything downstream reads spec/.
"""
