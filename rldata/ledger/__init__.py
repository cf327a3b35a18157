"""The pass-rate ledger and the decisions made from it.

- :mod:`~rldata.ledger.core`: per (task, model, params hash, verifier, environment) counts, rebuilt
  from the verification results;
- :mod:`~rldata.ledger.select`: ``rldata filter`` (keep what lies in a band, every decision and its
  reason stored) and ``rldata stratify`` (difficulty buckets, the curriculum file);
- :mod:`~rldata.ledger.history`: a training run's pass-rate history and live estimates;
- :mod:`~rldata.ledger.flags`: the tasks the quality tables flag (decontaminate, lint, dedup --near),
  which filter, stratify, train and export leave out.
"""
