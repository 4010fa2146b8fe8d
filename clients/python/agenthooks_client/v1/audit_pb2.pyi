import datetime

from agenthooks_client.v1 import decisions_pb2 as _decisions_pb2
from agenthooks_client.v1 import hooks_pb2 as _hooks_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DecisionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_KIND_UNSPECIFIED: _ClassVar[DecisionKind]
    DECISION_KIND_TOOL_CALL: _ClassVar[DecisionKind]
    DECISION_KIND_TOOL_RESULT: _ClassVar[DecisionKind]
    DECISION_KIND_PUBLICATION: _ClassVar[DecisionKind]
    DECISION_KIND_MODIFY: _ClassVar[DecisionKind]

class DecisionOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_OUTCOME_UNSPECIFIED: _ClassVar[DecisionOutcome]
    DECISION_OUTCOME_ALLOW: _ClassVar[DecisionOutcome]
    DECISION_OUTCOME_DENY: _ClassVar[DecisionOutcome]
    DECISION_OUTCOME_MOCK: _ClassVar[DecisionOutcome]
    DECISION_OUTCOME_MODIFIED: _ClassVar[DecisionOutcome]
    DECISION_OUTCOME_UNCHANGED: _ClassVar[DecisionOutcome]
    DECISION_OUTCOME_BLOCKED: _ClassVar[DecisionOutcome]
DECISION_KIND_UNSPECIFIED: DecisionKind
DECISION_KIND_TOOL_CALL: DecisionKind
DECISION_KIND_TOOL_RESULT: DecisionKind
DECISION_KIND_PUBLICATION: DecisionKind
DECISION_KIND_MODIFY: DecisionKind
DECISION_OUTCOME_UNSPECIFIED: DecisionOutcome
DECISION_OUTCOME_ALLOW: DecisionOutcome
DECISION_OUTCOME_DENY: DecisionOutcome
DECISION_OUTCOME_MOCK: DecisionOutcome
DECISION_OUTCOME_MODIFIED: DecisionOutcome
DECISION_OUTCOME_UNCHANGED: DecisionOutcome
DECISION_OUTCOME_BLOCKED: DecisionOutcome

class DecisionRecord(_message.Message):
    __slots__ = ("decision_id", "time", "kind", "operation_id", "operation_chain", "tool_call_id", "identifier", "api_name", "point", "outcome", "reason", "classification", "hook_id", "outcomes", "duration", "payload_json")
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATION_CHAIN_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    API_NAME_FIELD_NUMBER: _ClassVar[int]
    POINT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CLASSIFICATION_FIELD_NUMBER: _ClassVar[int]
    HOOK_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    decision_id: str
    time: _timestamp_pb2.Timestamp
    kind: DecisionKind
    operation_id: str
    operation_chain: _containers.RepeatedScalarFieldContainer[str]
    tool_call_id: str
    identifier: str
    api_name: str
    point: _hooks_pb2.ModifyPoint
    outcome: DecisionOutcome
    reason: str
    classification: _decisions_pb2.DenyClassification
    hook_id: str
    outcomes: _containers.RepeatedCompositeFieldContainer[_decisions_pb2.HookOutcome]
    duration: _duration_pb2.Duration
    payload_json: str
    def __init__(self, decision_id: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[_Union[DecisionKind, str]] = ..., operation_id: _Optional[str] = ..., operation_chain: _Optional[_Iterable[str]] = ..., tool_call_id: _Optional[str] = ..., identifier: _Optional[str] = ..., api_name: _Optional[str] = ..., point: _Optional[_Union[_hooks_pb2.ModifyPoint, str]] = ..., outcome: _Optional[_Union[DecisionOutcome, str]] = ..., reason: _Optional[str] = ..., classification: _Optional[_Union[_decisions_pb2.DenyClassification, str]] = ..., hook_id: _Optional[str] = ..., outcomes: _Optional[_Iterable[_Union[_decisions_pb2.HookOutcome, _Mapping]]] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., payload_json: _Optional[str] = ...) -> None: ...

class ListDecisionsRequest(_message.Message):
    __slots__ = ("operation_id", "start_time", "end_time", "outcome", "page_size", "page_token")
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    outcome: DecisionOutcome
    page_size: int
    page_token: str
    def __init__(self, operation_id: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[_Union[DecisionOutcome, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListDecisionsResponse(_message.Message):
    __slots__ = ("decisions", "next_page_token")
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    decisions: _containers.RepeatedCompositeFieldContainer[DecisionRecord]
    next_page_token: str
    def __init__(self, decisions: _Optional[_Iterable[_Union[DecisionRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
