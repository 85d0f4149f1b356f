"""Which calibrators had traffic in a time range: the list the live gauges are computed for
(:mod:`app.service.traffic.live`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import exists, func, select

from app.store.models import Calibrator, Prediction
from app.store.session import RepositoryBase


class TrafficNames(RepositoryBase):
    """The live calibrators whose predictions were logged in a range."""

    def calibrators_with_traffic(
        self, since: datetime, until: datetime, limit: int
    ) -> tuple[list[str], int]:
        """The first ``limit`` live calibrators, in name order, with a prediction logged in
        [since, until), and how many there are in all.

        A deleted calibrator is left out (its traffic went with it). One ``EXISTS`` probe
        of the (name, predicted_at) index per live calibrator, rather than a scan of every
        name's predictions in the range: the calibrators table is small, the prediction log
        is not.
        """
        logged = exists().where(
            Prediction.name == Calibrator.name,
            Prediction.predicted_at >= since,
            Prediction.predicted_at < until,
        )
        query = select(Calibrator.name).where(Calibrator.deleted_at.is_(None), logged)
        names = list(self._session.scalars(query.order_by(Calibrator.name).limit(limit)))
        if len(names) < limit:
            return names, len(names)
        total = self._session.scalar(select(func.count()).select_from(query.subquery()))
        return names, int(total or 0)
