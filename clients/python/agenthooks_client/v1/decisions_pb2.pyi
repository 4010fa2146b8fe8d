import datetime

from agenthooks_client.v1 import events_pb2 as _events_pb2
from agenthooks_client.v1 import hooks_pb2 as _hooks_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DenyClassification(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DENY_CLASSIFICATION_UNSPECIFIED: _ClassVar[DenyClassification]
    DENY_CLASSIFICATION_HOOK_DENIED: _ClassVar[DenyClassification]
    DENY_CLASSIFICATION_HOOK_CONTROL_ERROR: _ClassVar[DenyClassification]

class HookOutcomeStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HOOK_OUTCOME_STATUS_UNSPECIFIED: _ClassVar[HookOutcomeStatus]
    HOOK_OUTCOME_STATUS_DELIVERED: _ClassVar[HookOutcomeStatus]
    HOOK_OUTCOME_STATUS_HANDLED: _ClassVar[HookOutcomeStatus]
    HOOK_OUTCOME_STATUS_SKIPPED: _ClassVar[HookOutcomeStatus]
    HOOK_OUTCOME_STATUS_FAILED: _ClassVar[HookOutcomeStatus]
    HOOK_OUTCOME_STATUS_ALLOWED: _ClassVar[HookOutcomeStatus]
    HOOK_OUTCOME_STATUS_DENIED: _ClassVar[HookOutcomeStatus]
    HOOK_OUTCOME_STATUS_IGNORED: _ClassVar[HookOutcomeStatus]
    HOOK_OUTCOME_STATUS_CANCELLED: _ClassVar[HookOutcomeStatus]

class HookSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HOOK_SOURCE_UNSPECIFIED: _ClassVar[HookSource]
    HOOK_SOURCE_CALLER: _ClassVar[HookSource]
    HOOK_SOURCE_ENVIRONMENT: _ClassVar[HookSource]
    HOOK_SOURCE_OPERATOR: _ClassVar[HookSource]
DENY_CLASSIFICATION_UNSPECIFIED: DenyClassification
DENY_CLASSIFICATION_HOOK_DENIED: DenyClassification
DENY_CLASSIFICATION_HOOK_CONTROL_ERROR: DenyClassification
HOOK_OUTCOME_STATUS_UNSPECIFIED: HookOutcomeStatus
HOOK_OUTCOME_STATUS_DELIVERED: HookOutcomeStatus
HOOK_OUTCOME_STATUS_HANDLED: HookOutcomeStatus
HOOK_OUTCOME_STATUS_SKIPPED: HookOutcomeStatus
HOOK_OUTCOME_STATUS_FAILED: HookOutcomeStatus
HOOK_OUTCOME_STATUS_ALLOWED: HookOutcomeStatus
HOOK_OUTCOME_STATUS_DENIED: HookOutcomeStatus
HOOK_OUTCOME_STATUS_IGNORED: HookOutcomeStatus
HOOK_OUTCOME_STATUS_CANCELLED: HookOutcomeStatus
HOOK_SOURCE_UNSPECIFIED: HookSource
HOOK_SOURCE_CALLER: HookSource
HOOK_SOURCE_ENVIRONMENT: HookSource
HOOK_SOURCE_OPERATOR: HookSource

class Decision(_message.Message):
    __slots__ = ("allow", "deny", "mock")
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    DENY_FIELD_NUMBER: _ClassVar[int]
    MOCK_FIELD_NUMBER: _ClassVar[int]
    allow: Allow
    deny: Deny
    mock: Mock
    def __init__(self, allow: _Optional[_Union[Allow, _Mapping]] = ..., deny: _Optional[_Union[Deny, _Mapping]] = ..., mock: _Optional[_Union[Mock, _Mapping]] = ...) -> None: ...

class Allow(_message.Message):
    __slots__ = ("controls_consulted",)
    CONTROLS_CONSULTED_FIELD_NUMBER: _ClassVar[int]
    controls_consulted: int
    def __init__(self, controls_consulted: _Optional[int] = ...) -> None: ...

class Deny(_message.Message):
    __slots__ = ("reason", "classification", "hook_id", "operation_id", "blocked_result")
    REASON_FIELD_NUMBER: _ClassVar[int]
    CLASSIFICATION_FIELD_NUMBER: _ClassVar[int]
    HOOK_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_RESULT_FIELD_NUMBER: _ClassVar[int]
    reason: str
    classification: DenyClassification
    hook_id: str
    operation_id: str
    blocked_result: _events_pb2.ToolResult
    def __init__(self, reason: _Optional[str] = ..., classification: _Optional[_Union[DenyClassification, str]] = ..., hook_id: _Optional[str] = ..., operation_id: _Optional[str] = ..., blocked_result: _Optional[_Union[_events_pb2.ToolResult, _Mapping]] = ...) -> None: ...

class Mock(_message.Message):
    __slots__ = ("result", "hook_id")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    HOOK_ID_FIELD_NUMBER: _ClassVar[int]
    result: _events_pb2.ToolResult
    hook_id: str
    def __init__(self, result: _Optional[_Union[_events_pb2.ToolResult, _Mapping]] = ..., hook_id: _Optional[str] = ...) -> None: ...

class HookOutcome(_message.Message):
    __slots__ = ("hook_id", "hook_type", "operation_id", "source", "status", "error_code", "message", "http_status", "duration", "critical", "point", "plugin")
    HOOK_ID_FIELD_NUMBER: _ClassVar[int]
    HOOK_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    CRITICAL_FIELD_NUMBER: _ClassVar[int]
    POINT_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    hook_id: str
    hook_type: _events_pb2.HookType
    operation_id: str
    source: HookSource
    status: HookOutcomeStatus
    error_code: str
    message: str
    http_status: int
    duration: _duration_pb2.Duration
    critical: bool
    point: _hooks_pb2.ModifyPoint
    plugin: str
    def __init__(self, hook_id: _Optional[str] = ..., hook_type: _Optional[_Union[_events_pb2.HookType, str]] = ..., operation_id: _Optional[str] = ..., source: _Optional[_Union[HookSource, str]] = ..., status: _Optional[_Union[HookOutcomeStatus, str]] = ..., error_code: _Optional[str] = ..., message: _Optional[str] = ..., http_status: _Optional[int] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., critical: _Optional[bool] = ..., point: _Optional[_Union[_hooks_pb2.ModifyPoint, str]] = ..., plugin: _Optional[str] = ...) -> None: ...
