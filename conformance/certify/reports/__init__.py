"""The renderings of a certification: one module per report format, and the terminal's.

Each renders a `conformance.certify.verdicts.Certification`, saying the facts they share in
the words of `wording`; `publish` writes the report files. A new report format is a new
module here, called from `publish`.
"""
