"""Rimthan benchmarks: each figure measured beside its floor in the same run.

Run with ``make bench`` (or ``make bench-quick``); see ``python -m benchmarks --help``.
Nothing here is imported by the product; ``tests/bench`` drives quick runs of it.

The modules:

``runner`` (one run: every figure, printed and saved) · ``config`` (the full and
quick plans) · ``bytecode`` (every package compiled before the first figure);
the figures ``bench_verify`` (P1, P1m), ``bench_build`` (P2), ``bench_calls``
(P3, P3h), ``bench_engine`` (P4), ``bench_start`` (P5), ``bench_throughput``
(P6) and their ``floors``; the servers a figure compares, ``servers`` (how each
is started), ``echo_server`` (the floor), ``mirror_server`` (our results, none
of our work) and ``load_client`` (P6's load); the plumbing ``fixtures``,
``synthetic`` (seeded sources), ``timing``, ``trash``, ``probe`` (one fresh
interpreter per measurement), ``profiling`` and ``report``; ``experiments``
(measured one-off splits, not part of a run: ``p3_split`` and ``p3_fixed_cost``, their servers
instrumented by ``wrapped_serving`` with ``timed_serving`` and ``cached_serving``; ``p1_floor``).
"""
