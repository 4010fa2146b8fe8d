import datetime

from agenthooks_client.v1 import audit_pb2 as _audit_pb2
from agenthooks_client.v1 import decisions_pb2 as _decisions_pb2
from agenthooks_client.v1 import events_pb2 as _events_pb2
from agenthooks_client.v1 import hooks_pb2 as _hooks_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ParkKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PARK_KIND_UNSPECIFIED: _ClassVar[ParkKind]
    PARK_KIND_DEFERRED: _ClassVar[ParkKind]
    PARK_KIND_HUMAN_APPROVAL: _ClassVar[ParkKind]
PARK_KIND_UNSPECIFIED: ParkKind
PARK_KIND_DEFERRED: ParkKind
PARK_KIND_HUMAN_APPROVAL: ParkKind

class ModifyRequest(_message.Message):
    __slots__ = ("operation_id", "point", "context_json")
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    POINT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    point: _hooks_pb2.ModifyPoint
    context_json: str
    def __init__(self, operation_id: _Optional[str] = ..., point: _Optional[_Union[_hooks_pb2.ModifyPoint, str]] = ..., context_json: _Optional[str] = ...) -> None: ...

class ModifyResponse(_message.Message):
    __slots__ = ("result_json", "blocked", "outcomes", "decision_id")
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    result_json: str
    blocked: ModifyBlocked
    outcomes: _containers.RepeatedCompositeFieldContainer[_decisions_pb2.HookOutcome]
    decision_id: str
    def __init__(self, result_json: _Optional[str] = ..., blocked: _Optional[_Union[ModifyBlocked, _Mapping]] = ..., outcomes: _Optional[_Iterable[_Union[_decisions_pb2.HookOutcome, _Mapping]]] = ..., decision_id: _Optional[str] = ...) -> None: ...

class ModifyBlocked(_message.Message):
    __slots__ = ("hook_id", "error_code", "message")
    HOOK_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    hook_id: str
    error_code: str
    message: str
    def __init__(self, hook_id: _Optional[str] = ..., error_code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class RegisterHooksRequest(_message.Message):
    __slots__ = ("operation_id", "parent_operation_id", "hooks")
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    HOOKS_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    parent_operation_id: str
    hooks: _containers.RepeatedCompositeFieldContainer[_hooks_pb2.Hook]
    def __init__(self, operation_id: _Optional[str] = ..., parent_operation_id: _Optional[str] = ..., hooks: _Optional[_Iterable[_Union[_hooks_pb2.Hook, _Mapping]]] = ...) -> None: ...

class RegisterHooksResponse(_message.Message):
    __slots__ = ("hook_count",)
    HOOK_COUNT_FIELD_NUMBER: _ClassVar[int]
    hook_count: int
    def __init__(self, hook_count: _Optional[int] = ...) -> None: ...

class UnregisterHooksRequest(_message.Message):
    __slots__ = ("operation_id", "purge", "plugin")
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    PURGE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    purge: bool
    plugin: str
    def __init__(self, operation_id: _Optional[str] = ..., purge: _Optional[bool] = ..., plugin: _Optional[str] = ...) -> None: ...

class UnregisterHooksResponse(_message.Message):
    __slots__ = ("handlers_dropped", "hooks_purged")
    HANDLERS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    HOOKS_PURGED_FIELD_NUMBER: _ClassVar[int]
    handlers_dropped: int
    hooks_purged: int
    def __init__(self, handlers_dropped: _Optional[int] = ..., hooks_purged: _Optional[int] = ...) -> None: ...

class ListHooksRequest(_message.Message):
    __slots__ = ("operation_id",)
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    def __init__(self, operation_id: _Optional[str] = ...) -> None: ...

class ListHooksResponse(_message.Message):
    __slots__ = ("hooks", "parent_operation_id", "handler_attached")
    HOOKS_FIELD_NUMBER: _ClassVar[int]
    PARENT_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLER_ATTACHED_FIELD_NUMBER: _ClassVar[int]
    hooks: _containers.RepeatedCompositeFieldContainer[_hooks_pb2.Hook]
    parent_operation_id: str
    handler_attached: bool
    def __init__(self, hooks: _Optional[_Iterable[_Union[_hooks_pb2.Hook, _Mapping]]] = ..., parent_operation_id: _Optional[str] = ..., handler_attached: _Optional[bool] = ...) -> None: ...

class DispatchRequest(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _events_pb2.HookEvent
    def __init__(self, event: _Optional[_Union[_events_pb2.HookEvent, _Mapping]] = ...) -> None: ...

class DispatchResponse(_message.Message):
    __slots__ = ("outcomes",)
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[_decisions_pb2.HookOutcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[_decisions_pb2.HookOutcome, _Mapping]]] = ...) -> None: ...

class DispatchStreamRequest(_message.Message):
    __slots__ = ("event_id", "event")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    event: _events_pb2.HookEvent
    def __init__(self, event_id: _Optional[str] = ..., event: _Optional[_Union[_events_pb2.HookEvent, _Mapping]] = ...) -> None: ...

class DispatchStreamResponse(_message.Message):
    __slots__ = ("event_id", "outcomes", "error")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    outcomes: _containers.RepeatedCompositeFieldContainer[_decisions_pb2.HookOutcome]
    error: StreamError
    def __init__(self, event_id: _Optional[str] = ..., outcomes: _Optional[_Iterable[_Union[_decisions_pb2.HookOutcome, _Mapping]]] = ..., error: _Optional[_Union[StreamError, _Mapping]] = ...) -> None: ...

class StreamError(_message.Message):
    __slots__ = ("code", "reason", "message", "hook_id", "status")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HOOK_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    code: int
    reason: str
    message: str
    hook_id: str
    status: _status_pb2.Status
    def __init__(self, code: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., hook_id: _Optional[str] = ..., status: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class DecideToolCallRequest(_message.Message):
    __slots__ = ("event", "operation_chain")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_CHAIN_FIELD_NUMBER: _ClassVar[int]
    event: _events_pb2.BeforeToolCallEvent
    operation_chain: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, event: _Optional[_Union[_events_pb2.BeforeToolCallEvent, _Mapping]] = ..., operation_chain: _Optional[_Iterable[str]] = ...) -> None: ...

class DecideToolCallResponse(_message.Message):
    __slots__ = ("decision", "outcomes", "unknown_operations", "decision_id")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    decision: _decisions_pb2.Decision
    outcomes: _containers.RepeatedCompositeFieldContainer[_decisions_pb2.HookOutcome]
    unknown_operations: _containers.RepeatedScalarFieldContainer[str]
    decision_id: str
    def __init__(self, decision: _Optional[_Union[_decisions_pb2.Decision, _Mapping]] = ..., outcomes: _Optional[_Iterable[_Union[_decisions_pb2.HookOutcome, _Mapping]]] = ..., unknown_operations: _Optional[_Iterable[str]] = ..., decision_id: _Optional[str] = ...) -> None: ...

class DecideToolResultRequest(_message.Message):
    __slots__ = ("event", "operation_chain")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_CHAIN_FIELD_NUMBER: _ClassVar[int]
    event: _events_pb2.AfterToolCallEvent
    operation_chain: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, event: _Optional[_Union[_events_pb2.AfterToolCallEvent, _Mapping]] = ..., operation_chain: _Optional[_Iterable[str]] = ...) -> None: ...

class DecideToolResultResponse(_message.Message):
    __slots__ = ("decision", "outcomes", "unknown_operations", "decision_id")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    decision: _decisions_pb2.Decision
    outcomes: _containers.RepeatedCompositeFieldContainer[_decisions_pb2.HookOutcome]
    unknown_operations: _containers.RepeatedScalarFieldContainer[str]
    decision_id: str
    def __init__(self, decision: _Optional[_Union[_decisions_pb2.Decision, _Mapping]] = ..., outcomes: _Optional[_Iterable[_Union[_decisions_pb2.HookOutcome, _Mapping]]] = ..., unknown_operations: _Optional[_Iterable[str]] = ..., decision_id: _Optional[str] = ...) -> None: ...

class ParkedCall(_message.Message):
    __slots__ = ("context", "operation_chain", "kind", "parked_at", "final_result")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_CHAIN_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PARKED_AT_FIELD_NUMBER: _ClassVar[int]
    FINAL_RESULT_FIELD_NUMBER: _ClassVar[int]
    context: _events_pb2.ToolCallContext
    operation_chain: _containers.RepeatedScalarFieldContainer[str]
    kind: ParkKind
    parked_at: _timestamp_pb2.Timestamp
    final_result: _events_pb2.ToolResult
    def __init__(self, context: _Optional[_Union[_events_pb2.ToolCallContext, _Mapping]] = ..., operation_chain: _Optional[_Iterable[str]] = ..., kind: _Optional[_Union[ParkKind, str]] = ..., parked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., final_result: _Optional[_Union[_events_pb2.ToolResult, _Mapping]] = ...) -> None: ...

class ParkToolCallRequest(_message.Message):
    __slots__ = ("context", "operation_chain", "kind")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_CHAIN_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    context: _events_pb2.ToolCallContext
    operation_chain: _containers.RepeatedScalarFieldContainer[str]
    kind: ParkKind
    def __init__(self, context: _Optional[_Union[_events_pb2.ToolCallContext, _Mapping]] = ..., operation_chain: _Optional[_Iterable[str]] = ..., kind: _Optional[_Union[ParkKind, str]] = ...) -> None: ...

class ParkToolCallResponse(_message.Message):
    __slots__ = ("record", "created")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    record: ParkedCall
    created: bool
    def __init__(self, record: _Optional[_Union[ParkedCall, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class PublishDeferredResultRequest(_message.Message):
    __slots__ = ("tool_call_id", "result", "operation_chain")
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_CHAIN_FIELD_NUMBER: _ClassVar[int]
    tool_call_id: str
    result: _events_pb2.ToolResult
    operation_chain: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tool_call_id: _Optional[str] = ..., result: _Optional[_Union[_events_pb2.ToolResult, _Mapping]] = ..., operation_chain: _Optional[_Iterable[str]] = ...) -> None: ...

class PublishDeferredResultResponse(_message.Message):
    __slots__ = ("final_result", "published", "decision_id")
    FINAL_RESULT_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    final_result: _events_pb2.ToolResult
    published: bool
    decision_id: str
    def __init__(self, final_result: _Optional[_Union[_events_pb2.ToolResult, _Mapping]] = ..., published: _Optional[bool] = ..., decision_id: _Optional[str] = ...) -> None: ...

class CompleteOperationRequest(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _events_pb2.OnCompleteEvent
    def __init__(self, event: _Optional[_Union[_events_pb2.OnCompleteEvent, _Mapping]] = ...) -> None: ...

class CompleteOperationResponse(_message.Message):
    __slots__ = ("outcomes", "handlers_dropped")
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    HANDLERS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[_decisions_pb2.HookOutcome]
    handlers_dropped: bool
    def __init__(self, outcomes: _Optional[_Iterable[_Union[_decisions_pb2.HookOutcome, _Mapping]]] = ..., handlers_dropped: _Optional[bool] = ...) -> None: ...

class HandleRequest(_message.Message):
    __slots__ = ("attach", "detach", "reply")
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    DETACH_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    attach: HandleAttach
    detach: HandleDetach
    reply: HandlerReply
    def __init__(self, attach: _Optional[_Union[HandleAttach, _Mapping]] = ..., detach: _Optional[_Union[HandleDetach, _Mapping]] = ..., reply: _Optional[_Union[HandlerReply, _Mapping]] = ...) -> None: ...

class HandleAttach(_message.Message):
    __slots__ = ("operation_ids",)
    OPERATION_IDS_FIELD_NUMBER: _ClassVar[int]
    operation_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, operation_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class HandleDetach(_message.Message):
    __slots__ = ("operation_ids",)
    OPERATION_IDS_FIELD_NUMBER: _ClassVar[int]
    operation_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, operation_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class HandlerReply(_message.Message):
    __slots__ = ("call_id", "done", "mock", "error", "modified")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    MOCK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    done: HandlerDone
    mock: HandlerMock
    error: HandlerError
    modified: HandlerModified
    def __init__(self, call_id: _Optional[str] = ..., done: _Optional[_Union[HandlerDone, _Mapping]] = ..., mock: _Optional[_Union[HandlerMock, _Mapping]] = ..., error: _Optional[_Union[HandlerError, _Mapping]] = ..., modified: _Optional[_Union[HandlerModified, _Mapping]] = ...) -> None: ...

class HandlerModified(_message.Message):
    __slots__ = ("result_json",)
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    result_json: str
    def __init__(self, result_json: _Optional[str] = ...) -> None: ...

class HandlerDone(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HandlerMock(_message.Message):
    __slots__ = ("result", "error")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    result: _events_pb2.ToolResult
    error: str
    def __init__(self, result: _Optional[_Union[_events_pb2.ToolResult, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class HandlerError(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class HandleResponse(_message.Message):
    __slots__ = ("attached", "call", "replaced")
    ATTACHED_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    attached: HandleAttached
    call: HandlerCall
    replaced: HandleReplaced
    def __init__(self, attached: _Optional[_Union[HandleAttached, _Mapping]] = ..., call: _Optional[_Union[HandlerCall, _Mapping]] = ..., replaced: _Optional[_Union[HandleReplaced, _Mapping]] = ...) -> None: ...

class HandleAttached(_message.Message):
    __slots__ = ("operation_ids",)
    OPERATION_IDS_FIELD_NUMBER: _ClassVar[int]
    operation_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, operation_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class HandlerCall(_message.Message):
    __slots__ = ("call_id", "hook_id", "event", "point", "context_json", "plugin", "operation_id")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    HOOK_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    POINT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    hook_id: str
    event: _events_pb2.HookEvent
    point: _hooks_pb2.ModifyPoint
    context_json: str
    plugin: str
    operation_id: str
    def __init__(self, call_id: _Optional[str] = ..., hook_id: _Optional[str] = ..., event: _Optional[_Union[_events_pb2.HookEvent, _Mapping]] = ..., point: _Optional[_Union[_hooks_pb2.ModifyPoint, str]] = ..., context_json: _Optional[str] = ..., plugin: _Optional[str] = ..., operation_id: _Optional[str] = ...) -> None: ...

class HandleReplaced(_message.Message):
    __slots__ = ("operation_ids",)
    OPERATION_IDS_FIELD_NUMBER: _ClassVar[int]
    operation_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, operation_ids: _Optional[_Iterable[str]] = ...) -> None: ...
