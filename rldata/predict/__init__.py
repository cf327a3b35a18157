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

from rldata.predict.backtest import BacktestResult, backtest_store
from rldata.predict.config import PredictConfig
from rldata.predict.fit import PredictResult, predict_store

__all__ = ["BacktestResult", "PredictConfig", "PredictResult", "backtest_store", "predict_store"]
