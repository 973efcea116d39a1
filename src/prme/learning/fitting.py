"""The fitting algorithms of gate 1, by name (``LearningConfig.algorithm``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from prme.learning.fit_listwise import fit_listwise
from prme.learning.fit_pairwise import fit_pairwise
from prme.learning.observations import Observations, ObservedGroup
from prme.learning.table import JudgedTable
from prme.models.learning import LearningConfig
from prme.models.scoring import MULTIPLIER_MAX, MULTIPLIER_MIN, RankingMultipliers

FloatArray = npt.NDArray[np.float64]
Fit = Callable[[JudgedTable, list[ObservedGroup], LearningConfig], tuple[FloatArray, float, float]]
# Every name LearningConfig.algorithm accepts, and the function that fits it.
FITS: dict[str, Fit] = {
    "listwise_ndcg_multipliers_v1": fit_listwise,
    "pairwise_weight_multipliers_v1": fit_pairwise,
}


def fit_multipliers(
    observations: Observations, table: JudgedTable | None = None
) -> tuple[RankingMultipliers, float, float]:
    """The configured fit on the training groups only: (multipliers, training loss before,
    after), each loss as the algorithm defines it (``TRAINING_LOSS``)."""
    config = observations.config
    table = table or JudgedTable(observations.requests)
    logs, before, after = FITS[config.algorithm](table, observations.training, config)
    values = np.clip(np.exp(logs), MULTIPLIER_MIN, MULTIPLIER_MAX).tolist()
    return RankingMultipliers.from_tuple(values), before, after
