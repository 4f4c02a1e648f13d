"""Reading Moltaro: status bodies into verdicts, OpenAPI enums, intake extraction.

Every function here is pure (no I/O, no clock), so each can be tested exhaustively.
"""

from orchestrator.interpret._read import (
    extract_polling_url,
    extract_remote_id,
    polling_url_matches,
)
from orchestrator.interpret.enums import fallback_enums, resolve_enums
from orchestrator.interpret.interpreter import EnumMap, Verdict, interpret, missing_evidence
from orchestrator.vocabulary import TERMINAL_PHASES, Phase

__all__ = [
    "TERMINAL_PHASES",
    "EnumMap",
    "Phase",
    "Verdict",
    "extract_polling_url",
    "extract_remote_id",
    "fallback_enums",
    "interpret",
    "missing_evidence",
    "polling_url_matches",
    "resolve_enums",
]
