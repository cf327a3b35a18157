"""Data you can trust: contamination, lint and answer-key audits as tables, and their blast radius.

- :mod:`~rldata.quality.normalise`: the text normalisation and token hashes every detector matches on;
- :mod:`~rldata.quality.evalpack`: eval packs (files the user supplies) stored as versioned ``eval_items``;
- :mod:`~rldata.quality.detectors`: the ngram, coverage and MinHash (rensa) detectors, a score and a span each;
- :mod:`~rldata.quality.decontaminate`: ``rldata decontaminate`` -> the ``contamination`` table;
- :mod:`~rldata.quality.neardup`: ``rldata dedup --near`` -> ``near_duplicates``;
- :mod:`~rldata.quality.rules`, :mod:`~rldata.quality.verifier_rules`, :mod:`~rldata.quality.suspect_key`,
  :mod:`~rldata.quality.lint`: ``rldata lint`` -> ``lint_findings``;
- which tasks the tables flag, and why (what filter, stratify, train and export leave out), is read by
  :mod:`rldata.ledger.flags`, below every command that leaves them out;
- :mod:`~rldata.quality.blast`: ``rldata blast-radius``: the runs, checkpoints and exports that touched them;
- :mod:`~rldata.quality.config`: the four commands' configs; :mod:`~rldata.quality.tables`: their keyed writes.

See docs/quality.md.
"""

from rldata.ledger.flags import Flags, flagged
from rldata.quality.config import BlastConfig, DecontaminateConfig, DedupConfig, LintConfig

__all__ = ["BlastConfig", "DecontaminateConfig", "DedupConfig", "Flags", "LintConfig", "flagged"]
