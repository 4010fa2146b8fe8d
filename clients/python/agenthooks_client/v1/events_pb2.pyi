from agenthooks_client.v1 import payload_options_pb2 as _payload_options_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HookType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HOOK_TYPE_UNSPECIFIED: _ClassVar[HookType]
    HOOK_TYPE_BEFORE_STEP: _ClassVar[HookType]
    HOOK_TYPE_AFTER_STEP: _ClassVar[HookType]
    HOOK_TYPE_ON_COMPLETE: _ClassVar[HookType]
    HOOK_TYPE_ON_ERROR: _ClassVar[HookType]
    HOOK_TYPE_BEFORE_TOOL_CALL: _ClassVar[HookType]
    HOOK_TYPE_AFTER_TOOL_CALL: _ClassVar[HookType]
    HOOK_TYPE_ON_TOOL_CALL_ERROR: _ClassVar[HookType]
    HOOK_TYPE_BEFORE_HUMAN_INTERVENTION: _ClassVar[HookType]
    HOOK_TYPE_AFTER_HUMAN_INTERVENTION: _ClassVar[HookType]
    HOOK_TYPE_ON_STOP_BY_HUMAN_INTERVENTION: _ClassVar[HookType]
    HOOK_TYPE_BEFORE_COMPACT: _ClassVar[HookType]
    HOOK_TYPE_AFTER_COMPACT: _ClassVar[HookType]
    HOOK_TYPE_ON_COMPACT_ERROR: _ClassVar[HookType]
    HOOK_TYPE_BEFORE_CALL_AGENT: _ClassVar[HookType]
    HOOK_TYPE_AFTER_CALL_AGENT: _ClassVar[HookType]
    HOOK_TYPE_ON_CALL_AGENT_ERROR: _ClassVar[HookType]

class Executor(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXECUTOR_UNSPECIFIED: _ClassVar[Executor]
    EXECUTOR_SERVER: _ClassVar[Executor]
    EXECUTOR_CLIENT: _ClassVar[Executor]

class AttachmentType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ATTACHMENT_TYPE_UNSPECIFIED: _ClassVar[AttachmentType]
    ATTACHMENT_TYPE_IMAGE: _ClassVar[AttachmentType]
    ATTACHMENT_TYPE_FILE: _ClassVar[AttachmentType]
    ATTACHMENT_TYPE_VIDEO: _ClassVar[AttachmentType]
    ATTACHMENT_TYPE_AUDIO: _ClassVar[AttachmentType]

class HumanAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HUMAN_ACTION_UNSPECIFIED: _ClassVar[HumanAction]
    HUMAN_ACTION_APPROVE: _ClassVar[HumanAction]
    HUMAN_ACTION_REJECT: _ClassVar[HumanAction]
    HUMAN_ACTION_REJECT_AND_CONTINUE: _ClassVar[HumanAction]
HOOK_TYPE_UNSPECIFIED: HookType
HOOK_TYPE_BEFORE_STEP: HookType
HOOK_TYPE_AFTER_STEP: HookType
HOOK_TYPE_ON_COMPLETE: HookType
HOOK_TYPE_ON_ERROR: HookType
HOOK_TYPE_BEFORE_TOOL_CALL: HookType
HOOK_TYPE_AFTER_TOOL_CALL: HookType
HOOK_TYPE_ON_TOOL_CALL_ERROR: HookType
HOOK_TYPE_BEFORE_HUMAN_INTERVENTION: HookType
HOOK_TYPE_AFTER_HUMAN_INTERVENTION: HookType
HOOK_TYPE_ON_STOP_BY_HUMAN_INTERVENTION: HookType
HOOK_TYPE_BEFORE_COMPACT: HookType
HOOK_TYPE_AFTER_COMPACT: HookType
HOOK_TYPE_ON_COMPACT_ERROR: HookType
HOOK_TYPE_BEFORE_CALL_AGENT: HookType
HOOK_TYPE_AFTER_CALL_AGENT: HookType
HOOK_TYPE_ON_CALL_AGENT_ERROR: HookType
EXECUTOR_UNSPECIFIED: Executor
EXECUTOR_SERVER: Executor
EXECUTOR_CLIENT: Executor
ATTACHMENT_TYPE_UNSPECIFIED: AttachmentType
ATTACHMENT_TYPE_IMAGE: AttachmentType
ATTACHMENT_TYPE_FILE: AttachmentType
ATTACHMENT_TYPE_VIDEO: AttachmentType
ATTACHMENT_TYPE_AUDIO: AttachmentType
HUMAN_ACTION_UNSPECIFIED: HumanAction
HUMAN_ACTION_APPROVE: HumanAction
HUMAN_ACTION_REJECT: HumanAction
HUMAN_ACTION_REJECT_AND_CONTINUE: HumanAction

class ToolCallContext(_message.Message):
    __slots__ = ("tool_call_id", "assistant_message_id", "identifier", "api_name", "args", "call_index", "step_index", "operation_id", "executor", "active_device_id", "agent_id", "document_id", "execution_target", "group_id", "parent_operation_id", "session_id", "source_message_id", "task_id", "thread_id", "tool_message_id", "tool_source", "topic_id", "user_id", "workspace_id")
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ASSISTANT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    API_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    CALL_INDEX_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TARGET_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_SOURCE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    tool_call_id: str
    assistant_message_id: str
    identifier: str
    api_name: str
    args: _struct_pb2.Struct
    call_index: int
    step_index: int
    operation_id: str
    executor: Executor
    active_device_id: str
    agent_id: str
    document_id: str
    execution_target: str
    group_id: str
    parent_operation_id: str
    session_id: str
    source_message_id: str
    task_id: str
    thread_id: str
    tool_message_id: str
    tool_source: str
    topic_id: str
    user_id: str
    workspace_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., assistant_message_id: _Optional[str] = ..., identifier: _Optional[str] = ..., api_name: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., call_index: _Optional[int] = ..., step_index: _Optional[int] = ..., operation_id: _Optional[str] = ..., executor: _Optional[_Union[Executor, str]] = ..., active_device_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., document_id: _Optional[str] = ..., execution_target: _Optional[str] = ..., group_id: _Optional[str] = ..., parent_operation_id: _Optional[str] = ..., session_id: _Optional[str] = ..., source_message_id: _Optional[str] = ..., task_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., tool_message_id: _Optional[str] = ..., tool_source: _Optional[str] = ..., topic_id: _Optional[str] = ..., user_id: _Optional[str] = ..., workspace_id: _Optional[str] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ("content", "success", "error", "state", "execution_time", "device_execution_time", "stop", "deferred", "work_registration")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_EXECUTION_TIME_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_FIELD_NUMBER: _ClassVar[int]
    WORK_REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    content: str
    success: bool
    error: _struct_pb2.Value
    state: _struct_pb2.Struct
    execution_time: float
    device_execution_time: float
    stop: bool
    deferred: bool
    work_registration: _struct_pb2.Struct
    def __init__(self, content: _Optional[str] = ..., success: _Optional[bool] = ..., error: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., execution_time: _Optional[float] = ..., device_execution_time: _Optional[float] = ..., stop: _Optional[bool] = ..., deferred: _Optional[bool] = ..., work_registration: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Attachment(_message.Message):
    __slots__ = ("type", "data", "fetch_url", "mime_type", "name")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FETCH_URL_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    type: AttachmentType
    data: str
    fetch_url: str
    mime_type: str
    name: str
    def __init__(self, type: _Optional[_Union[AttachmentType, str]] = ..., data: _Optional[str] = ..., fetch_url: _Optional[str] = ..., mime_type: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class BeforeStepEvent(_message.Message):
    __slots__ = ("agent_id", "operation_id", "user_id", "attachments", "content", "reasoning", "thinking", "step_type", "step_label", "cost", "duration", "elapsed_ms", "execution_time_ms", "step_cost", "total_cost", "total_input_tokens", "total_output_tokens", "total_tokens", "total_steps", "total_tool_calls", "tool_calls", "llm_calls", "error_message", "error_detail", "error_type", "error_attribution", "error_budget", "error_heterogeneous", "final_state", "last_assistant_content", "last_llm_content", "last_tools_calling", "tools_calling", "tools_result", "metadata", "reason", "status", "should_continue", "step_index", "steps", "topic_id", "group_id", "parent_operation_id", "thread_id", "workspace_id", "lineage")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    STEP_TYPE_FIELD_NUMBER: _ClassVar[int]
    STEP_LABEL_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    STEP_COST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_STEPS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    LLM_CALLS_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_DETAIL_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    ERROR_ATTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    ERROR_BUDGET_FIELD_NUMBER: _ClassVar[int]
    ERROR_HETEROGENEOUS_FIELD_NUMBER: _ClassVar[int]
    FINAL_STATE_FIELD_NUMBER: _ClassVar[int]
    LAST_ASSISTANT_CONTENT_FIELD_NUMBER: _ClassVar[int]
    LAST_LLM_CONTENT_FIELD_NUMBER: _ClassVar[int]
    LAST_TOOLS_CALLING_FIELD_NUMBER: _ClassVar[int]
    TOOLS_CALLING_FIELD_NUMBER: _ClassVar[int]
    TOOLS_RESULT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SHOULD_CONTINUE_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    operation_id: str
    user_id: str
    attachments: _containers.RepeatedCompositeFieldContainer[Attachment]
    content: str
    reasoning: str
    thinking: bool
    step_type: str
    step_label: str
    cost: float
    duration: float
    elapsed_ms: float
    execution_time_ms: float
    step_cost: float
    total_cost: float
    total_input_tokens: int
    total_output_tokens: int
    total_tokens: int
    total_steps: int
    total_tool_calls: int
    tool_calls: int
    llm_calls: int
    error_message: str
    error_detail: _struct_pb2.Value
    error_type: str
    error_attribution: str
    error_budget: _struct_pb2.Struct
    error_heterogeneous: _struct_pb2.Struct
    final_state: _struct_pb2.Struct
    last_assistant_content: str
    last_llm_content: str
    last_tools_calling: _struct_pb2.Value
    tools_calling: _struct_pb2.Value
    tools_result: _struct_pb2.Value
    metadata: _struct_pb2.Struct
    reason: str
    status: str
    should_continue: bool
    step_index: int
    steps: int
    topic_id: str
    group_id: str
    parent_operation_id: str
    thread_id: str
    workspace_id: str
    lineage: _struct_pb2.Value
    def __init__(self, agent_id: _Optional[str] = ..., operation_id: _Optional[str] = ..., user_id: _Optional[str] = ..., attachments: _Optional[_Iterable[_Union[Attachment, _Mapping]]] = ..., content: _Optional[str] = ..., reasoning: _Optional[str] = ..., thinking: _Optional[bool] = ..., step_type: _Optional[str] = ..., step_label: _Optional[str] = ..., cost: _Optional[float] = ..., duration: _Optional[float] = ..., elapsed_ms: _Optional[float] = ..., execution_time_ms: _Optional[float] = ..., step_cost: _Optional[float] = ..., total_cost: _Optional[float] = ..., total_input_tokens: _Optional[int] = ..., total_output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., total_steps: _Optional[int] = ..., total_tool_calls: _Optional[int] = ..., tool_calls: _Optional[int] = ..., llm_calls: _Optional[int] = ..., error_message: _Optional[str] = ..., error_detail: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error_type: _Optional[str] = ..., error_attribution: _Optional[str] = ..., error_budget: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error_heterogeneous: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., final_state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., last_assistant_content: _Optional[str] = ..., last_llm_content: _Optional[str] = ..., last_tools_calling: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tools_calling: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tools_result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reason: _Optional[str] = ..., status: _Optional[str] = ..., should_continue: _Optional[bool] = ..., step_index: _Optional[int] = ..., steps: _Optional[int] = ..., topic_id: _Optional[str] = ..., group_id: _Optional[str] = ..., parent_operation_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., lineage: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class AfterStepEvent(_message.Message):
    __slots__ = ("agent_id", "operation_id", "user_id", "attachments", "content", "reasoning", "thinking", "step_type", "step_label", "cost", "duration", "elapsed_ms", "execution_time_ms", "step_cost", "total_cost", "total_input_tokens", "total_output_tokens", "total_tokens", "total_steps", "total_tool_calls", "tool_calls", "llm_calls", "error_message", "error_detail", "error_type", "error_attribution", "error_budget", "error_heterogeneous", "final_state", "last_assistant_content", "last_llm_content", "last_tools_calling", "tools_calling", "tools_result", "metadata", "reason", "status", "should_continue", "step_index", "steps", "topic_id", "group_id", "parent_operation_id", "thread_id", "workspace_id", "lineage")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    STEP_TYPE_FIELD_NUMBER: _ClassVar[int]
    STEP_LABEL_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    STEP_COST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_STEPS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    LLM_CALLS_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_DETAIL_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    ERROR_ATTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    ERROR_BUDGET_FIELD_NUMBER: _ClassVar[int]
    ERROR_HETEROGENEOUS_FIELD_NUMBER: _ClassVar[int]
    FINAL_STATE_FIELD_NUMBER: _ClassVar[int]
    LAST_ASSISTANT_CONTENT_FIELD_NUMBER: _ClassVar[int]
    LAST_LLM_CONTENT_FIELD_NUMBER: _ClassVar[int]
    LAST_TOOLS_CALLING_FIELD_NUMBER: _ClassVar[int]
    TOOLS_CALLING_FIELD_NUMBER: _ClassVar[int]
    TOOLS_RESULT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SHOULD_CONTINUE_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    operation_id: str
    user_id: str
    attachments: _containers.RepeatedCompositeFieldContainer[Attachment]
    content: str
    reasoning: str
    thinking: bool
    step_type: str
    step_label: str
    cost: float
    duration: float
    elapsed_ms: float
    execution_time_ms: float
    step_cost: float
    total_cost: float
    total_input_tokens: int
    total_output_tokens: int
    total_tokens: int
    total_steps: int
    total_tool_calls: int
    tool_calls: int
    llm_calls: int
    error_message: str
    error_detail: _struct_pb2.Value
    error_type: str
    error_attribution: str
    error_budget: _struct_pb2.Struct
    error_heterogeneous: _struct_pb2.Struct
    final_state: _struct_pb2.Struct
    last_assistant_content: str
    last_llm_content: str
    last_tools_calling: _struct_pb2.Value
    tools_calling: _struct_pb2.Value
    tools_result: _struct_pb2.Value
    metadata: _struct_pb2.Struct
    reason: str
    status: str
    should_continue: bool
    step_index: int
    steps: int
    topic_id: str
    group_id: str
    parent_operation_id: str
    thread_id: str
    workspace_id: str
    lineage: _struct_pb2.Value
    def __init__(self, agent_id: _Optional[str] = ..., operation_id: _Optional[str] = ..., user_id: _Optional[str] = ..., attachments: _Optional[_Iterable[_Union[Attachment, _Mapping]]] = ..., content: _Optional[str] = ..., reasoning: _Optional[str] = ..., thinking: _Optional[bool] = ..., step_type: _Optional[str] = ..., step_label: _Optional[str] = ..., cost: _Optional[float] = ..., duration: _Optional[float] = ..., elapsed_ms: _Optional[float] = ..., execution_time_ms: _Optional[float] = ..., step_cost: _Optional[float] = ..., total_cost: _Optional[float] = ..., total_input_tokens: _Optional[int] = ..., total_output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., total_steps: _Optional[int] = ..., total_tool_calls: _Optional[int] = ..., tool_calls: _Optional[int] = ..., llm_calls: _Optional[int] = ..., error_message: _Optional[str] = ..., error_detail: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error_type: _Optional[str] = ..., error_attribution: _Optional[str] = ..., error_budget: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error_heterogeneous: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., final_state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., last_assistant_content: _Optional[str] = ..., last_llm_content: _Optional[str] = ..., last_tools_calling: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tools_calling: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tools_result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reason: _Optional[str] = ..., status: _Optional[str] = ..., should_continue: _Optional[bool] = ..., step_index: _Optional[int] = ..., steps: _Optional[int] = ..., topic_id: _Optional[str] = ..., group_id: _Optional[str] = ..., parent_operation_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., lineage: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class OnCompleteEvent(_message.Message):
    __slots__ = ("agent_id", "operation_id", "user_id", "attachments", "content", "reasoning", "thinking", "step_type", "step_label", "cost", "duration", "elapsed_ms", "execution_time_ms", "step_cost", "total_cost", "total_input_tokens", "total_output_tokens", "total_tokens", "total_steps", "total_tool_calls", "tool_calls", "llm_calls", "error_message", "error_detail", "error_type", "error_attribution", "error_budget", "error_heterogeneous", "final_state", "last_assistant_content", "last_llm_content", "last_tools_calling", "tools_calling", "tools_result", "metadata", "reason", "status", "should_continue", "step_index", "steps", "topic_id", "group_id", "parent_operation_id", "thread_id", "workspace_id", "lineage")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    STEP_TYPE_FIELD_NUMBER: _ClassVar[int]
    STEP_LABEL_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    STEP_COST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_STEPS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    LLM_CALLS_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_DETAIL_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    ERROR_ATTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    ERROR_BUDGET_FIELD_NUMBER: _ClassVar[int]
    ERROR_HETEROGENEOUS_FIELD_NUMBER: _ClassVar[int]
    FINAL_STATE_FIELD_NUMBER: _ClassVar[int]
    LAST_ASSISTANT_CONTENT_FIELD_NUMBER: _ClassVar[int]
    LAST_LLM_CONTENT_FIELD_NUMBER: _ClassVar[int]
    LAST_TOOLS_CALLING_FIELD_NUMBER: _ClassVar[int]
    TOOLS_CALLING_FIELD_NUMBER: _ClassVar[int]
    TOOLS_RESULT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SHOULD_CONTINUE_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    operation_id: str
    user_id: str
    attachments: _containers.RepeatedCompositeFieldContainer[Attachment]
    content: str
    reasoning: str
    thinking: bool
    step_type: str
    step_label: str
    cost: float
    duration: float
    elapsed_ms: float
    execution_time_ms: float
    step_cost: float
    total_cost: float
    total_input_tokens: int
    total_output_tokens: int
    total_tokens: int
    total_steps: int
    total_tool_calls: int
    tool_calls: int
    llm_calls: int
    error_message: str
    error_detail: _struct_pb2.Value
    error_type: str
    error_attribution: str
    error_budget: _struct_pb2.Struct
    error_heterogeneous: _struct_pb2.Struct
    final_state: _struct_pb2.Struct
    last_assistant_content: str
    last_llm_content: str
    last_tools_calling: _struct_pb2.Value
    tools_calling: _struct_pb2.Value
    tools_result: _struct_pb2.Value
    metadata: _struct_pb2.Struct
    reason: str
    status: str
    should_continue: bool
    step_index: int
    steps: int
    topic_id: str
    group_id: str
    parent_operation_id: str
    thread_id: str
    workspace_id: str
    lineage: _struct_pb2.Value
    def __init__(self, agent_id: _Optional[str] = ..., operation_id: _Optional[str] = ..., user_id: _Optional[str] = ..., attachments: _Optional[_Iterable[_Union[Attachment, _Mapping]]] = ..., content: _Optional[str] = ..., reasoning: _Optional[str] = ..., thinking: _Optional[bool] = ..., step_type: _Optional[str] = ..., step_label: _Optional[str] = ..., cost: _Optional[float] = ..., duration: _Optional[float] = ..., elapsed_ms: _Optional[float] = ..., execution_time_ms: _Optional[float] = ..., step_cost: _Optional[float] = ..., total_cost: _Optional[float] = ..., total_input_tokens: _Optional[int] = ..., total_output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., total_steps: _Optional[int] = ..., total_tool_calls: _Optional[int] = ..., tool_calls: _Optional[int] = ..., llm_calls: _Optional[int] = ..., error_message: _Optional[str] = ..., error_detail: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error_type: _Optional[str] = ..., error_attribution: _Optional[str] = ..., error_budget: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error_heterogeneous: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., final_state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., last_assistant_content: _Optional[str] = ..., last_llm_content: _Optional[str] = ..., last_tools_calling: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tools_calling: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tools_result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reason: _Optional[str] = ..., status: _Optional[str] = ..., should_continue: _Optional[bool] = ..., step_index: _Optional[int] = ..., steps: _Optional[int] = ..., topic_id: _Optional[str] = ..., group_id: _Optional[str] = ..., parent_operation_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., lineage: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class OnErrorEvent(_message.Message):
    __slots__ = ("agent_id", "operation_id", "user_id", "attachments", "content", "reasoning", "thinking", "step_type", "step_label", "cost", "duration", "elapsed_ms", "execution_time_ms", "step_cost", "total_cost", "total_input_tokens", "total_output_tokens", "total_tokens", "total_steps", "total_tool_calls", "tool_calls", "llm_calls", "error_message", "error_detail", "error_type", "error_attribution", "error_budget", "error_heterogeneous", "final_state", "last_assistant_content", "last_llm_content", "last_tools_calling", "tools_calling", "tools_result", "metadata", "reason", "status", "should_continue", "step_index", "steps", "topic_id", "group_id", "parent_operation_id", "thread_id", "workspace_id", "lineage")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    STEP_TYPE_FIELD_NUMBER: _ClassVar[int]
    STEP_LABEL_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    STEP_COST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_STEPS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    LLM_CALLS_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_DETAIL_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    ERROR_ATTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    ERROR_BUDGET_FIELD_NUMBER: _ClassVar[int]
    ERROR_HETEROGENEOUS_FIELD_NUMBER: _ClassVar[int]
    FINAL_STATE_FIELD_NUMBER: _ClassVar[int]
    LAST_ASSISTANT_CONTENT_FIELD_NUMBER: _ClassVar[int]
    LAST_LLM_CONTENT_FIELD_NUMBER: _ClassVar[int]
    LAST_TOOLS_CALLING_FIELD_NUMBER: _ClassVar[int]
    TOOLS_CALLING_FIELD_NUMBER: _ClassVar[int]
    TOOLS_RESULT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SHOULD_CONTINUE_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    operation_id: str
    user_id: str
    attachments: _containers.RepeatedCompositeFieldContainer[Attachment]
    content: str
    reasoning: str
    thinking: bool
    step_type: str
    step_label: str
    cost: float
    duration: float
    elapsed_ms: float
    execution_time_ms: float
    step_cost: float
    total_cost: float
    total_input_tokens: int
    total_output_tokens: int
    total_tokens: int
    total_steps: int
    total_tool_calls: int
    tool_calls: int
    llm_calls: int
    error_message: str
    error_detail: _struct_pb2.Value
    error_type: str
    error_attribution: str
    error_budget: _struct_pb2.Struct
    error_heterogeneous: _struct_pb2.Struct
    final_state: _struct_pb2.Struct
    last_assistant_content: str
    last_llm_content: str
    last_tools_calling: _struct_pb2.Value
    tools_calling: _struct_pb2.Value
    tools_result: _struct_pb2.Value
    metadata: _struct_pb2.Struct
    reason: str
    status: str
    should_continue: bool
    step_index: int
    steps: int
    topic_id: str
    group_id: str
    parent_operation_id: str
    thread_id: str
    workspace_id: str
    lineage: _struct_pb2.Value
    def __init__(self, agent_id: _Optional[str] = ..., operation_id: _Optional[str] = ..., user_id: _Optional[str] = ..., attachments: _Optional[_Iterable[_Union[Attachment, _Mapping]]] = ..., content: _Optional[str] = ..., reasoning: _Optional[str] = ..., thinking: _Optional[bool] = ..., step_type: _Optional[str] = ..., step_label: _Optional[str] = ..., cost: _Optional[float] = ..., duration: _Optional[float] = ..., elapsed_ms: _Optional[float] = ..., execution_time_ms: _Optional[float] = ..., step_cost: _Optional[float] = ..., total_cost: _Optional[float] = ..., total_input_tokens: _Optional[int] = ..., total_output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., total_steps: _Optional[int] = ..., total_tool_calls: _Optional[int] = ..., tool_calls: _Optional[int] = ..., llm_calls: _Optional[int] = ..., error_message: _Optional[str] = ..., error_detail: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error_type: _Optional[str] = ..., error_attribution: _Optional[str] = ..., error_budget: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error_heterogeneous: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., final_state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., last_assistant_content: _Optional[str] = ..., last_llm_content: _Optional[str] = ..., last_tools_calling: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tools_calling: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tools_result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reason: _Optional[str] = ..., status: _Optional[str] = ..., should_continue: _Optional[bool] = ..., step_index: _Optional[int] = ..., steps: _Optional[int] = ..., topic_id: _Optional[str] = ..., group_id: _Optional[str] = ..., parent_operation_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., lineage: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class BeforeToolCallEvent(_message.Message):
    __slots__ = ("context",)
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    context: ToolCallContext
    def __init__(self, context: _Optional[_Union[ToolCallContext, _Mapping]] = ...) -> None: ...

class AfterToolCallEvent(_message.Message):
    __slots__ = ("context", "mocked", "result")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    MOCKED_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    context: ToolCallContext
    mocked: bool
    result: ToolResult
    def __init__(self, context: _Optional[_Union[ToolCallContext, _Mapping]] = ..., mocked: _Optional[bool] = ..., result: _Optional[_Union[ToolResult, _Mapping]] = ...) -> None: ...

class OnToolCallErrorEvent(_message.Message):
    __slots__ = ("context", "error")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    context: ToolCallContext
    error: str
    def __init__(self, context: _Optional[_Union[ToolCallContext, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class PendingTool(_message.Message):
    __slots__ = ("api_name", "identifier")
    API_NAME_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    api_name: str
    identifier: str
    def __init__(self, api_name: _Optional[str] = ..., identifier: _Optional[str] = ...) -> None: ...

class BeforeHumanInterventionEvent(_message.Message):
    __slots__ = ("operation_id", "pending_tools", "step_index", "user_id")
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    PENDING_TOOLS_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    pending_tools: _containers.RepeatedCompositeFieldContainer[PendingTool]
    step_index: int
    user_id: str
    def __init__(self, operation_id: _Optional[str] = ..., pending_tools: _Optional[_Iterable[_Union[PendingTool, _Mapping]]] = ..., step_index: _Optional[int] = ..., user_id: _Optional[str] = ...) -> None: ...

class AfterHumanInterventionEvent(_message.Message):
    __slots__ = ("action", "operation_id", "rejection_reason", "tool_call_id", "user_id")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    REJECTION_REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    action: HumanAction
    operation_id: str
    rejection_reason: str
    tool_call_id: str
    user_id: str
    def __init__(self, action: _Optional[_Union[HumanAction, str]] = ..., operation_id: _Optional[str] = ..., rejection_reason: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class OnStopByHumanInterventionEvent(_message.Message):
    __slots__ = ("operation_id", "rejection_reason", "tool_call_id", "user_id")
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    REJECTION_REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    rejection_reason: str
    tool_call_id: str
    user_id: str
    def __init__(self, operation_id: _Optional[str] = ..., rejection_reason: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class BeforeCompactEvent(_message.Message):
    __slots__ = ("message_count", "operation_id", "step_index", "token_count", "user_id", "agent_id", "lineage", "parent_operation_id", "thread_id", "topic_id", "workspace_id")
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    PARENT_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    message_count: int
    operation_id: str
    step_index: int
    token_count: int
    user_id: str
    agent_id: str
    lineage: _struct_pb2.Value
    parent_operation_id: str
    thread_id: str
    topic_id: str
    workspace_id: str
    def __init__(self, message_count: _Optional[int] = ..., operation_id: _Optional[str] = ..., step_index: _Optional[int] = ..., token_count: _Optional[int] = ..., user_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., lineage: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., parent_operation_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., topic_id: _Optional[str] = ..., workspace_id: _Optional[str] = ...) -> None: ...

class AfterCompactEvent(_message.Message):
    __slots__ = ("group_id", "messages_after", "messages_before", "operation_id", "step_index", "summary", "user_id", "agent_id", "lineage", "parent_operation_id", "thread_id", "topic_id", "workspace_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_AFTER_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_BEFORE_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    PARENT_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    messages_after: int
    messages_before: int
    operation_id: str
    step_index: int
    summary: str
    user_id: str
    agent_id: str
    lineage: _struct_pb2.Value
    parent_operation_id: str
    thread_id: str
    topic_id: str
    workspace_id: str
    def __init__(self, group_id: _Optional[str] = ..., messages_after: _Optional[int] = ..., messages_before: _Optional[int] = ..., operation_id: _Optional[str] = ..., step_index: _Optional[int] = ..., summary: _Optional[str] = ..., user_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., lineage: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., parent_operation_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., topic_id: _Optional[str] = ..., workspace_id: _Optional[str] = ...) -> None: ...

class OnCompactErrorEvent(_message.Message):
    __slots__ = ("error", "operation_id", "step_index", "token_count", "user_id", "agent_id", "lineage", "parent_operation_id", "thread_id", "topic_id", "workspace_id")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    PARENT_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    error: str
    operation_id: str
    step_index: int
    token_count: int
    user_id: str
    agent_id: str
    lineage: _struct_pb2.Value
    parent_operation_id: str
    thread_id: str
    topic_id: str
    workspace_id: str
    def __init__(self, error: _Optional[str] = ..., operation_id: _Optional[str] = ..., step_index: _Optional[int] = ..., token_count: _Optional[int] = ..., user_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., lineage: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., parent_operation_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., topic_id: _Optional[str] = ..., workspace_id: _Optional[str] = ...) -> None: ...

class BeforeCallAgentEvent(_message.Message):
    __slots__ = ("agent_id", "instruction", "operation_id", "user_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    instruction: str
    operation_id: str
    user_id: str
    def __init__(self, agent_id: _Optional[str] = ..., instruction: _Optional[str] = ..., operation_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class AfterCallAgentEvent(_message.Message):
    __slots__ = ("agent_id", "operation_id", "sub_operation_id", "success", "thread_id", "user_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    SUB_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    operation_id: str
    sub_operation_id: str
    success: bool
    thread_id: str
    user_id: str
    def __init__(self, agent_id: _Optional[str] = ..., operation_id: _Optional[str] = ..., sub_operation_id: _Optional[str] = ..., success: _Optional[bool] = ..., thread_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class OnCallAgentErrorEvent(_message.Message):
    __slots__ = ("agent_id", "error", "operation_id", "user_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    error: str
    operation_id: str
    user_id: str
    def __init__(self, agent_id: _Optional[str] = ..., error: _Optional[str] = ..., operation_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class HookEvent(_message.Message):
    __slots__ = ("before_step", "after_step", "on_complete", "on_error", "before_tool_call", "after_tool_call", "on_tool_call_error", "before_human_intervention", "after_human_intervention", "on_stop_by_human_intervention", "before_compact", "after_compact", "on_compact_error", "before_call_agent", "after_call_agent", "on_call_agent_error")
    BEFORE_STEP_FIELD_NUMBER: _ClassVar[int]
    AFTER_STEP_FIELD_NUMBER: _ClassVar[int]
    ON_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    ON_ERROR_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    AFTER_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    ON_TOOL_CALL_ERROR_FIELD_NUMBER: _ClassVar[int]
    BEFORE_HUMAN_INTERVENTION_FIELD_NUMBER: _ClassVar[int]
    AFTER_HUMAN_INTERVENTION_FIELD_NUMBER: _ClassVar[int]
    ON_STOP_BY_HUMAN_INTERVENTION_FIELD_NUMBER: _ClassVar[int]
    BEFORE_COMPACT_FIELD_NUMBER: _ClassVar[int]
    AFTER_COMPACT_FIELD_NUMBER: _ClassVar[int]
    ON_COMPACT_ERROR_FIELD_NUMBER: _ClassVar[int]
    BEFORE_CALL_AGENT_FIELD_NUMBER: _ClassVar[int]
    AFTER_CALL_AGENT_FIELD_NUMBER: _ClassVar[int]
    ON_CALL_AGENT_ERROR_FIELD_NUMBER: _ClassVar[int]
    before_step: BeforeStepEvent
    after_step: AfterStepEvent
    on_complete: OnCompleteEvent
    on_error: OnErrorEvent
    before_tool_call: BeforeToolCallEvent
    after_tool_call: AfterToolCallEvent
    on_tool_call_error: OnToolCallErrorEvent
    before_human_intervention: BeforeHumanInterventionEvent
    after_human_intervention: AfterHumanInterventionEvent
    on_stop_by_human_intervention: OnStopByHumanInterventionEvent
    before_compact: BeforeCompactEvent
    after_compact: AfterCompactEvent
    on_compact_error: OnCompactErrorEvent
    before_call_agent: BeforeCallAgentEvent
    after_call_agent: AfterCallAgentEvent
    on_call_agent_error: OnCallAgentErrorEvent
    def __init__(self, before_step: _Optional[_Union[BeforeStepEvent, _Mapping]] = ..., after_step: _Optional[_Union[AfterStepEvent, _Mapping]] = ..., on_complete: _Optional[_Union[OnCompleteEvent, _Mapping]] = ..., on_error: _Optional[_Union[OnErrorEvent, _Mapping]] = ..., before_tool_call: _Optional[_Union[BeforeToolCallEvent, _Mapping]] = ..., after_tool_call: _Optional[_Union[AfterToolCallEvent, _Mapping]] = ..., on_tool_call_error: _Optional[_Union[OnToolCallErrorEvent, _Mapping]] = ..., before_human_intervention: _Optional[_Union[BeforeHumanInterventionEvent, _Mapping]] = ..., after_human_intervention: _Optional[_Union[AfterHumanInterventionEvent, _Mapping]] = ..., on_stop_by_human_intervention: _Optional[_Union[OnStopByHumanInterventionEvent, _Mapping]] = ..., before_compact: _Optional[_Union[BeforeCompactEvent, _Mapping]] = ..., after_compact: _Optional[_Union[AfterCompactEvent, _Mapping]] = ..., on_compact_error: _Optional[_Union[OnCompactErrorEvent, _Mapping]] = ..., before_call_agent: _Optional[_Union[BeforeCallAgentEvent, _Mapping]] = ..., after_call_agent: _Optional[_Union[AfterCallAgentEvent, _Mapping]] = ..., on_call_agent_error: _Optional[_Union[OnCallAgentErrorEvent, _Mapping]] = ...) -> None: ...
