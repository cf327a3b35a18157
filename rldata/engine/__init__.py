"""vLLM engines: the one wrapper that loads a model and samples (:mod:`~rldata.engine.core`), weights
moved into a running engine (:mod:`~rldata.engine.weights`), the Ray actors that hold engines for
sampling jobs and the trainer (:mod:`~rldata.engine.actors`), and the reaper of the Ray processes a
killed driver leaves behind (:mod:`~rldata.engine.reaper`).

Importing this package imports neither vLLM, torch nor Ray: each loads where it is first used."""
