"""``python -m benchmarks [--plan full|quick] [--only P1,P2,P4]`` (``make bench`` / ``make bench-quick``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .config import PLANS
from .runner import DEFAULT_OUT, DEFAULT_WORK, GROUPS, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description="Rimthan benchmarks: each figure beside its floor, same run."
    )
    parser.add_argument(
        "--plan",
        choices=sorted(PLANS),
        default="full",
        help="full: the issue's sizes; quick: small sizes for a smoke run",
    )
    parser.add_argument(
        "--only", default=",".join(GROUPS), help=f"comma-separated subset of {','.join(GROUPS)} (default: all)"
    )
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="where synthetic sources and releases go")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"JSON results file (default: {DEFAULT_OUT.name} for full, results-quick.json for quick, "
        f"in {DEFAULT_OUT.parent})",
    )
    parser.add_argument("--no-profile", action="store_true", help="skip profiling figures above target")
    args = parser.parse_args(argv)
    only = {part.strip().upper() for part in args.only.split(",") if part.strip()}
    unknown = only - set(GROUPS)
    if unknown:
        parser.error(f"unknown figure group(s) {sorted(unknown)}; choose from {', '.join(GROUPS)}")
    plan = PLANS[args.plan]
    if args.no_profile:
        from dataclasses import replace

        plan = replace(plan, profile=False)
    out = args.out or (DEFAULT_OUT if plan.name == "full" else DEFAULT_OUT.with_name(f"results-{plan.name}.json"))
    run(plan, only=only, work=args.work, out=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
