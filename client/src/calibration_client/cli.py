"""The ``calibration`` command: fit, predict, versions, alias and diagnostics from a shell, and
estimate, decision and adjust (:mod:`~calibration_client._cli_decisions`), through
:class:`~calibration_client.Client` (its retries and deadline).

Exit status 0 on success; 1 when the service answered an error (its detail goes to stderr)
or could not be reached; 2 on bad usage (argparse's own, a file that cannot be read or
written, values that cannot be sent); 130 when interrupted. Never a traceback."""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from calibration_client import CalibrationError, Client
from calibration_client._cli_decisions import add_commands
from calibration_client._cli_files import ScoresFile, UnreadableFile, file_size, read_scores
from calibration_client._cli_progress import ProgressBar
from calibration_client._cli_tables import print_diagnostics, print_json, print_versions

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT = 300.0
"""Seconds a command's call may take, its retries included (a big upload is slow)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``calibration`` with ``argv`` (default: the process's arguments); the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse's usage errors (2) and --help (0)
        return stop.code if isinstance(stop.code, int) else 1
    command: Callable[[argparse.Namespace], int] = args.command
    try:
        return command(args)
    except CalibrationError as error:  # with its notes: an adjust not retried says so
        notes = getattr(error, "__notes__", [])
        return _fail("\n".join([error.detail or error.message, *notes]), 1)
    except BrokenPipeError:  # `calibration ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:  # a file that cannot be read or written
        where = f"{error.filename}: " if error.filename else ""
        return _fail(f"{where}{error.strerror or error}", 2)
    except (UnreadableFile, ValueError) as error:  # a file or values that cannot be sent
        return _fail(str(error), 2)
    except KeyboardInterrupt:
        return 130


def _fail(message: str, status: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="calibration", description=__doc__)
    parser.add_argument(
        "--url", default=None, help=f"the service (env CALIBRATION_URL; {DEFAULT_URL})"
    )
    parser.add_argument("--key", default=None, help="an API key (env CALIBRATION_KEY)")
    parser.add_argument(
        "--timeout", type=float, default=TIMEOUT, help=f"seconds per call (default {TIMEOUT:g})"
    )
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")

    fit = commands.add_parser("fit", help="fit a new version on a CSV or Parquet file")
    fit.add_argument("name")
    fit.add_argument("file", type=Path, help="score,label[,weight] or score_0..,label")
    fit.add_argument("--method", default=None, help="the method (the service's default: auto)")
    fit.add_argument("--params", type=_json_object, default=None, help="method params as JSON")
    fit.add_argument("--description", default=None)
    fit.add_argument("--tag", type=_tag, action="append", default=[], help="k=v, repeatable")
    fit.add_argument("--progress", action="store_true", help="show the upload's progress")
    fit.add_argument("--json", action="store_true", help="print the service's JSON")
    fit.set_defaults(command=_fit)

    predict = commands.add_parser("predict", help="calibrated probabilities of a file's scores")
    predict.add_argument("name")
    predict.add_argument("file", type=Path, help="score (or score_0..) and any other columns")
    predict.add_argument("--version", default=None, help="a number, latest or an alias")
    predict.add_argument("-o", "--output", type=Path, default=None, help="CSV out (stdout)")
    predict.add_argument("--progress", action="store_true", help="show the upload's progress")
    predict.set_defaults(command=_predict)

    versions = commands.add_parser("versions", help="a calibrator's versions, newest first")
    versions.add_argument("name")
    versions.add_argument("--json", action="store_true", help="print the service's JSON")
    versions.set_defaults(command=_versions)

    alias = commands.add_parser("alias", help="point an alias at a version")
    alias.add_argument("name")
    alias.add_argument("alias")
    alias.add_argument("version", type=int)
    alias.set_defaults(command=_alias)

    diagnostics = commands.add_parser("diagnostics", help="a version's reliability bins")
    diagnostics.add_argument("name")
    diagnostics.add_argument("--version", default="latest", help="a number, latest or an alias")
    diagnostics.add_argument("--n-bins", type=int, default=10)
    diagnostics.add_argument("--png", type=Path, default=None, help="save the diagram")
    diagnostics.add_argument("--json", action="store_true", help="print the service's JSON")
    diagnostics.set_defaults(command=_diagnostics)

    add_commands(commands, _client, _tag)
    return parser


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _tag(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not k=v")
    return key, value


def _client(args: argparse.Namespace) -> Client:
    """The client of the service named by the options, else the environment."""
    url = args.url or os.environ.get("CALIBRATION_URL") or DEFAULT_URL
    key = args.key or os.environ.get("CALIBRATION_KEY") or None
    return Client(url, api_key=key, timeout=args.timeout)


def _fit(args: argparse.Namespace) -> int:
    file_size(args.file)  # a missing file is bad usage, said before any request
    with _client(args) as client:
        version = client.fit_file(
            args.name,
            args.file,
            method=args.method,
            params=args.params,
            description=args.description,
            tags=dict(args.tag) if args.tag else None,
            progress=ProgressBar(sys.stderr, always=args.progress),
        )
    if args.json:
        print_json(version.document)
    else:
        print_versions([version.document])
    return 0


def _predict(args: argparse.Namespace) -> int:
    table = read_scores(args.file)
    with _client(args) as client:
        prediction = client.predict(
            args.name,
            table.scores,
            version=args.version,
            progress=ProgressBar(sys.stderr, always=args.progress),
        )
    probabilities = np.asarray(prediction.probabilities, dtype=np.float64)
    if args.output is None:
        _write_predictions(sys.stdout, table, probabilities)
    else:
        with args.output.open("w", newline="", encoding="utf-8") as out:
            _write_predictions(out, table, probabilities)
    return 0


def _write_predictions(out: IO[str], table: ScoresFile, probabilities: NDArray[np.float64]) -> None:
    """The file's columns as read, then ``probability`` (or ``probability_0..k-1``)."""
    if probabilities.ndim == 1:
        names, values = ["probability"], probabilities.reshape(-1, 1)
    else:
        names = [f"probability_{j}" for j in range(probabilities.shape[1])]
        values = probabilities
    # numpy's float text is the shortest that reads back to the same float64
    rows = np.column_stack([table.cells, values.astype(str)])
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*table.header, *names])
    writer.writerows(rows.tolist())


def _versions(args: argparse.Namespace) -> int:
    with _client(args) as client:
        versions = client.versions(args.name)
    if args.json:
        print_json([version.document for version in versions])
    else:
        print_versions([version.document for version in versions])
    return 0


def _alias(args: argparse.Namespace) -> int:
    with _client(args) as client:
        client.set_alias(args.name, args.alias, args.version)
    print(f"{args.name}: {args.alias} -> version {args.version}")
    return 0


def _diagnostics(args: argparse.Namespace) -> int:
    with _client(args) as client:
        report = client.diagnostics(args.name, args.version, n_bins=args.n_bins)
        picture = (
            None
            if args.png is None
            else client.diagnostics_png(args.name, args.version, n_bins=args.n_bins)
        )
    if picture is not None:
        args.png.write_bytes(picture)
    if args.json:
        print_json(report.document)
        return 0
    print_diagnostics(report)
    if args.png is not None:
        print(f"\ndiagram saved to {args.png}")
    return 0
