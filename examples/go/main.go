// Command runtime is an agent runtime in Go that runs one whole operation
// against the agenthooks sidecar.
//
// It uses the generated gRPC client (clients/go, module
// agenthooks.local/client) over native gRPC, and does what a runtime does:
//
//  0. registers a hook with an invalid webhook URL, on purpose, and prints
//     the ErrorInfo reason and the BadRequest field violations of the error
//     it gets;
//  1. registers the operation's hooks: a webhook control that the receiver
//     answers (it denies fs/deleteFile), a local handler that mocks
//     web/search, and notification webhooks for the steps, the tool results
//     and the completion;
//  2. serves the local handler over the Handle stream, in its own goroutine,
//     and opens the operation's DispatchStream for the events it does not
//     wait for;
//  3. dispatches beforeStep, decides three tool calls (fs/readFile is allowed
//     and runs on the client, so its result arrives later: the call is
//     parked; fs/deleteFile is denied; web/search is mocked), sends the
//     afterToolCall notifications of the denied and the mocked call on the
//     stream, waits for their acks and dispatches afterStep;
//  4. publishes the parked call's result;
//  5. runs a small agent loop with a scripted model, shaped by modifying
//     hooks (hookbus-hooks.md) that it registers on the operation: at
//     transformContext a webhook redacts the card number in the user's
//     message, at beforeToolCall a local handler clamps the search tool's
//     `limit`, and at shouldStopAfterTurn a webhook (a turn budget) stops the
//     loop after its second turn. Each iteration calls Modify at the three
//     points and applies what it answers; a `blocked` answer applies nothing
//     and ends the run with an error;
//  6. completes the operation.
//
// As the spec's producers do, it awaits the step events (Dispatch) and the
// terminal ones (CompleteOperation), and does not wait for the tool events:
// they go on the stream, which keeps their order, so the receiver sees them
// in order.
//
// It prints one JSON line per step and exits 1 on any error.
//
// Environment: AGENTHOOKS_ADDRESS (host:port or unix:/path, default
// 127.0.0.1:50051), RECEIVER_URL (the webhook receiver, default
// http://127.0.0.1:9000) and AGENTHOOKS_OPERATION_ID (default op-example).
//
//	cd examples/go && go run .
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	agenthooksv1 "agenthooks.local/client/agenthooks/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	agentID = "agent-example"
	userID  = "user-example"
	// Every call gets a deadline: a sidecar that does not answer is an error, never an allow.
	timeout = 10 * time.Second

	searchResult = `{"results":[{"title":"agenthooks","url":"https://example.com/agenthooks"}]}`
	readResult   = "- [x] write the examples\n- [ ] ship v1\n"

	// prompt is the agent loop's first message: the receiver's redactor removes the card number.
	prompt = "Find the agenthooks docs. My card is 4111 1111 1111 1111 if a page asks for it."
	// searchLimitMax is the largest `limit` the search tool takes; the clamp-limit handler enforces it.
	searchLimitMax = 10
)

// searchArgs are the search tool's arguments.
type searchArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

// turn is one assistant turn of the scripted model, with the search it calls (or nil).
type turn struct {
	text   string
	search *searchArgs
}

// script is the scripted model: its turn at each iteration. It would search
// twice and then answer; the turn budget stops it first.
var script = []turn{
	{"Let me search for it.", &searchArgs{Query: "agenthooks sidecar", Limit: 50}},
	{"Let me look for the modifying hooks too.", &searchArgs{Query: "agenthooks modifying hooks", Limit: 5}},
	{"done: the docs are at https://example.com/agenthooks.", nil},
}

var (
	address     = env("AGENTHOOKS_ADDRESS", "127.0.0.1:50051")
	receiverURL = strings.TrimRight(env("RECEIVER_URL", "http://127.0.0.1:9000"), "/")
	operationID = env("AGENTHOOKS_OPERATION_ID", "op-example")
)

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// field is one key of a JSON line; lines keep their keys in order.
type field struct {
	key   string
	value any
}

var printMu sync.Mutex

// emit prints one JSON line (the handler goroutine prints too).
func emit(step string, fields ...field) {
	var b strings.Builder
	b.WriteString(`{"step":` + toJSON(step))
	for _, f := range fields {
		b.WriteString("," + toJSON(f.key) + ":" + toJSON(f.value))
	}
	b.WriteString("}")
	printMu.Lock()
	defer printMu.Unlock()
	fmt.Println(b.String())
}

// toJSON encodes a value as the other examples do (no HTML escaping).
func toJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// outcomes formats hook outcomes as `hookId:status`, such as `steps-before:delivered`.
func outcomes(items []*agenthooksv1.HookOutcome) []string {
	out := make([]string, 0, len(items))
	for _, o := range items {
		s := strings.ToLower(strings.TrimPrefix(o.GetStatus().String(), "HOOK_OUTCOME_STATUS_"))
		out = append(out, o.GetHookId()+":"+s)
	}
	return out
}

// eventName is the hook type literal of an event, such as `beforeStep`.
func eventName(event *agenthooksv1.HookEvent) string {
	m := event.ProtoReflect()
	f := m.WhichOneof(m.Descriptor().Oneofs().ByName("event"))
	if f == nil {
		return ""
	}
	return f.JSONName()
}

// pointName is the spec's name of a modifying point, such as `beforeToolCall`.
func pointName(point agenthooksv1.ModifyPoint) string {
	words := strings.Split(strings.ToLower(strings.TrimPrefix(point.String(), "MODIFY_POINT_")), "_")
	for i := 1; i < len(words); i++ {
		words[i] = strings.ToUpper(words[i][:1]) + words[i][1:]
	}
	return strings.Join(words, "")
}

func mustStruct(v map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(v)
	if err != nil {
		panic(err)
	}
	return s
}

// toolCall is one tool call of the model's step.
type toolCall struct {
	context *agenthooksv1.ToolCallContext
	// deferred is true when the tool runs elsewhere and its result arrives later (parked).
	deferred bool
}

func (c toolCall) tool() string {
	return c.context.GetIdentifier() + "/" + c.context.GetApiName()
}

func newToolCall(name, identifier, apiName string, args map[string]any, index int32, executor agenthooksv1.Executor) *agenthooksv1.ToolCallContext {
	return &agenthooksv1.ToolCallContext{
		ToolCallId:         operationID + "-call-" + name,
		AssistantMessageId: operationID + "-msg-1",
		Identifier:         identifier,
		ApiName:            apiName,
		Args:               mustStruct(args),
		CallIndex:          index,
		StepIndex:          0,
		OperationId:        operationID,
		Executor:           executor,
		AgentId:            proto.String(agentID),
		UserId:             proto.String(userID),
	}
}

func hooks() []*agenthooksv1.Hook {
	notify := func(id string, t agenthooksv1.HookType) *agenthooksv1.Hook {
		return &agenthooksv1.Hook{Id: id, Type: t, Webhook: &agenthooksv1.Webhook{Url: receiverURL + "/events"}}
	}
	return []*agenthooksv1.Hook{
		// A control: the receiver's {"decision": "deny"} blocks the call; if the
		// receiver fails, the call is blocked too (onError: block).
		{
			Id:   "deny-delete",
			Type: agenthooksv1.HookType_HOOK_TYPE_BEFORE_TOOL_CALL,
			Webhook: &agenthooksv1.Webhook{
				Url:              receiverURL + "/control",
				ResponseHandling: agenthooksv1.ResponseHandling_RESPONSE_HANDLING_TOOL_CALL,
				OnError:          agenthooksv1.OnError_ON_ERROR_BLOCK,
			},
		},
		// A local handler, served over the Handle stream below.
		{
			Id:      "mock-search",
			Type:    agenthooksv1.HookType_HOOK_TYPE_BEFORE_TOOL_CALL,
			Matcher: proto.String("^web/search$"),
			Handler: true,
		},
		notify("steps-before", agenthooksv1.HookType_HOOK_TYPE_BEFORE_STEP),
		notify("steps-after", agenthooksv1.HookType_HOOK_TYPE_AFTER_STEP),
		notify("tool-results", agenthooksv1.HookType_HOOK_TYPE_AFTER_TOOL_CALL),
		notify("completed", agenthooksv1.HookType_HOOK_TYPE_ON_COMPLETE),
	}
}

// modifyingHooks are the agent loop's modifying hooks, one per point, each in its plugin.
func modifyingHooks() []*agenthooksv1.Hook {
	return []*agenthooksv1.Hook{
		// A webhook: a card number must not reach the model, so if the redactor
		// fails the answer is `blocked` (onError: block) and the runtime stops.
		{
			Id:      "redact-card",
			Point:   agenthooksv1.ModifyPoint_MODIFY_POINT_TRANSFORM_CONTEXT,
			Plugin:  "privacy",
			Webhook: &agenthooksv1.Webhook{Url: receiverURL + "/redact", OnError: agenthooksv1.OnError_ON_ERROR_BLOCK},
		},
		// A local handler, served over the Handle stream: the runtime knows its
		// tools' limits, and checks them with no HTTP round trip per tool call.
		{
			Id:      "clamp-limit",
			Point:   agenthooksv1.ModifyPoint_MODIFY_POINT_BEFORE_TOOL_CALL,
			Plugin:  "limits",
			Matcher: proto.String("^search$"),
			Handler: true,
		},
		// A webhook, not a handler: the turn budget is the operator's policy, kept in
		// one service for runtimes in every language and changed without redeploying
		// them; as a handler the runtime would only ask itself. A budget that cannot
		// be checked stops the run (onError: block) rather than let it go on unmetered.
		{
			Id:      "turn-budget",
			Point:   agenthooksv1.ModifyPoint_MODIFY_POINT_SHOULD_STOP_AFTER_TURN,
			Plugin:  "budget",
			Webhook: &agenthooksv1.Webhook{Url: receiverURL + "/stop", OnError: agenthooksv1.OnError_ON_ERROR_BLOCK},
		},
	}
}

// handlerStream serves the runtime's local handlers over the Handle stream,
// in its own goroutine. Dispatch and DecideToolCall wait for the handler's
// reply, so the stream must not be served by the goroutine that makes them.
type handlerStream struct {
	stream   grpc.BidiStreamingClient[agenthooksv1.HandleRequest, agenthooksv1.HandleResponse]
	attached chan struct{}
	done     chan error
	sendMu   sync.Mutex
}

func openHandlerStream(ctx context.Context, client agenthooksv1.HookServiceClient, operationIDs []string) (*handlerStream, error) {
	stream, err := client.Handle(ctx)
	if err != nil {
		return nil, err
	}
	h := &handlerStream{stream: stream, attached: make(chan struct{}), done: make(chan error, 1)}
	if err := h.send(&agenthooksv1.HandleRequest{Message: &agenthooksv1.HandleRequest_Attach{
		Attach: &agenthooksv1.HandleAttach{OperationIds: operationIDs},
	}}); err != nil {
		return nil, err
	}
	go h.serve()
	return h, nil
}

func (h *handlerStream) send(req *agenthooksv1.HandleRequest) error {
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	return h.stream.Send(req)
}

func (h *handlerStream) serve() {
	attached := false
	for {
		msg, err := h.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if !attached {
				close(h.attached)
			}
			h.done <- err
			return
		}
		switch m := msg.GetMessage().(type) {
		case *agenthooksv1.HandleResponse_Attached:
			emit("Handle.attached", field{"operationIds", m.Attached.GetOperationIds()})
			if !attached {
				attached = true
				close(h.attached)
			}
		case *agenthooksv1.HandleResponse_Call:
			if err := h.send(&agenthooksv1.HandleRequest{Message: &agenthooksv1.HandleRequest_Reply{Reply: run(m.Call)}}); err != nil {
				h.done <- err
				return
			}
		case *agenthooksv1.HandleResponse_Replaced:
			emit("Handle.replaced", field{"operationIds", m.Replaced.GetOperationIds()})
		}
	}
}

// run is the handler: it mocks web/search, runs the modifying handler, and is
// done with anything else.
func run(call *agenthooksv1.HandlerCall) *agenthooksv1.HandlerReply {
	if call.GetPoint() != agenthooksv1.ModifyPoint_MODIFY_POINT_UNSPECIFIED {
		return runModifying(call)
	}
	if before := call.GetEvent().GetBeforeToolCall(); before != nil {
		tool := before.GetContext().GetIdentifier() + "/" + before.GetContext().GetApiName()
		if call.GetHookId() == "mock-search" && tool == "web/search" {
			emit("Handle.call", field{"hookId", call.GetHookId()}, field{"tool", tool}, field{"reply", "mock"})
			return &agenthooksv1.HandlerReply{CallId: call.GetCallId(), Outcome: &agenthooksv1.HandlerReply_Mock{
				Mock: &agenthooksv1.HandlerMock{Result: &agenthooksv1.ToolResult{Content: searchResult, Success: true}},
			}}
		}
	}
	emit("Handle.call", field{"hookId", call.GetHookId()}, field{"event", eventName(call.GetEvent())}, field{"reply", "done"})
	return &agenthooksv1.HandlerReply{CallId: call.GetCallId(), Outcome: &agenthooksv1.HandlerReply_Done{Done: &agenthooksv1.HandlerDone{}}}
}

// runModifying is the modifying handler: it clamps the search tool's `limit`,
// and changes nothing else. It gets the point's context as the hooks before it
// left it, and replies `modified` with its result, or `done` for no change.
func runModifying(call *agenthooksv1.HandlerCall) *agenthooksv1.HandlerReply {
	point := pointName(call.GetPoint())
	if call.GetHookId() == "clamp-limit" {
		// Raw values, so that the other arguments stay as the model wrote them.
		var pointContext struct {
			Args map[string]json.RawMessage `json:"args"`
		}
		var limit int
		if json.Unmarshal([]byte(call.GetContextJson()), &pointContext) == nil &&
			json.Unmarshal(pointContext.Args["limit"], &limit) == nil && limit > searchLimitMax {
			emit("Handle.call", field{"hookId", call.GetHookId()}, field{"point", point}, field{"reply", "modified"})
			pointContext.Args["limit"] = json.RawMessage(strconv.Itoa(searchLimitMax))
			result := toJSON(map[string]any{"args": pointContext.Args})
			return &agenthooksv1.HandlerReply{CallId: call.GetCallId(), Outcome: &agenthooksv1.HandlerReply_Modified{
				Modified: &agenthooksv1.HandlerModified{ResultJson: result},
			}}
		}
	}
	emit("Handle.call", field{"hookId", call.GetHookId()}, field{"point", point}, field{"reply", "done"})
	return &agenthooksv1.HandlerReply{CallId: call.GetCallId(), Outcome: &agenthooksv1.HandlerReply_Done{Done: &agenthooksv1.HandlerDone{}}}
}

func (h *handlerStream) waitAttached() error {
	select {
	case <-h.attached:
	case <-time.After(timeout):
		return errors.New("the sidecar did not confirm the Handle attachment")
	}
	select {
	case err := <-h.done:
		if err == nil {
			err = errors.New("the Handle stream ended before it was attached")
		}
		return err
	default:
		return nil
	}
}

// close half-closes the stream and waits until the sidecar ended it.
func (h *handlerStream) close() error {
	h.sendMu.Lock()
	err := h.stream.CloseSend()
	h.sendMu.Unlock()
	if err != nil {
		return err
	}
	select {
	case err := <-h.done:
		return err
	case <-time.After(timeout):
		return errors.New("the Handle stream did not end")
	}
}

// errorDetails reads the ErrorInfo reason and the BadRequest field violations
// of an error from the sidecar. They are in the google.rpc.Status of the
// call's trailers (grpc-status-details-bin), which grpc-go decodes.
func errorDetails(err error) (reason string, violations []*errdetails.BadRequest_FieldViolation) {
	st, _ := status.FromError(err)
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			reason = d.GetReason()
		case *errdetails.BadRequest:
			violations = d.GetFieldViolations()
		}
	}
	return reason, violations
}

// fieldViolation is one BadRequest field violation as the examples print it.
type fieldViolation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

// registerInvalidHook registers a hook with an invalid webhook URL, on
// purpose, and prints what the error says.
func registerInvalidHook(client agenthooksv1.HookServiceClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	invalid := &agenthooksv1.Hook{
		Id:      "invalid-url",
		Type:    agenthooksv1.HookType_HOOK_TYPE_AFTER_STEP,
		Webhook: &agenthooksv1.Webhook{Url: "ftp://example.com/hook"},
	}
	_, err := client.RegisterHooks(ctx, &agenthooksv1.RegisterHooksRequest{OperationId: operationID, Hooks: []*agenthooksv1.Hook{invalid}})
	if err == nil {
		return errors.New("the sidecar registered a hook with an invalid webhook URL")
	}
	reason, violations := errorDetails(err)
	fields := make([]fieldViolation, 0, len(violations))
	for _, v := range violations {
		fields = append(fields, fieldViolation{Field: v.GetField(), Description: v.GetDescription()})
	}
	emit("RegisterHooks.refused", field{"code", int(status.Code(err))}, field{"reason", reason}, field{"fields", fields})
	return nil
}

// notifier sends the events a runtime does not wait for on the operation's
// DispatchStream. notify returns at once; the acks are read in their own
// goroutine. The stream keeps one operation's events in order, but not with
// Dispatch calls: flush waits for the acks of the events sent so far.
type notifier struct {
	stream grpc.BidiStreamingClient[agenthooksv1.DispatchStreamRequest, agenthooksv1.DispatchStreamResponse]
	mu     sync.Mutex
	sent   int
	acked  int
	// progress is closed and replaced on each ack and when the stream ends.
	progress chan struct{}
	ended    bool
	err      error
}

func openNotifier(ctx context.Context, client agenthooksv1.HookServiceClient) (*notifier, error) {
	stream, err := client.DispatchStream(ctx)
	if err != nil {
		return nil, err
	}
	n := &notifier{stream: stream, progress: make(chan struct{})}
	go n.read()
	return n, nil
}

func (n *notifier) notify(event *agenthooksv1.HookEvent, details ...field) error {
	n.mu.Lock()
	n.sent++
	eventID := fmt.Sprintf("event-%d", n.sent)
	n.mu.Unlock()
	fields := append([]field{{"eventId", eventID}, {"event", eventName(event)}}, details...)
	emit("DispatchStream.send", fields...)
	return n.stream.Send(&agenthooksv1.DispatchStreamRequest{EventId: eventID, Event: event})
}

func (n *notifier) read() {
	for {
		ack, err := n.stream.Recv()
		if err != nil {
			n.mu.Lock()
			if !errors.Is(err, io.EOF) {
				n.err = err
			}
			n.ended = true
			close(n.progress)
			n.mu.Unlock()
			return
		}
		if e := ack.GetError(); e != nil {
			// A failed notification is logged; the operation goes on.
			emit("DispatchStream.ack", field{"eventId", ack.GetEventId()}, field{"error", e.GetReason() + ": " + e.GetMessage()})
		} else {
			emit("DispatchStream.ack", field{"eventId", ack.GetEventId()}, field{"outcomes", outcomes(ack.GetOutcomes())})
		}
		n.mu.Lock()
		n.acked++
		close(n.progress)
		n.progress = make(chan struct{})
		n.mu.Unlock()
	}
}

// flush waits until every event sent so far is acknowledged.
func (n *notifier) flush() error {
	deadline := time.After(timeout)
	for {
		n.mu.Lock()
		acked, sent, ended, err, progress := n.acked, n.sent, n.ended, n.err, n.progress
		n.mu.Unlock()
		switch {
		case err != nil:
			return err
		case acked >= sent:
			return nil
		case ended:
			return errors.New("the DispatchStream ended before every event was acknowledged")
		}
		select {
		case <-progress:
		case <-deadline:
			return errors.New("the sidecar did not acknowledge the notifications")
		}
	}
}

// close half-closes the stream and waits until the sidecar ended it, every
// event acknowledged.
func (n *notifier) close() error {
	if err := n.stream.CloseSend(); err != nil {
		return err
	}
	deadline := time.After(timeout)
	for {
		n.mu.Lock()
		ended, progress := n.ended, n.progress
		n.mu.Unlock()
		if ended {
			return n.flush()
		}
		select {
		case <-progress:
		case <-deadline:
			return errors.New("the DispatchStream did not end")
		}
	}
}

type runner struct {
	client   agenthooksv1.HookServiceClient
	notifier *notifier
}

// dispatch dispatches an event the runtime awaits (beforeStep, afterStep).
func (r *runner) dispatch(event *agenthooksv1.HookEvent) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := r.client.Dispatch(ctx, &agenthooksv1.DispatchRequest{Event: event})
	if err != nil {
		return fmt.Errorf("Dispatch: %w", err)
	}
	emit("Dispatch", field{"event", eventName(event)}, field{"outcomes", outcomes(res.GetOutcomes())})
	return nil
}

// afterToolCall notifies the tool's result without waiting, as the spec's producers do.
func (r *runner) afterToolCall(call toolCall, result *agenthooksv1.ToolResult, mocked bool) error {
	event := &agenthooksv1.HookEvent{Event: &agenthooksv1.HookEvent_AfterToolCall{
		AfterToolCall: &agenthooksv1.AfterToolCallEvent{Context: call.context, Mocked: mocked, Result: result},
	}}
	if err := r.notifier.notify(event, field{"tool", call.tool()}); err != nil {
		return fmt.Errorf("DispatchStream: %w", err)
	}
	return nil
}

// decide asks the sidecar before the tool runs, and does what the decision says.
func (r *runner) decide(call toolCall) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := r.client.DecideToolCall(ctx, &agenthooksv1.DecideToolCallRequest{
		Event: &agenthooksv1.BeforeToolCallEvent{Context: call.context},
	})
	if err != nil {
		return fmt.Errorf("DecideToolCall: %w", err)
	}
	switch d := res.GetDecision().GetOutcome().(type) {
	case *agenthooksv1.Decision_Deny:
		// The tool does not run; the blocked result is what the runtime stores,
		// and its afterToolCall notification still goes out (mocked: false).
		emit("DecideToolCall", field{"tool", call.tool()}, field{"decision", "deny"}, field{"reason", d.Deny.GetReason()})
		return r.afterToolCall(call, d.Deny.GetBlockedResult(), false)
	case *agenthooksv1.Decision_Mock:
		// The tool does not run; the handler's result stands in for it.
		emit("DecideToolCall", field{"tool", call.tool()}, field{"decision", "mock"}, field{"hookId", d.Mock.GetHookId()})
		return r.afterToolCall(call, d.Mock.GetResult(), true)
	case *agenthooksv1.Decision_Allow:
		emit("DecideToolCall", field{"tool", call.tool()}, field{"decision", "allow"})
		if !call.deferred {
			return fmt.Errorf("%s would run here; this example runs no tool itself", call.tool())
		}
		// The client runs the tool; its result arrives later. Park the call so
		// that the publication works on any sidecar, after any restart.
		parked, err := r.client.ParkToolCall(ctx, &agenthooksv1.ParkToolCallRequest{
			Context: call.context,
			Kind:    agenthooksv1.ParkKind_PARK_KIND_DEFERRED,
		})
		if err != nil {
			return fmt.Errorf("ParkToolCall: %w", err)
		}
		emit("ParkToolCall", field{"toolCallId", call.context.GetToolCallId()}, field{"created", parked.GetCreated()})
		return nil
	default:
		return errors.New("DecideToolCall answered without a decision")
	}
}

// publish hands the sidecar the parked call's result: it runs the result
// controls and publishes it once (and sends its afterToolCall notification).
func (r *runner) publish(call toolCall, result *agenthooksv1.ToolResult) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := r.client.PublishDeferredResult(ctx, &agenthooksv1.PublishDeferredResultRequest{
		ToolCallId: call.context.GetToolCallId(),
		Result:     result,
	})
	if err != nil {
		return fmt.Errorf("PublishDeferredResult: %w", err)
	}
	emit("PublishDeferredResult", field{"toolCallId", call.context.GetToolCallId()},
		field{"published", res.GetPublished()}, field{"content", res.GetFinalResult().GetContent()})
	return nil
}

// errModifyBlocked is a hook with onError: block that failed: the runtime
// applies nothing of the call.
var errModifyBlocked = errors.New("agenthooks blocked the agent loop")

// loopMessage is the agent loop's message as JSON: the hooks may answer
// messages of any shape, and the loop carries them as they are.
type loopMessage = json.RawMessage

// userMessage, assistantMessage and toolResultMessage are the messages the
// loop writes itself.
type userMessage struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Content string `json:"content"`
}

type assistantMessage struct {
	ID        string         `json:"id"`
	Role      string         `json:"role"`
	Content   string         `json:"content"`
	ToolCalls []loopToolCall `json:"toolCalls,omitempty"`
}

type loopToolCall struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Arguments searchArgs `json:"arguments"`
}

type toolResultMessage struct {
	ID         string `json:"id"`
	Role       string `json:"role"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	Content    string `json:"content"`
	IsError    bool   `json:"isError"`
}

// toolRef is a context's `toolCall`: the call's id and the tool's name, which matchers test.
type toolRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// The points' contexts, named as hookbus-hooks.md names them.
type transformContext struct {
	Messages  []loopMessage `json:"messages"`
	Iteration int           `json:"iteration"`
}

type beforeToolCallContext struct {
	ToolCall  toolRef         `json:"toolCall"`
	Args      json.RawMessage `json:"args"`
	Iteration int             `json:"iteration"`
}

type shouldStopAfterTurnContext struct {
	Messages     []loopMessage `json:"messages"`
	Iteration    int           `json:"iteration"`
	HadToolCalls bool          `json:"hadToolCalls"`
}

// modifyResult holds the result members the loop reads; an absent one is nil.
type modifyResult struct {
	Messages []loopMessage   `json:"messages"`
	Args     json.RawMessage `json:"args"`
	Content  *string         `json:"content"`
	IsError  *bool           `json:"isError"`
	Stop     *bool           `json:"stop"`
}

// search is the search tool: as many results as `limit` asks for.
func search(args searchArgs) string {
	return fmt.Sprintf("%d results for %s", args.Limit, args.Query)
}

// agentLoop is a small agent loop with a scripted model, shaped by the
// operation's modifying hooks. Each iteration calls Modify at
// transformContext and uses the messages it answers from then on, takes the
// scripted model's turn, calls Modify at beforeToolCall for the turn's tool
// call and runs the tool with the arguments it answers, then calls Modify at
// shouldStopAfterTurn and stops when told.
type agentLoop struct {
	client   agenthooksv1.HookServiceClient
	messages []loopMessage
	ids      int
}

func newAgentLoop(client agenthooksv1.HookServiceClient) *agentLoop {
	l := &agentLoop{client: client}
	l.messages = []loopMessage{l.message(func(id string) any { return userMessage{ID: id, Role: "user", Content: prompt} })}
	return l
}

// message writes the loop's next message, given its id.
func (l *agentLoop) message(build func(id string) any) loopMessage {
	l.ids++
	return loopMessage(toJSON(build(fmt.Sprintf("%s-loop-%d", operationID, l.ids))))
}

// modify runs the point's hooks and answers their composed result. A
// `blocked` answer is errModifyBlocked: the caller applies nothing (fail closed).
func (l *agentLoop) modify(point agenthooksv1.ModifyPoint, iteration int, pointContext any) (*modifyResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := l.client.Modify(ctx, &agenthooksv1.ModifyRequest{OperationId: operationID, Point: point, ContextJson: toJSON(pointContext)})
	if err != nil {
		return nil, fmt.Errorf("Modify: %w", err)
	}
	name := pointName(point)
	switch o := res.GetOutcome().(type) {
	case *agenthooksv1.ModifyResponse_Blocked:
		b := o.Blocked
		emit("Modify.blocked", field{"point", name}, field{"iteration", iteration}, field{"hookId", b.GetHookId()},
			field{"errorCode", b.GetErrorCode()}, field{"message", b.GetMessage()})
		return nil, fmt.Errorf("%w: %s blocked by %s: %s", errModifyBlocked, name, b.GetHookId(), b.GetMessage())
	case *agenthooksv1.ModifyResponse_ResultJson:
		var result modifyResult
		var members map[string]json.RawMessage
		if err := json.Unmarshal([]byte(o.ResultJson), &result); err != nil {
			return nil, fmt.Errorf("Modify: %w", err)
		}
		if err := json.Unmarshal([]byte(o.ResultJson), &members); err != nil {
			return nil, fmt.Errorf("Modify: %w", err)
		}
		changed := make([]string, 0, len(members))
		for member := range members {
			changed = append(changed, member)
		}
		sort.Strings(changed)
		fields := []field{{"point", name}, {"iteration", iteration}, {"changed", changed}}
		if point == agenthooksv1.ModifyPoint_MODIFY_POINT_SHOULD_STOP_AFTER_TURN {
			fields = append(fields, field{"stop", result.Stop != nil && *result.Stop})
		}
		emit("Modify", append(fields, field{"outcomes", outcomes(res.GetOutcomes())})...)
		return &result, nil
	default:
		return nil, errors.New("Modify answered without a result")
	}
}

func (l *agentLoop) run() error {
	for i, t := range script {
		iteration := i + 1
		transformed, err := l.modify(agenthooksv1.ModifyPoint_MODIFY_POINT_TRANSFORM_CONTEXT, iteration,
			transformContext{Messages: l.messages, Iteration: iteration})
		if err != nil {
			return err
		}
		// The hooks' messages replace the runtime's: the card number is gone for good.
		if transformed.Messages != nil {
			l.messages = transformed.Messages
		}

		var calls []loopToolCall
		if t.search != nil {
			calls = []loopToolCall{{ID: fmt.Sprintf("%s-loop-call-%d", operationID, iteration), Name: "search", Arguments: *t.search}}
		}
		l.messages = append(l.messages, l.message(func(id string) any {
			return assistantMessage{ID: id, Role: "assistant", Content: t.text, ToolCalls: calls}
		}))
		for _, call := range calls {
			result, err := l.callTool(call, iteration)
			if err != nil {
				return err
			}
			l.messages = append(l.messages, result)
		}

		stop, err := l.modify(agenthooksv1.ModifyPoint_MODIFY_POINT_SHOULD_STOP_AFTER_TURN, iteration,
			shouldStopAfterTurnContext{Messages: l.messages, Iteration: iteration, HadToolCalls: len(calls) > 0})
		if err != nil {
			return err
		}
		if stop.Stop != nil && *stop.Stop {
			emit("AgentLoop.stopped", field{"iteration", iteration}, field{"by", "shouldStopAfterTurn"})
			return nil
		}
		if len(calls) == 0 {
			emit("AgentLoop.stopped", field{"iteration", iteration}, field{"by", "noToolCalls"})
			return nil
		}
	}
	return errors.New("the scripted model has no more turns")
}

// callTool runs a tool call as the beforeToolCall hooks say, and answers its result message.
func (l *agentLoop) callTool(call loopToolCall, iteration int) (loopMessage, error) {
	args := json.RawMessage(toJSON(call.Arguments))
	before, err := l.modify(agenthooksv1.ModifyPoint_MODIFY_POINT_BEFORE_TOOL_CALL, iteration,
		beforeToolCallContext{ToolCall: toolRef{ID: call.ID, Name: call.Name}, Args: args, Iteration: iteration})
	if err != nil {
		return nil, err
	}
	var content string
	isError := before.IsError != nil && *before.IsError
	if before.Content != nil || isError {
		// A hook answered in the tool's place: the tool must not run.
		if before.Content != nil {
			content = *before.Content
		}
		emit("Tool.skipped", field{"name", call.Name}, field{"content", content}, field{"isError", isError})
	} else {
		if before.Args != nil {
			args = before.Args
		}
		var parsed searchArgs
		if err := json.Unmarshal(args, &parsed); err != nil {
			return nil, fmt.Errorf("%s: %w", call.Name, err)
		}
		content = search(parsed)
		emit("Tool", field{"name", call.Name}, field{"limit", parsed.Limit}, field{"content", content})
	}
	return l.message(func(id string) any {
		return toolResultMessage{ID: id, Role: "toolResult", ToolCallID: call.ID, ToolName: call.Name, Content: content, IsError: isError}
	}), nil
}

func runOperation() error {
	// host:port or unix:/path; grpc-go resolves both.
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := agenthooksv1.NewHookServiceClient(conn)
	if err := registerInvalidHook(client); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	registered, err := client.RegisterHooks(ctx, &agenthooksv1.RegisterHooksRequest{OperationId: operationID, Hooks: hooks()})
	if err != nil {
		return fmt.Errorf("RegisterHooks: %w", err)
	}
	emit("RegisterHooks", field{"operationId", operationID}, field{"hookCount", registered.GetHookCount()})

	// The streams live as long as the operation, so their context has no deadline.
	streamCtx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	handlers, err := openHandlerStream(streamCtx, client, []string{operationID})
	if err != nil {
		return fmt.Errorf("Handle: %w", err)
	}
	if err := handlers.waitAttached(); err != nil {
		return fmt.Errorf("Handle: %w", err)
	}
	notifications, err := openNotifier(streamCtx, client)
	if err != nil {
		return fmt.Errorf("DispatchStream: %w", err)
	}
	r := &runner{client: client, notifier: notifications}

	if err := r.dispatch(&agenthooksv1.HookEvent{Event: &agenthooksv1.HookEvent_BeforeStep{BeforeStep: &agenthooksv1.BeforeStepEvent{
		AgentId: agentID, OperationId: operationID, UserId: userID, StepIndex: 0, StepType: proto.String("call_tool"),
	}}}); err != nil {
		return err
	}

	read := toolCall{context: newToolCall("read", "fs", "readFile", map[string]any{"path": "notes/todo.md"}, 0, agenthooksv1.Executor_EXECUTOR_CLIENT), deferred: true}
	remove := toolCall{context: newToolCall("delete", "fs", "deleteFile", map[string]any{"path": "notes/todo.md"}, 1, agenthooksv1.Executor_EXECUTOR_SERVER)}
	search := toolCall{context: newToolCall("search", "web", "search", map[string]any{"query": "agenthooks sidecar"}, 2, agenthooksv1.Executor_EXECUTOR_SERVER)}
	for _, call := range []toolCall{read, remove, search} {
		if err := r.decide(call); err != nil {
			return err
		}
	}

	// The step's notifications reach the receivers before its afterStep.
	if err := notifications.flush(); err != nil {
		return fmt.Errorf("DispatchStream: %w", err)
	}

	if err := r.dispatch(&agenthooksv1.HookEvent{Event: &agenthooksv1.HookEvent_AfterStep{AfterStep: &agenthooksv1.AfterStepEvent{
		AgentId: agentID, OperationId: operationID, UserId: userID, StepIndex: 0, StepType: proto.String("call_tool"),
		Steps: 1, ToolCalls: proto.Int32(3), TotalToolCalls: proto.Int32(3),
	}}}); err != nil {
		return err
	}

	if err := r.publish(read, &agenthooksv1.ToolResult{Content: readResult, Success: true, ExecutionTime: proto.Float64(12)}); err != nil {
		return err
	}
	if err := notifications.close(); err != nil {
		return fmt.Errorf("DispatchStream: %w", err)
	}

	ctx3, cancel3 := context.WithTimeout(context.Background(), timeout)
	defer cancel3()
	registered, err = client.RegisterHooks(ctx3, &agenthooksv1.RegisterHooksRequest{OperationId: operationID, Hooks: modifyingHooks()})
	if err != nil {
		return fmt.Errorf("RegisterHooks: %w", err)
	}
	emit("RegisterHooks", field{"operationId", operationID}, field{"hookCount", registered.GetHookCount()})
	if err := newAgentLoop(client).run(); err != nil {
		return err
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), timeout)
	defer cancel2()
	done, err := client.CompleteOperation(ctx2, &agenthooksv1.CompleteOperationRequest{Event: &agenthooksv1.OnCompleteEvent{
		AgentId: agentID, OperationId: operationID, UserId: userID, Reason: "done",
		Status: proto.String("done"), TotalSteps: proto.Int32(1), TotalToolCalls: proto.Int32(3),
	}})
	if err != nil {
		return fmt.Errorf("CompleteOperation: %w", err)
	}
	emit("CompleteOperation", field{"reason", "done"}, field{"handlersDropped", done.GetHandlersDropped()},
		field{"outcomes", outcomes(done.GetOutcomes())})
	if err := handlers.close(); err != nil {
		return fmt.Errorf("Handle: %w", err)
	}
	return nil
}

func main() {
	if err := runOperation(); err != nil {
		fmt.Fprintf(os.Stderr, "agenthooks example failed: %v\n", err)
		os.Exit(1)
	}
}
