"""A task's pass rate before sampling it (``rldata predict``, docs/predict.md).

- :mod:`rldata.predict.features`: hashed n-grams, labels, the policy's prefill state and log-prob;
- :mod:`rldata.predict.predictors`: the cross-task prior (binomial logistic model, recalibrated,
  empirical-Bayes strength) and the live posterior of seen tasks;
- :mod:`rldata.predict.calibration`: Beta arithmetic, the strength, the calibration metrics;
- :mod:`rldata.predict.fit`: fit on the store's rows at a cutoff and write ``predictions``;
- :mod:`rldata.predict.backtest`: held-out tasks and later policy versions, against baselines;
- :mod:`rldata.predict.plan`: what ``rldata sample --skip-predicted`` takes from a prediction;
- :mod:`rldata.predict.page`: the backtest on the report page.
"""

from importlib import import_module
from typing import Any

from rldata.predict.config import PredictConfig

__all__ = ["BacktestResult", "PredictConfig", "PredictResult", "backtest_store", "predict_store"]

# The fit and the backtest load scipy and scikit-learn (~1 s): `rldata` imports this package at
# start-up for PredictConfig (the options of `rldata predict`), so they load on first use instead.
_LAZY = {
    "BacktestResult": "rldata.predict.backtest",
    "backtest_store": "rldata.predict.backtest",
    "PredictResult": "rldata.predict.fit",
    "predict_store": "rldata.predict.fit",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
