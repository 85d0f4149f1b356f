"""The fork server's last preload (:data:`app.service.workers.forking.FREEZE`): importing it
freezes what the preloads built, out of the garbage collector's reach.

The fork server imports the job modules once, with matplotlib and onnx (:func:`.forking.preload`),
then forks every worker from itself. Those ~200,000 objects live as long as the process, so
collecting them is wasted work, and it costs where it shows:

- in each worker, every full collection of a job's garbage walked them all again (0.17 s of
  CPU each), and touching their headers copied the pages the worker shared with the fork
  server (Python's documentation of :func:`gc.freeze` recommends it before forking for this);
- in the fork server itself, the interpreter's last collection, once its server had stopped,
  took 1 s of CPU (0.1 s frozen).

Only the fork server imports it, after every other preload: nothing else may (the server
process freezes its own start-up in :func:`app.main.create_app`'s lifespan).
"""

import gc

gc.freeze()
