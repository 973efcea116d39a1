"""Confidence-weighted rank fusion: how much each channel's ranking is trusted for one query.

Plain reciprocal-rank fusion trusts the vector and the lexical ranking equally on every query.
When one channel has no idea (a flat score distribution: the best candidate is barely apart from
the rest), its ranks are noise and drag the fused ranking below the better channel alone. A
channel's **confidence** here is the spread of its head relative to its whole distribution:

    confidence = (s_1 − s_n) / σ(s)      over the channel's scored candidates, n = ``HEAD``

which is unchanged by any positive affine map of the scores (so BM25's scale, a min-max
normalization or cosine's range do not matter) and is 0 when the channel scores fewer than two
candidates or all of them alike. The two weights are ``2·c_ch / (c_sem + c_lex)`` (mean 1, so
equal confidence is the plain formula); both 1 when neither channel has any.

Pure functions over arrays: retrieval computes the weights once per request and records them in
every candidate's trace, so replay never recomputes them.
"""

from __future__ import annotations

import numpy as np

from prme.retrieval.scoring import FloatArray

HEAD = 10


def channel_confidence(scores: FloatArray, head: int = HEAD) -> float:
    """``(s_1 − s_min(head, n)) / σ(s)`` of one channel's scores (any order); 0 when undefined."""
    if scores.size < 2:
        return 0.0
    ordered = np.sort(scores.astype(np.float64))[::-1]
    spread = float(np.std(ordered))
    if spread <= 0.0:
        return 0.0
    return float(ordered[0] - ordered[min(head, ordered.size) - 1]) / spread


def channel_weights(semantic: FloatArray, lexical: FloatArray) -> tuple[float, float]:
    """The (semantic, lexical) fusion weights from each channel's scored candidates."""
    cs = channel_confidence(semantic)
    cl = channel_confidence(lexical)
    total = cs + cl
    if total <= 0.0:
        return 1.0, 1.0
    return 2.0 * cs / total, 2.0 * cl / total
