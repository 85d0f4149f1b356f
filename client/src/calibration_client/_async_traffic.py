"""The asynchronous client's calls of the decisions before the labels (estimate, decision, adjust)
and of monitoring: a mixin of :class:`~calibration_client.AsyncClient`, which sends them
(``_run``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar

from numpy.typing import ArrayLike

from calibration_client._base import Call
from calibration_client._calls import Selector
from calibration_client._traffic_calls import (
    Moment,
    MonitoringWindow,
    TrafficOperations,
    adjust_document,
)
from calibration_client._traffic_types import Decision, Estimate, Window
from calibration_client._types import Version

T = TypeVar("T")


class AsyncTraffic(TrafficOperations):
    """Estimate, decision, adjust and monitoring, sent by the subclass's ``_run``."""

    async def _run(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def estimate(
        self,
        name: str,
        scores: ArrayLike,
        *,
        version: Selector = "latest",
        threshold: float | None = None,
        timeout: float | None = None,
    ) -> Estimate:
        """What ``version``'s probabilities of unlabelled ``scores`` say if they are
        calibrated; nothing is stored or logged (an extension of CLIENT.md's API).

        ``estimated``: the expected performance at ``threshold`` (binary versions; the
        service's default 0.5) with 95% sampling bands; ``prior``: the batch's class prior by
        EM beside the version's training prior (label shift). ``scores`` as :meth:`predict`
        takes them, (n,) or (n, k); they go as JSON."""
        return await self._run(self._estimate_call(name, scores, version, threshold, timeout))

    async def decision(
        self,
        name: str,
        *,
        version: Selector = "latest",
        cost_fp: float = 1.0,
        cost_fn: float = 1.0,
        benefit_tp: float = 0.0,
        benefit_tn: float = 0.0,
        timeout: float | None = None,
    ) -> Decision:
        """The threshold that minimises the expected cost of deciding 1 above it, for
        calibrated probabilities of a binary version, and the mean cost per case of deciding
        there on the version's out-of-fold predictions, beside deciding at 0.5 (an extension
        of CLIENT.md's API). Costs and benefits are per case, ≥ 0, not all 0."""
        return await self._run(
            self._decision_call(name, version, cost_fp, cost_fn, benefit_tp, benefit_tn, timeout)
        )

    async def adjust(
        self,
        name: str,
        version: Selector,
        *,
        prior: float | Literal["traffic"] | None = None,
        priors: ArrayLike | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
        description: str | None = None,
        tags: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Version:
        """Store the next version of ``name``: ``version``'s probabilities corrected by Bayes'
        rule to new class priors, for a base rate that moved (label shift); nothing is
        refitted, aliases stay (an extension of CLIENT.md's API). Its ``source["adjusted"]``
        says from which priors to which.

        Give ``prior``, a binary version's new P(y = 1), or ``"traffic"`` for the EM estimate
        of the version's logged predictions in [``since``, ``until``) (the service's default:
        the last 30 days); or ``priors``, one per class. Both or neither is a ValueError; the
        service refuses the rest (422 naming the field). Not retried once the request may
        have reached the service (a dropped connection, a timeout): the service does not
        answer an adjust under an ``Idempotency-Key``, so sending it again could store a
        second version; look at :meth:`versions` before trying again."""
        document = adjust_document(prior, priors, since, until, description, tags)
        return await self._run(self._adjust_call(name, version, document, timeout))

    async def monitoring(
        self,
        name: str,
        *,
        window: MonitoringWindow = "1d",
        since: Moment | None = None,
        until: Moment | None = None,
        version: Selector | None = None,
        threshold: float | None = None,
        n_bins: int | None = None,
        bootstrap: int | None = None,
        timeout: float | None = None,
    ) -> list[Window]:
        """The logged traffic of ``name`` window by window, oldest first: one row per window
        and version that answered in it, an empty row for a window without traffic (an
        extension of CLIENT.md's API).

        ``window`` is ``"1h"``, ``"1d"`` or ``"7d"``; [``since``, ``until``) defaults to the
        30 windows up to the current one's end; ``version`` keeps one version's traffic;
        ``threshold`` is where ``estimated`` and ``realized`` decide 1 (the service's default
        0.5); ``n_bins`` the ECE's bins and ``bootstrap`` the draws of the ``intervals``
        (0: none)."""
        return await self._run(
            self._monitoring_call(
                name, window, since, until, version, threshold, n_bins, bootstrap, timeout
            )
        )
