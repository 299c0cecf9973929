"""Execution phases: one row per phase with its aliases and the words that name it in code.

``prefill`` and ``decode`` are the two phases of inference; a chain stage or a
candidate that applies to both says :data:`BOTH`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple


class PhaseDef(NamedTuple):
    """One phase.

    ``aliases`` are the other spellings people type (``incremental``); ``code_words``
    are the words that name the phase inside source code (``is_decoding``), which the
    scanner reads as a context hint.  ``inference`` marks the phases of serving a model.
    """

    name: str
    inference: bool
    aliases: tuple[str, ...] = ()
    code_words: tuple[str, ...] = ()


PHASE_ROWS: tuple[PhaseDef, ...] = (
    PhaseDef("prefill", True, ("context", "encode"), ("prefill", "prefilling")),
    PhaseDef("decode", True, ("incremental", "generate"), ("decode", "decoding")),
    PhaseDef("training", False, ("train",), ("backward",)),
)

PHASES: tuple[str, ...] = tuple(p.name for p in PHASE_ROWS)
if TYPE_CHECKING:
    Phase = str
else:
    Phase = Literal[PHASES]

#: The phases of inference, in the order records list them.
INFERENCE_PHASES: tuple[str, ...] = tuple(p.name for p in PHASE_ROWS if p.inference)
#: A chain stage or candidate that runs in every inference phase.
BOTH = "both"
#: What a chain stage's ``phase`` may say.
STAGE_PHASES: tuple[str, ...] = (*INFERENCE_PHASES, BOTH)
#: What a candidate's ``phase`` may say.
CANDIDATE_PHASES: tuple[str, ...] = (
    *STAGE_PHASES,
    *(p.name for p in PHASE_ROWS if not p.inference),
)
if TYPE_CHECKING:
    StagePhase = str
else:
    StagePhase = Literal[STAGE_PHASES]

PHASE_ALIASES: dict[str, Phase] = {a: p.name for p in PHASE_ROWS for a in p.aliases}
#: Words in source code → the phase they name.
PHASE_CODE_WORDS: dict[str, Phase] = {w: p.name for p in PHASE_ROWS for w in p.code_words}
