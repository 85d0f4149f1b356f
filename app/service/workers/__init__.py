"""Worker processes: where fits, reports, pictures, comparisons and exports run.

A job's numbers take seconds and gigabytes on a large batch. Run in the process that serves,
they share its interpreter with ``/healthz`` and predict's hot path, and the memory a large
job touched stays with that process (glibc's allocator keeps it, more so under the tunables
of :data:`ALLOCATOR_TUNABLES`). So each server process sends its heavy jobs to worker
processes of its own:

- **Slots** (:mod:`.slots`). A slot is one process, a
  :class:`~concurrent.futures.ProcessPoolExecutor` of one worker: a process that dies breaks
  only its own executor, so it fails only its own job (:class:`~app.errors.WorkerLost`, 503
  with ``Retry-After``), and it can be killed alone. A job takes an idle slot or starts one;
  the pool's threads (:class:`app.service.work.WorkPool`) bound how many run at once.
- **Start** (:mod:`.forking`). Processes come from multiprocessing's fork server, started in
  the background as the server starts (:func:`start_soon`; else at the first job), once
  every job module is named (:func:`preload`), so a new worker is ready in milliseconds;
  unlike ``fork``, it copies no lock a thread of the server held. It starts under the
  allocator tunables, which only the workers (and the JSON process) run with, and freezes
  what it imported (:mod:`.frozen`): no worker's collector walks it.
- **Recycling.** After its job a worker reports its resident memory: past
  ``worker_memory_mb``, or after ``worker_max_jobs`` jobs, it is replaced, which is how a
  large job's memory goes back to the system; idle ``worker_idle_seconds``, it exits (but
  the last one used, while no job runs: it keeps the reports the web view shows again). Each
  has a data limit (``RLIMIT_DATA``, ``job_memory_mb`` beyond what it holds at its start):
  a job that asks for more stops with :class:`~app.errors.OverMemory` (413) instead of taking
  the machine's memory.
- **Stopping.** The worker enters the job's :class:`~app.calibration.Budget`, whose
  cancellation is a flag its server sets when the client leaves: the job stops at its next
  checkpoint, and a job past its last one completes, so an answer never says "nothing was
  stored" about a version that was. One that has not stopped :data:`~.slots.GRACE_SECONDS`
  after its deadline or its cancellation is killed with its process. A worker also exits
  as its server dies (``kill -9`` included; within a second where the kernel has no pidfds),
  so none is left behind.
- **The service** (:mod:`.inside`). A job is a module-level function whose first argument is
  the service: the worker builds its own :class:`~app.service.use_cases.CalibrationService`
  from the server's settings (once per settings, with nothing in the background; it reads
  and writes the same database, through a connection it opens per transaction) and hands it
  in. Only the request's arguments and the answer cross between processes: a stored batch is
  read from the database by the worker itself.
"""

from app.service.workers.forking import (
    ALLOCATOR_TUNABLES,
    allocator_environment,
    allocator_tunables,
    forkserver,
    glibc_version,
    preload,
    start_soon,
)
from app.service.workers.inside import is_worker_process, start_worker
from app.service.workers.slots import WorkerProcesses, processes, stop_executor

__all__ = [
    "ALLOCATOR_TUNABLES",
    "WorkerProcesses",
    "allocator_environment",
    "allocator_tunables",
    "forkserver",
    "glibc_version",
    "is_worker_process",
    "preload",
    "processes",
    "start_soon",
    "start_worker",
    "stop_executor",
]
