from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor
PAYLOAD_FIELD_NUMBER: _ClassVar[int]
payload: _descriptor.FieldDescriptor

class PayloadRule(_message.Message):
    __slots__ = ("always_present", "local_only", "inline")
    ALWAYS_PRESENT_FIELD_NUMBER: _ClassVar[int]
    LOCAL_ONLY_FIELD_NUMBER: _ClassVar[int]
    INLINE_FIELD_NUMBER: _ClassVar[int]
    always_present: bool
    local_only: bool
    inline: bool
    def __init__(self, always_present: _Optional[bool] = ..., local_only: _Optional[bool] = ..., inline: _Optional[bool] = ...) -> None: ...
