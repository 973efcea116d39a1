"""The learning demo and what it is built from (used by ``prme demo``, the benchmarks and tests).

- :mod:`prme.demo.workflow`: the whole seed workflow end to end on one pack (``prme demo``).
- :mod:`prme.demo.workload`: the generated workloads (memories, judged queries, holdout).
- :mod:`prme.demo.simulation`: many seeded runs of both gates (the gates' reliability).
- :mod:`prme.demo.report_html`: the demo's self-contained HTML report.
"""
