"""``python -m app.serve`` with the traffic rollups off: :mod:`bench.rollups`' reference for
the cost of summing each flush's predictions by the hour.

:meth:`app.store.traffic.rollups.RollupOperations.roll_up` is replaced by a no-op when this
module is imported, before the app is. The log writer runs in the process that serves (each
uvicorn worker its own), and uvicorn starts its workers with multiprocessing's ``spawn``,
which imports the parent's main module again in each child (as ``__mp_main__``, from its
name, since it ran with ``-m``): every worker serves with the patch. Outcomes still add their
labels to the hours (:meth:`~app.store.traffic.rollups.RollupOperations.add_rollups`); the
benchmark posts none.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.serve import main
from app.store.traffic.rollups import RollupOperations
from app.store.traffic.rows import LoggedPrediction


def _no_roll_up(
    self: RollupOperations, rows: Sequence[LoggedPrediction], labels: Sequence[int | None]
) -> None:
    """Nothing: the flush writes its rows and no hour."""


RollupOperations.roll_up = _no_roll_up  # type: ignore[method-assign]

if __name__ == "__main__":
    main()
