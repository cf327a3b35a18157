"""Rewards: composing a sample's reward from its verdicts (:mod:`rldata.rewards.compose`) and the
generative judge whose scores can be mixed in (:mod:`rldata.rewards.judge`).

Verifiers (what decides a verdict) are :mod:`rldata.verify`; the store job that runs the judge
over stored trajectories is :mod:`rldata.jobs.judge`, and the preference-pair export of its
verdicts is :mod:`rldata.interop.preferences`.
"""
