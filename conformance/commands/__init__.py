"""The body of each `kraftcheck` command: read the parsed arguments, call the stages, print.

One module per command (`traces` holds its three sub-commands). The top of the pipeline: a
command may import any stage, and nothing imports a command but conformance.cli.
"""
