from agenthooks_client.v1 import events_pb2 as _events_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModifyPoint(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODIFY_POINT_UNSPECIFIED: _ClassVar[ModifyPoint]
    MODIFY_POINT_BEFORE_AGENT_START: _ClassVar[ModifyPoint]
    MODIFY_POINT_BEFORE_TOOL_CALL: _ClassVar[ModifyPoint]
    MODIFY_POINT_AFTER_TOOL_CALL: _ClassVar[ModifyPoint]
    MODIFY_POINT_PREPARE_NEXT_TURN: _ClassVar[ModifyPoint]
    MODIFY_POINT_TRANSFORM_CONTEXT: _ClassVar[ModifyPoint]
    MODIFY_POINT_BEFORE_PROVIDER_REQUEST: _ClassVar[ModifyPoint]
    MODIFY_POINT_BEFORE_PROVIDER_PAYLOAD: _ClassVar[ModifyPoint]
    MODIFY_POINT_AFTER_PROVIDER_RESPONSE: _ClassVar[ModifyPoint]
    MODIFY_POINT_SHOULD_STOP_AFTER_TURN: _ClassVar[ModifyPoint]
    MODIFY_POINT_GET_STEERING_MESSAGES: _ClassVar[ModifyPoint]
    MODIFY_POINT_GET_FOLLOW_UP_MESSAGES: _ClassVar[ModifyPoint]
    MODIFY_POINT_BEFORE_COMPACT: _ClassVar[ModifyPoint]

class Delivery(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELIVERY_UNSPECIFIED: _ClassVar[Delivery]
    DELIVERY_FETCH: _ClassVar[Delivery]
    DELIVERY_QSTASH: _ClassVar[Delivery]

class Fallback(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FALLBACK_UNSPECIFIED: _ClassVar[Fallback]
    FALLBACK_FETCH: _ClassVar[Fallback]
    FALLBACK_NONE: _ClassVar[Fallback]

class ResponseHandling(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESPONSE_HANDLING_UNSPECIFIED: _ClassVar[ResponseHandling]
    RESPONSE_HANDLING_IGNORE: _ClassVar[ResponseHandling]
    RESPONSE_HANDLING_TOOL_CALL: _ClassVar[ResponseHandling]

class OnError(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ON_ERROR_UNSPECIFIED: _ClassVar[OnError]
    ON_ERROR_CONTINUE: _ClassVar[OnError]
    ON_ERROR_BLOCK: _ClassVar[OnError]
MODIFY_POINT_UNSPECIFIED: ModifyPoint
MODIFY_POINT_BEFORE_AGENT_START: ModifyPoint
MODIFY_POINT_BEFORE_TOOL_CALL: ModifyPoint
MODIFY_POINT_AFTER_TOOL_CALL: ModifyPoint
MODIFY_POINT_PREPARE_NEXT_TURN: ModifyPoint
MODIFY_POINT_TRANSFORM_CONTEXT: ModifyPoint
MODIFY_POINT_BEFORE_PROVIDER_REQUEST: ModifyPoint
MODIFY_POINT_BEFORE_PROVIDER_PAYLOAD: ModifyPoint
MODIFY_POINT_AFTER_PROVIDER_RESPONSE: ModifyPoint
MODIFY_POINT_SHOULD_STOP_AFTER_TURN: ModifyPoint
MODIFY_POINT_GET_STEERING_MESSAGES: ModifyPoint
MODIFY_POINT_GET_FOLLOW_UP_MESSAGES: ModifyPoint
MODIFY_POINT_BEFORE_COMPACT: ModifyPoint
DELIVERY_UNSPECIFIED: Delivery
DELIVERY_FETCH: Delivery
DELIVERY_QSTASH: Delivery
FALLBACK_UNSPECIFIED: Fallback
FALLBACK_FETCH: Fallback
FALLBACK_NONE: Fallback
RESPONSE_HANDLING_UNSPECIFIED: ResponseHandling
RESPONSE_HANDLING_IGNORE: ResponseHandling
RESPONSE_HANDLING_TOOL_CALL: ResponseHandling
ON_ERROR_UNSPECIFIED: OnError
ON_ERROR_CONTINUE: OnError
ON_ERROR_BLOCK: OnError

class Hook(_message.Message):
    __slots__ = ("id", "type", "matcher", "handler", "webhook", "point", "plugin")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MATCHER_FIELD_NUMBER: _ClassVar[int]
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    POINT_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: _events_pb2.HookType
    matcher: str
    handler: bool
    webhook: Webhook
    point: ModifyPoint
    plugin: str
    def __init__(self, id: _Optional[str] = ..., type: _Optional[_Union[_events_pb2.HookType, str]] = ..., matcher: _Optional[str] = ..., handler: _Optional[bool] = ..., webhook: _Optional[_Union[Webhook, _Mapping]] = ..., point: _Optional[_Union[ModifyPoint, str]] = ..., plugin: _Optional[str] = ...) -> None: ...

class EventFields(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class Webhook(_message.Message):
    __slots__ = ("url", "delivery", "fallback", "timeout", "headers", "allowed_env_vars", "body", "event_fields", "response_handling", "on_error", "signing_secret")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_ENV_VARS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELDS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_HANDLING_FIELD_NUMBER: _ClassVar[int]
    ON_ERROR_FIELD_NUMBER: _ClassVar[int]
    SIGNING_SECRET_FIELD_NUMBER: _ClassVar[int]
    url: str
    delivery: Delivery
    fallback: Fallback
    timeout: float
    headers: _containers.ScalarMap[str, str]
    allowed_env_vars: _containers.RepeatedScalarFieldContainer[str]
    body: _struct_pb2.Struct
    event_fields: EventFields
    response_handling: ResponseHandling
    on_error: OnError
    signing_secret: str
    def __init__(self, url: _Optional[str] = ..., delivery: _Optional[_Union[Delivery, str]] = ..., fallback: _Optional[_Union[Fallback, str]] = ..., timeout: _Optional[float] = ..., headers: _Optional[_Mapping[str, str]] = ..., allowed_env_vars: _Optional[_Iterable[str]] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., event_fields: _Optional[_Union[EventFields, _Mapping]] = ..., response_handling: _Optional[_Union[ResponseHandling, str]] = ..., on_error: _Optional[_Union[OnError, str]] = ..., signing_secret: _Optional[str] = ...) -> None: ...
