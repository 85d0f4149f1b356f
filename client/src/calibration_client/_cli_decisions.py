"""The commands of decisions before the labels come: ``estimate`` (a file of unlabelled
scores), ``decision`` (the threshold costs call for) and ``adjust`` (a version corrected to new
class priors), with :mod:`~calibration_client.cli`'s conventions: a table, or ``--json`` the
service's document; usage errors exit 2 before any request."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from calibration_client._cli_files import read_scores
from calibration_client._cli_tables import (
    print_adjusted,
    print_decision,
    print_estimate,
    print_json,
)
from calibration_client._sync import Client

Connect = Callable[[argparse.Namespace], Client]
"""Makes the client the global options and the environment name (``cli._client``)."""
Subcommands = Any  # argparse's _SubParsersAction, private in typeshed


def add_commands(commands: Subcommands, connect: Connect, tag: Callable[[str], Any]) -> None:
    """Add ``estimate``, ``decision`` and ``adjust`` to the parser's ``commands``."""
    estimate = commands.add_parser(
        "estimate", help="expected performance and prior of unlabelled scores (nothing stored)"
    )
    estimate.add_argument("name")
    estimate.add_argument("file", type=Path, help="score (or score_0..) and any other columns")
    estimate.add_argument("--version", default="latest", help="a number, latest or an alias")
    estimate.add_argument("--threshold", type=float, default=None, help="decide 1 above (0.5)")
    estimate.add_argument("--json", action="store_true", help="print the service's JSON")
    estimate.set_defaults(command=partial(_estimate, connect))

    decision = commands.add_parser("decision", help="the threshold that minimises a cost")
    decision.add_argument("name")
    decision.add_argument("--version", default="latest", help="a number, latest or an alias")
    decision.add_argument("--cost-fp", type=float, required=True, help="cost of a false positive")
    decision.add_argument("--cost-fn", type=float, required=True, help="cost of a false negative")
    decision.add_argument("--benefit-tp", type=float, default=0.0, help="gain of a true positive")
    decision.add_argument("--benefit-tn", type=float, default=0.0, help="gain of a true negative")
    decision.add_argument("--json", action="store_true", help="print the service's JSON")
    decision.set_defaults(command=partial(_decision, connect))

    adjust = commands.add_parser(
        "adjust", help="store a version corrected to new class priors (label shift)"
    )
    adjust.add_argument("name")
    adjust.add_argument("version", help="the version to correct: a number, latest or an alias")
    to = adjust.add_mutually_exclusive_group(required=True)
    to.add_argument("--prior", type=float, help="a binary version's new P(y = 1)")
    to.add_argument("--priors", type=_priors, help="one per class: P0,P1,...")
    to.add_argument("--traffic", action="store_true", help="the EM estimate of logged traffic")
    adjust.add_argument("--since", default=None, help="with --traffic: start (ISO 8601)")
    adjust.add_argument("--until", default=None, help="with --traffic: end, exclusive")
    adjust.add_argument("--description", default=None)
    adjust.add_argument("--tag", type=tag, action="append", default=[], help="k=v, repeatable")
    adjust.add_argument("--json", action="store_true", help="print the service's JSON")
    adjust.set_defaults(command=partial(_adjust, connect))


def _priors(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not numbers separated by commas") from None


def _estimate(connect: Connect, args: argparse.Namespace) -> int:
    table = read_scores(args.file)
    with connect(args) as client:
        found = client.estimate(
            args.name, table.scores, version=args.version, threshold=args.threshold
        )
    if args.json:
        print_json(found.document)
    else:
        print_estimate(found)
    return 0


def _decision(connect: Connect, args: argparse.Namespace) -> int:
    with connect(args) as client:
        found = client.decision(
            args.name,
            version=args.version,
            cost_fp=args.cost_fp,
            cost_fn=args.cost_fn,
            benefit_tp=args.benefit_tp,
            benefit_tn=args.benefit_tn,
        )
    if args.json:
        print_json(found.document)
    else:
        print_decision(found)
    return 0


def _adjust(connect: Connect, args: argparse.Namespace) -> int:
    if not args.traffic and (args.since is not None or args.until is not None):
        raise ValueError("--since and --until go with --traffic")  # usage: exit 2
    with connect(args) as client:
        version = client.adjust(
            args.name,
            args.version,
            prior="traffic" if args.traffic else args.prior,
            priors=args.priors,
            since=args.since,
            until=args.until,
            description=args.description,
            tags=dict(args.tag) if args.tag else None,
        )
    if args.json:
        print_json(version.document)
    else:
        print_adjusted(version.document)
    return 0
