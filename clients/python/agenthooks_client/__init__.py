"""agenthooks gRPC client, generated from proto/agenthooks/v1. DO NOT EDIT.

Regenerate with `npm run generate:clients`. The modules are in agenthooks_client.v1:
`service_pb2_grpc.HookServiceStub`, the messages of events_pb2, hooks_pb2,
decisions_pb2 and service_pb2, and in errors_pb2 the enum ErrorReason, whose
value names are the `google.rpc.ErrorInfo` reasons agenthooks sends. Status and
the error details are googleapis-common-protos' `google.rpc` modules.
"""
