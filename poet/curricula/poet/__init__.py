"""POET and Enhanced POET: the curriculum classes and their operators.

- `curriculum`: the schedule of an iteration (reproduce, train, transfer);
- `reproduction`: eligibility, mutation, the minimal criterion, novelty ranking, admission;
- `novelty`: the env characterisations (hand-designed k-NN, PATA-EC);
- `transfer`: transfer tournaments between active pairs.
"""

from poet.curricula.poet.curriculum import EnhancedPoetCurriculum, PoetCurriculum

__all__ = ["EnhancedPoetCurriculum", "PoetCurriculum"]
