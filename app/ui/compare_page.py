"""The compare page: two versions picked from select lists, their stored curves overlaid and
their metrics side by side, and which is better in words.

The verdict is the compare route's (:func:`app.service.comparison.ranked`, by log loss, with
the paired bootstrap interval of the gap) on labelled pairs both versions are scored on out of
sample, since the page has no uploaded batch: the traffic logged since the newer was created,
else their fitting batches (:class:`app.service.verdicts.Verdicts`). The page says which, and
how many pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from markupsafe import Markup

from app.calibration import RESAMPLES
from app.errors import InvalidInput, NotFound, ServiceError, StoredDataCorrupt
from app.service.diagnosis import Reports
from app.service.live_view import PRODUCTION
from app.service.use_cases import CalibrationService
from app.service.verdicts import MIN_TRAFFIC, TRAFFIC_DAYS, Evidence, Verdict
from app.store import Selector, VersionRecord

from .pages import Choice, PageAnswer, binning, version_choices
from .svg import inline_svg
from .templating import moment, number


@dataclass(frozen=True)
class Compared:
    """Two versions' reports, their metrics (the JSON of their calibrated reports), how
    they were binned, and their curves overlaid."""

    reports: list[Reports]
    metrics: list[Any]
    binning: str
    diagram: Markup


@dataclass(frozen=True)
class Said:
    """A verdict in words: which version is better and whether significantly, and on what
    labelled pairs it rests."""

    sentence: str
    basis: str


@dataclass(frozen=True)
class ComparePage:
    """The compare page: the selectors asked (for the selects), every version and alias to
    pick from, and the two versions' comparison and verdict; or nothing to compare (fewer
    than two versions), or the error that kept it (``problem``), or why there is no verdict
    (``unjudged``)."""

    name: str
    a: str
    b: str
    versions: list[Choice]
    aliases: list[Choice]
    compared: Compared | None = None
    verdict: Said | None = None
    unjudged: str | None = None
    problem: ServiceError | None = None


def comparison(
    service: CalibrationService, name: str, first: Selector | None, second: Selector | None
) -> PageAnswer:
    """The compare page; by default ``production`` (else the latest version) against the
    newest other version. An unknown version (or one whose batch cannot be read) is the page
    with its error, and that error's status."""
    asked = [str(selector) for selector in (first, second) if selector is not None]
    offered = version_choices(service, name, *asked)
    records, aliases = offered.records, offered.aliases
    versions, named = offered.versions, offered.named
    if first is None or second is None:
        if len(records) < 2:
            return ComparePage(name, "", "", versions, named), 200
        first = first if first is not None else _default(records, aliases)
        if second is None:
            taken = _number(first, records, aliases)
            second = next(r.version for r in records if r.version != taken)
    a, b = str(first), str(second)
    try:
        found = service.browsing.comparison(name, first, second, "svg")
    except (NotFound, StoredDataCorrupt) as exc:
        return ComparePage(name, a, b, versions, named, problem=exc), exc.status
    one, other = found.first, found.second
    label = (
        f"Reliability curves of {name} versions {one.version} ({one.method}) and "
        f"{other.version} ({other.method}) overlaid, each on its own fitting batch, out of "
        "fold; the table beside it holds their metrics."
    )
    compared = Compared(
        [one, other],
        [one.calibrated.as_json()["metrics"], other.calibrated.as_json()["metrics"]],
        binning(one.calibrated),
        inline_svg(found.picture, prefix="compare", label=label),
    )
    page = ComparePage(name, a, b, versions, named, compared)
    if one.version == other.version:
        same = f"{a} and {b} are the same version, v{one.version}: pick two to judge."
        return replace(page, unjudged=same), 200
    kinds = {r.version: r.n_classes for r in records}
    if kinds.get(one.version, 2) != kinds.get(other.version, 2):
        both = ", ".join(f"v{r.version} {_kind(kinds[r.version])}" for r in (one, other))
        return replace(page, unjudged=f"{both}: no pairs score both."), 200
    try:
        verdict = service.verdicts.verdict(name, one.version, other.version, RESAMPLES)
    except InvalidInput as exc:  # scores one version refuses
        return replace(page, unjudged=exc.detail), 200
    except (NotFound, StoredDataCorrupt) as exc:  # deleted meanwhile
        return replace(page, problem=exc), exc.status
    return replace(page, verdict=said(verdict)), 200


def said(verdict: Verdict) -> Said:
    """The verdict in words: ``v3 (isotonic) has the lower log loss on …: 0.3120 against
    0.3340 for v2 (platt); the gap, 0.0220 [0.0090, 0.0350], is significant (paired
    bootstrap, 1000 resamples)``."""
    document = verdict.ranked
    best, other = document["versions"]
    on = _on(verdict.evidence)
    ours, theirs = best["metrics"]["log_loss"], other["metrics"]["log_loss"]
    difference = other["difference"]
    gap, bounds = difference["value"], difference["interval"]
    if gap is None or bounds is None:
        return Said(
            f"The log loss of {_named(best)} and {_named(other)} on {on} cannot be "
            "told apart: it is not finite.",
            _basis(verdict.evidence),
        )
    if gap == 0:
        lead = f"{_named(best)} and {_named(other)} have the same log loss on {on}: {number(ours)}"
    else:
        lead = (
            f"{_named(best)} has the lower log loss on {on}: {number(ours)} against "
            f"{number(theirs)} for {_named(other)}"
        )
    low, high = bounds
    how = f"paired bootstrap, {document['bootstrap']} resamples"
    if other["significant"]:
        judged = f"is significant ({how})"
    elif low <= 0 <= high:
        judged = f"is not significant: the interval includes 0 ({how})"
    else:
        judged = f"is not significant: {document['n_samples']} pair cannot show noise ({how})"
    gap_text = f"{number(gap)} [{number(low)}, {number(high)}]"
    return Said(f"{lead}; the gap, {gap_text}, {judged}.", _basis(verdict.evidence))


def _on(evidence: Evidence) -> str:
    """What the verdict is measured on, for its sentence."""
    if evidence.source == "traffic":
        return f"{evidence.n_samples} labelled predictions of traffic"
    if evidence.shared:
        return f"the {evidence.n_samples} pairs of their shared fitting batch"
    return f"the {evidence.n_samples} pairs of their two fitting batches"


def _basis(evidence: Evidence) -> str:
    """On what labelled pairs the verdict rests, and why those."""
    newer = f"v{evidence.newer}"
    if evidence.source == "traffic":
        since = (
            f"since {newer} was created ({moment(evidence.since)})"
            if evidence.since > evidence.until - timedelta(days=TRAFFIC_DAYS)
            else f"in the last {TRAFFIC_DAYS} days"
        )
        return (
            f"The verdict rests on the {evidence.n_samples} labelled predictions logged {since} "
            f"to {moment(evidence.until)}: neither version was fitted on them, and both score "
            "the same raw scores, as POST …/compare would with these pairs."
        )
    if evidence.skipped:
        why = f"The traffic since {newer} was created could not be used ({evidence.skipped})"
    else:
        logged = f"Only {evidence.labelled}" if evidence.labelled else "No"
        why = (
            f"{logged} labelled predictions have been logged since {newer} was created "
            f"(within {TRAFFIC_DAYS} days), fewer than the {MIN_TRAFFIC} a verdict on traffic "
            "needs"
        )
    if evidence.shared:
        rests = (
            f"the {evidence.n_samples} labelled pairs of the fitting batch both versions "
            "share, each version scored by its out-of-fold predictions"
        )
        if evidence.weighted_as is not None:
            rests += (
                f", weighted as v{evidence.weighted_as} was fitted (the other's weights are "
                "those reweighted to its new priors)"
            )
    else:
        (one, other), (first, second) = evidence.versions, evidence.sizes
        rests = (
            f"the {evidence.n_samples} labelled pairs of both fitting batches ({first} of "
            f"v{one}'s, {second} of v{other}'s), each version scored out of sample: by its "
            "out-of-fold predictions on its own batch, by its calibrator on the other's"
        )
    return f"{why}, so the verdict rests on {rests}."


def _kind(n_classes: int) -> str:
    """What a version's classes make it, as a verdict says: ``is binary``, ``has 3 classes``."""
    return "is binary" if n_classes == 2 else f"has {n_classes} classes"


def _named(row: dict[str, Any]) -> str:
    return f"v{row['version']} ({row['method']})"


def _default(records: list[VersionRecord], aliases: dict[str, int]) -> Selector:
    """The first version a page compares by default: ``production``, else the latest."""
    return PRODUCTION if PRODUCTION in aliases else records[0].version


def _number(selector: Selector, records: list[VersionRecord], aliases: dict[str, int]) -> int:
    """The version ``selector`` names among ``records`` (newest first) and ``aliases``; -1
    for none of them (the comparison then says it is unknown)."""
    if isinstance(selector, int):
        return selector
    if selector == "latest":
        return records[0].version
    return aliases.get(selector, -1)
