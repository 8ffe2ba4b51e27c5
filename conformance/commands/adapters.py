"""`kraftcheck adapters`: the adapter forms `certify --adapter` takes, and building those that need it (kafka)."""

import argparse
import shlex
import sys

from tabulate import tabulate

from adapters.kafka_build import DEFAULT_VERSION, TESTED_VERSIONS, adapter_command, build, build_dir, is_built
from adapters.registry import AdapterBuildError, AdapterOptionError


def list_adapters(args: argparse.Namespace) -> int:
    rows = [
        ("reference", "the reference model", "built in"),
        ("reference:OPTIONS", "the model reading the KIP another allowed way (`kraftcheck choices`)", "built in"),
        ("mutant:NAME", "the model with one seeded bug (`kraftcheck mutants`)", "built in"),
        ("subprocess:COMMAND", "any implementation speaking spec/subprocess-protocol.md", "built by its implementer"),
    ]
    for version in TESTED_VERSIONS:
        name = f"kafka:{version}" + (" (kafka)" if version == DEFAULT_VERSION else "")
        state = f"built: {build_dir(version)}" if is_built(version) else f"not built: `kraftcheck adapters build kafka --kafka-version {version}`"
        rows.append((name, f"Apache Kafka {version}'s KafkaRaftClient (a tested version)", state))
    rows.append(("kafka:VERSION", "Apache Kafka's KafkaRaftClient, any 3.3.x or later (untested but for the certified releases)", "built on first use"))
    rows.append(("kafka:VERSION,timeouts=kafka", "the same with Kafka's default timeouts instead of the adapter's short ones", "as kafka:VERSION"))
    rows.append(("kafka:VERSION,timeouts=long", "the same with a request timeout longer than every other timer", "as kafka:VERSION"))
    print(tabulate(rows, headers=("adapter", "what it is", "state"), tablefmt="simple"))
    print("\nThe Kafka adapter is built with Maven (JDK 17, Kafka's jars from Maven Central) on first use, or by `kraftcheck adapters build kafka`.")
    return 0


def build_adapter(args: argparse.Namespace) -> int:
    if args.name != "kafka":
        raise AdapterOptionError(
            f"cannot build {args.name!r}: kafka is the only adapter kraftcheck builds (another version: kafka --kafka-version VERSION); "
            "reference, reference:OPTIONS and mutant:NAME are built in, subprocess:COMMAND is built by its implementer"
        )
    try:
        built = build(args.kafka_version, force=args.force)
        command = adapter_command(args.kafka_version)
    except AdapterBuildError as error:
        print(f"kraftcheck: {error}", file=sys.stderr)
        return 1
    print(f"{'built' if built else 'already built'}: the Kafka adapter for Kafka {args.kafka_version} in {build_dir(args.kafka_version)}")
    print(f"certify with: kraftcheck certify --adapter kafka:{args.kafka_version}")
    print(f"the command it runs: {shlex.join(command)}")
    return 0
