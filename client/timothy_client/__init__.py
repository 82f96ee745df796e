"""Timothy Memory from Python: recall, remember, review, extract, without Django.

    from timothy_client import Memory, compose_system

    memory = Memory("http://127.0.0.1:8000", "tm_…")
    recall = memory.recall(user_message)  # never raises; empty on any failure
    system = compose_system(STABLE_PREFIX, recall.block)

See docs/client.md in the Timothy Memory repository.
"""

from timothy_client.client import (
    DEFAULT_RECALL_TIMEOUT,
    PHASES,
    Memory,
    Phase,
    ToolResult,
)
from timothy_client.errors import (
    IdempotencyKeyReused,
    IllegalTransition,
    InvalidRequest,
    InvalidToolCall,
    MalformedAnswer,
    NotFound,
    RateLimited,
    ServiceError,
    ServiceUnavailable,
    TimothyError,
    Unauthorized,
    Unreachable,
)
from timothy_client.models import Chain, MemoryEvent, MemoryRecord, Recall, Related
from timothy_client.prompt import compose_system
from timothy_client.tools import TOOL_NAMES, anthropic_tools, openai_tools

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_RECALL_TIMEOUT",
    "PHASES",
    "TOOL_NAMES",
    "Chain",
    "IdempotencyKeyReused",
    "IllegalTransition",
    "InvalidRequest",
    "InvalidToolCall",
    "MalformedAnswer",
    "Memory",
    "MemoryEvent",
    "MemoryRecord",
    "NotFound",
    "Phase",
    "RateLimited",
    "Recall",
    "Related",
    "ServiceError",
    "ServiceUnavailable",
    "TimothyError",
    "ToolResult",
    "Unauthorized",
    "Unreachable",
    "anthropic_tools",
    "compose_system",
    "openai_tools",
]
