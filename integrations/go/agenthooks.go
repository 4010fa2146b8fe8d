// Package agenthooks connects a langchaingo agent to the agenthooks sidecar.
//
// It is thin over the generated gRPC client (clients/go, module
// agenthooks.local/client) and has three parts, all made by one [Hooks]
// per run:
//
//   - [Hooks.Tools] wraps the agent's tools: before a tool runs the sidecar
//     decides the call (DecideToolCall: allow runs it, deny returns the
//     blocked result instead, a local handler's mock returns the mock), after
//     it ran the sidecar checks the result (DecideToolResult); the
//     `beforeToolCall` modifying hooks may rewrite the arguments or answer in
//     the tool's place; `afterToolCall` (or `onToolCallError`) is dispatched;
//   - [Hooks.Handler] is the `callbacks.Handler` for the events: `beforeStep`
//     and `afterStep` around each model call, `onComplete` (and `onError`)
//     when the executor's chain ends; it also hands the tool wrapper the
//     agent action (the model's native tool call id) of each tool call;
//   - [Hooks.Model] wraps the model: the `transformContext` modifying hooks
//     see the messages of each model call (in the spec's message shape) and
//     the model gets the messages they answer, and the model call drives the
//     handler's step events.
//
// Fail closed: when the sidecar is unreachable or answers an error, the tool
// does not run and the run fails with an error that names agenthooks. With
// [Config.FailOpenNotifications] a failed event is logged and the run goes
// on; decisions and modifying hooks always fail closed.
//
// The mapping of langchaingo's ids to the spec's fields is in one place,
// [Hooks.toolContext] and the step events; the README's "Framework adapters:
// field mapping" table lists it.
package agenthooks

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"time"

	agenthooksv1 "agenthooks.local/client/agenthooks/v1"
	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/tools"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Errors the adapter wraps, for errors.Is: every error of the adapter names
// agenthooks and wraps one of these (and the gRPC error, when there is one).
var (
	// ErrSidecar: a call to the sidecar failed (unreachable, deadline, or an error answer).
	ErrSidecar = errors.New("sidecar call failed")
	// ErrBlocked: a modifying hook with onError: block failed; nothing of the point applies.
	ErrBlocked = errors.New("blocked")
	// ErrNoDecision: the sidecar answered without a decision or a result.
	ErrNoDecision = errors.New("no decision")
	// ErrUnknownToolCall: a tool ran for a call no model response (Hooks.Model) or agent action (Hooks.Handler) named.
	ErrUnknownToolCall = errors.New("unknown tool call")
	// ErrHandleFailed: the Handle stream ended during the run; the local handlers would be skipped.
	ErrHandleFailed = errors.New("handle stream failed")
	// ErrInvalidMessage: a modifying hook answered a message the adapter cannot convert (an unknown role).
	ErrInvalidMessage = errors.New("invalid message")
)

// DefaultIdentifier is the toolset identifier when [Config.Identifier] is empty.
const DefaultIdentifier = "default"

// DefaultTimeout bounds each call to the sidecar when [Config.Timeout] is zero.
const DefaultTimeout = 10 * time.Second

// HandleFunc serves one call of a local handler (a hook registered with
// `handler: true`) over the Handle stream: it answers done, a mock for
// `beforeToolCall`, a modified result for a modifying point, or an error.
// Calls run concurrently (up to 16 at once), each answered when it returns.
type HandleFunc func(ctx context.Context, call *agenthooksv1.HandlerCall) *agenthooksv1.HandlerReply

// Config is what the user supplies. Only Target (or Conn) is required.
type Config struct {
	// Target is the sidecar's gRPC address: host:port or unix:/path.
	Target string
	// Conn is an existing connection to use instead of dialing Target; Close leaves it open.
	Conn *grpc.ClientConn
	// OperationID is the run's operation id; empty means a fresh UUID.
	OperationID string
	// UserID is required: the step and terminal events must carry it (the
	// sidecar refuses them without), so New refuses a Config without it.
	UserID string
	// AgentID is sent on every event; empty means omitted where optional.
	AgentID string
	// Identifier is the toolset's identifier (`identifier`; matchers test
	// `identifier/apiName`); empty means [DefaultIdentifier].
	Identifier string
	// Timeout bounds each call to the sidecar; zero means [DefaultTimeout].
	Timeout time.Duration
	// FailOpenNotifications logs a failed event (Dispatch, CompleteOperation)
	// and goes on. Decisions and modifying hooks always fail closed.
	FailOpenNotifications bool
	// Handle, when set, serves the operation's local handlers: New attaches a
	// Handle stream for the operation and waits until the sidecar confirms it.
	Handle HandleFunc
	// Logf logs failed notifications under FailOpenNotifications; default log.Printf.
	Logf func(format string, args ...any)
}

// Hooks connects one run of a langchaingo agent to the sidecar. Make one per run.
type Hooks struct {
	cfg    Config
	conn   *grpc.ClientConn
	owned  bool
	client agenthooksv1.HookServiceClient
	handle *handleStream

	mu sync.Mutex
	// stepIndex is the 0-based index of the current (or next) model call.
	stepIndex int
	// totalToolCalls counts the tool calls the model asked for so far.
	totalToolCalls int
	// callIndex maps a tool call id to its position in its model response.
	callIndex map[string]int
	// callStep maps a tool call id to the step that asked for it.
	callStep map[string]int
	// action is the agent action the executor is about to run (HandleAgentAction).
	action *schema.AgentAction
	// lastText is the text of the last model response.
	lastText string
	// err is the first failure of an event; the model and tool wrappers return it.
	err error
	// completed is true once onComplete was sent.
	completed bool
	// pendingAfterStep is the afterStep of the current step, sent once its
	// pendingCalls tool calls ran (or when the next step or the end comes first).
	pendingAfterStep *agenthooksv1.AfterStepEvent
	pendingCalls     int
}

// New connects to the sidecar (and attaches the Handle stream when
// [Config.Handle] is set).
func New(cfg Config) (*Hooks, error) {
	if cfg.UserID == "" {
		return nil, errors.New("agenthooks: Config.UserID is required: the step and terminal events carry it, and the sidecar refuses them without")
	}
	if cfg.Identifier == "" {
		cfg.Identifier = DefaultIdentifier
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	if cfg.OperationID == "" {
		cfg.OperationID = newUUID()
	}
	h := &Hooks{cfg: cfg, callIndex: map[string]int{}, callStep: map[string]int{}}
	if cfg.Conn != nil {
		h.conn = cfg.Conn
	} else {
		if cfg.Target == "" {
			return nil, errors.New("agenthooks: Config.Target is required")
		}
		conn, err := grpc.NewClient(cfg.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("agenthooks: connect to %s: %w", cfg.Target, err)
		}
		h.conn, h.owned = conn, true
	}
	h.client = agenthooksv1.NewHookServiceClient(h.conn)
	if cfg.Handle != nil {
		stream, err := openHandleStream(h.client, cfg.OperationID, cfg.Handle, cfg.Timeout)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("agenthooks: Handle: %w", err)
		}
		h.handle = stream
	}
	return h, nil
}

// OperationID is the run's operation id.
func (h *Hooks) OperationID() string { return h.cfg.OperationID }

// Err is the first failure of an event that the handler could not return
// (langchaingo's callbacks return nothing), such as a failed onComplete.
func (h *Hooks) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Close ends the Handle stream and closes the connection New made.
func (h *Hooks) Close() error {
	if h.handle != nil {
		h.handle.close()
	}
	if h.owned {
		return h.conn.Close()
	}
	return nil
}

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (h *Hooks) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, h.cfg.Timeout)
}

// fail records the first failure of an event.
func (h *Hooks) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

// notify handles a failed event: logged under FailOpenNotifications, else recorded and returned.
func (h *Hooks) notify(err error) error {
	if err == nil {
		return nil
	}
	if h.cfg.FailOpenNotifications {
		h.cfg.Logf("%v (ignored: FailOpenNotifications)", err)
		return nil
	}
	h.fail(err)
	return err
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return proto.String(s)
}

// checkOutcomes fails when an answer shows this run's local handler lost mid-call
// (outcome error code handler_detached): the stream broke while the sidecar
// waited for a reply, and the answer was made without it. Read from the answer
// itself, so it does not depend on when the stream's own goroutine sees the end.
func (h *Hooks) checkOutcomes(outcomes []*agenthooksv1.HookOutcome) error {
	if h.handle == nil {
		return nil
	}
	for _, o := range outcomes {
		if o.GetErrorCode() == "handler_detached" {
			return fmt.Errorf("agenthooks: %w: hook %s lost its handler mid-call", ErrHandleFailed, o.GetHookId())
		}
	}
	return nil
}

// checkHandlers fails when the Handle stream ended while the run goes on:
// the sidecar would skip the operation's local handlers (a handler's mock, a
// modifying handler's rewrite) and the call would go on without them.
func (h *Hooks) checkHandlers() error {
	if h.handle == nil {
		return nil
	}
	if err := h.handle.failure(); err != nil {
		return fmt.Errorf("agenthooks: %w: %w", ErrHandleFailed, err)
	}
	return nil
}

// dispatch sends one event and waits for its hooks (Dispatch is awaited, so receivers see events in order).
func (h *Hooks) dispatch(ctx context.Context, event *agenthooksv1.HookEvent) error {
	if err := h.checkHandlers(); err != nil {
		return err
	}
	c, cancel := h.ctx(ctx)
	defer cancel()
	if _, err := h.client.Dispatch(c, &agenthooksv1.DispatchRequest{Event: event}); err != nil {
		return fmt.Errorf("agenthooks: Dispatch %s: %w: %w", eventName(event), ErrSidecar, err)
	}
	return nil
}

func eventName(event *agenthooksv1.HookEvent) string {
	m := event.ProtoReflect()
	if f := m.WhichOneof(m.Descriptor().Oneofs().ByName("event")); f != nil {
		return f.JSONName()
	}
	return "event"
}

// ---- events: the callbacks.Handler ----

// Handler is the callbacks.Handler that sends the events; attach it to the
// executor (agents.WithCallbacksHandler). The model wrapper calls its LLM
// callbacks, so do not attach it to the wrapped model as well.
func (h *Hooks) Handler() callbacks.Handler { return handler{h: h} }

type handler struct {
	callbacks.SimpleHandler
	h *Hooks
}

var _ callbacks.Handler = handler{}

// HandleLLMGenerateContentStart dispatches beforeStep.
func (r handler) HandleLLMGenerateContentStart(ctx context.Context, _ []llms.MessageContent) {
	h := r.h
	h.mu.Lock()
	step := h.stepIndex
	h.mu.Unlock()
	_ = h.notify(h.dispatch(ctx, &agenthooksv1.HookEvent{Event: &agenthooksv1.HookEvent_BeforeStep{
		BeforeStep: &agenthooksv1.BeforeStepEvent{
			AgentId: h.cfg.AgentID, OperationId: h.cfg.OperationID, UserId: h.cfg.UserID,
			StepIndex: int32(step), Steps: int32(step),
		},
	}}))
}

// HandleLLMGenerateContentEnd dispatches afterStep and numbers the response's tool calls.
func (r handler) HandleLLMGenerateContentEnd(ctx context.Context, res *llms.ContentResponse) {
	h := r.h
	text := ""
	var calls []llms.ToolCall
	if res != nil && len(res.Choices) > 0 {
		text = res.Choices[0].Content
		calls = res.Choices[0].ToolCalls
	}
	h.mu.Lock()
	step := h.stepIndex
	for i, c := range calls {
		h.callIndex[c.ID] = i
		h.callStep[c.ID] = step
	}
	h.totalToolCalls += len(calls)
	total := h.totalToolCalls
	h.stepIndex++
	h.lastText = text
	h.mu.Unlock()
	event := &agenthooksv1.AfterStepEvent{
		AgentId: h.cfg.AgentID, OperationId: h.cfg.OperationID, UserId: h.cfg.UserID,
		StepIndex: int32(step), Steps: int32(step + 1),
		Content:   optional(text),
		ToolCalls: proto.Int32(int32(len(calls))), TotalToolCalls: proto.Int32(int32(total)),
	}
	// The step ends once its tools ran: langchaingo runs them after this
	// callback, so afterStep waits for the last of them.
	h.mu.Lock()
	h.pendingAfterStep, h.pendingCalls = event, len(calls)
	h.mu.Unlock()
	if len(calls) == 0 {
		_ = h.flushAfterStep(ctx)
	}
}

// flushAfterStep sends the pending afterStep, if any.
func (h *Hooks) flushAfterStep(ctx context.Context) error {
	h.mu.Lock()
	event := h.pendingAfterStep
	h.pendingAfterStep, h.pendingCalls = nil, 0
	h.mu.Unlock()
	if event == nil {
		return nil
	}
	return h.notify(h.dispatch(ctx, &agenthooksv1.HookEvent{Event: &agenthooksv1.HookEvent_AfterStep{AfterStep: event}}))
}

// toolDone counts one tool call of the step as done; after the last one it sends afterStep.
func (h *Hooks) toolDone(ctx context.Context) error {
	h.mu.Lock()
	h.pendingCalls--
	last := h.pendingCalls <= 0
	h.mu.Unlock()
	if !last {
		return nil
	}
	return h.flushAfterStep(ctx)
}

// HandleAgentAction remembers the action the executor runs next: its tool call id.
func (r handler) HandleAgentAction(_ context.Context, action schema.AgentAction) {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	a := action
	r.h.action = &a
}

// HandleChainEnd completes the operation (reason done).
func (r handler) HandleChainEnd(ctx context.Context, outputs map[string]any) {
	final, _ := outputs["output"].(string)
	_ = r.h.complete(ctx, final, nil)
}

// HandleChainError completes the operation with reason error (onComplete, then onError).
func (r handler) HandleChainError(ctx context.Context, err error) {
	_ = r.h.complete(ctx, "", err)
}

// complete sends onComplete once (CompleteOperation; with an error also onError).
func (h *Hooks) complete(ctx context.Context, final string, runErr error) error {
	_ = h.flushAfterStep(context.WithoutCancel(ctx))
	h.mu.Lock()
	if h.completed {
		h.mu.Unlock()
		return nil
	}
	h.completed = true
	steps, toolCalls := h.stepIndex, h.totalToolCalls
	if final == "" {
		final = h.lastText
	}
	h.mu.Unlock()
	event := &agenthooksv1.OnCompleteEvent{
		AgentId: h.cfg.AgentID, OperationId: h.cfg.OperationID, UserId: h.cfg.UserID,
		Reason: "done", Status: proto.String("done"),
		Steps: proto.Int32(int32(steps)), ToolCalls: proto.Int32(int32(toolCalls)),
	}
	if runErr != nil {
		event.Reason, event.Status, event.ErrorMessage = "error", proto.String("error"), runErr.Error()
	} else {
		event.LastAssistantContent = optional(final)
	}
	c, cancel := h.ctx(context.WithoutCancel(ctx))
	defer cancel()
	if _, err := h.client.CompleteOperation(c, &agenthooksv1.CompleteOperationRequest{Event: event}); err != nil {
		return h.notify(fmt.Errorf("agenthooks: CompleteOperation: %w: %w", ErrSidecar, err))
	}
	return nil
}

// ---- transformContext: the model wrapper ----

// Model wraps a model: each call runs the handler's step events and the
// `transformContext` modifying hooks, and the model gets the messages they
// answer. A `blocked` answer or a failure of the sidecar fails the call.
func (h *Hooks) Model(inner llms.Model) llms.Model { return &model{h: h, inner: inner} }

type model struct {
	h     *Hooks
	inner llms.Model
}

func (m *model) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	h := m.h
	if err := h.Err(); err != nil {
		return nil, err
	}
	if err := h.flushAfterStep(ctx); err != nil {
		return nil, err
	}
	hd := handler{h: h}
	hd.HandleLLMGenerateContentStart(ctx, messages)
	if err := h.Err(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	step := h.stepIndex
	h.mu.Unlock()
	transformed, err := h.transformContext(ctx, messages, step)
	if err != nil {
		return nil, err
	}
	res, err := m.inner.GenerateContent(ctx, transformed, options...)
	if err != nil {
		return nil, err
	}
	hd.HandleLLMGenerateContentEnd(ctx, res)
	if err := h.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

func (m *model) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// Message is a message in the spec's shape (hookbus-hooks.md), as the
// modifying points get and answer it. From langchaingo: role system ->
// "system", human/generic -> "user", ai -> "assistant" (its tool calls in
// toolCalls, arguments parsed), tool -> "toolResult". A "toolResult" message
// always carries toolCallId, toolName and isError, as every adapter sends
// it: toolName is the name of the preceding assistant tool call with that id
// when langchaingo's ToolCallResponse has none, and isError is false
// (langchaingo's tool responses carry no error flag).
type Message struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	ToolCalls  []ToolCallJSON `json:"toolCalls,omitempty"`
	ToolCallID string         `json:"toolCallId,omitempty"`
	ToolName   string         `json:"toolName,omitempty"`
	IsError    bool           `json:"isError,omitempty"`
}

// MarshalJSON writes a "toolResult" message with all of its fields (an empty
// toolName and a false isError included), other messages without the fields
// they do not have.
func (m Message) MarshalJSON() ([]byte, error) {
	type plain Message
	if m.Role != "toolResult" {
		return json.Marshal(plain(m))
	}
	return json.Marshal(struct {
		Role       string `json:"role"`
		ToolCallID string `json:"toolCallId"`
		ToolName   string `json:"toolName"`
		Content    string `json:"content"`
		IsError    bool   `json:"isError"`
	}{m.Role, m.ToolCallID, m.ToolName, m.Content, m.IsError})
}

// ToolCallJSON is a tool call of an assistant message in the spec's shape.
type ToolCallJSON struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToMessages converts langchaingo messages to the spec's shape.
func ToMessages(in []llms.MessageContent) []Message {
	out := make([]Message, 0, len(in))
	// The name of each tool call the assistant messages so far asked for, by id.
	names := map[string]string{}
	for _, mc := range in {
		var m Message
		switch mc.Role {
		case llms.ChatMessageTypeSystem:
			m.Role = "system"
		case llms.ChatMessageTypeAI:
			m.Role = "assistant"
		case llms.ChatMessageTypeTool, llms.ChatMessageTypeFunction:
			m.Role = "toolResult"
		default:
			m.Role = "user"
		}
		var text []string
		for _, part := range mc.Parts {
			switch p := part.(type) {
			case llms.TextContent:
				text = append(text, p.Text)
			case llms.ToolCall:
				call := ToolCallJSON{ID: p.ID}
				args := "{}"
				if p.FunctionCall != nil {
					call.Name = p.FunctionCall.Name
					args = p.FunctionCall.Arguments
				}
				if !json.Valid([]byte(args)) {
					b, _ := json.Marshal(args)
					args = string(b)
				}
				call.Arguments = json.RawMessage(args)
				m.ToolCalls = append(m.ToolCalls, call)
				names[call.ID] = call.Name
			case llms.ToolCallResponse:
				m.ToolCallID, m.ToolName = p.ToolCallID, p.Name
				if m.ToolName == "" {
					m.ToolName = names[p.ToolCallID]
				}
				text = append(text, p.Content)
			}
		}
		m.Content = strings.Join(text, "")
		out = append(out, m)
	}
	return out
}

// FromMessages converts messages in the spec's shape back to langchaingo's.
// A message of another role than system, user, assistant or toolResult is an
// error: what a hook meant by it is unknown, so it is not passed on as a user's.
func FromMessages(in []Message) ([]llms.MessageContent, error) {
	out := make([]llms.MessageContent, 0, len(in))
	for _, m := range in {
		switch m.Role {
		case "system":
			out = append(out, llms.TextParts(llms.ChatMessageTypeSystem, m.Content))
		case "assistant":
			mc := llms.MessageContent{Role: llms.ChatMessageTypeAI}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				mc.Parts = append(mc.Parts, llms.TextContent{Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				mc.Parts = append(mc.Parts, llms.ToolCall{ID: c.ID, Type: "function",
					FunctionCall: &llms.FunctionCall{Name: c.Name, Arguments: string(c.Arguments)}})
			}
			out = append(out, mc)
		case "toolResult", "tool":
			out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{
				llms.ToolCallResponse{ToolCallID: m.ToolCallID, Name: m.ToolName, Content: m.Content},
			}})
		case "user":
			out = append(out, llms.TextParts(llms.ChatMessageTypeHuman, m.Content))
		default:
			return nil, fmt.Errorf("agenthooks: transformContext answered a message of role %q: %w", m.Role, ErrInvalidMessage)
		}
	}
	return out, nil
}

// modify runs the hooks of one point and answers the composed result (fail closed).
func (h *Hooks) modify(ctx context.Context, point agenthooksv1.ModifyPoint, pointContext any, result any) error {
	body, err := json.Marshal(pointContext)
	if err != nil {
		return fmt.Errorf("agenthooks: Modify: %w", err)
	}
	name := pointName(point)
	if err := h.checkHandlers(); err != nil {
		return err
	}
	c, cancel := h.ctx(ctx)
	defer cancel()
	res, err := h.client.Modify(c, &agenthooksv1.ModifyRequest{
		OperationId: h.cfg.OperationID, Point: point, ContextJson: string(body),
	})
	if err != nil {
		return fmt.Errorf("agenthooks: Modify %s: %w: %w", name, ErrSidecar, err)
	}
	// A stream that broke while the sidecar answered may have had its handlers skipped.
	if err := h.checkHandlers(); err != nil {
		return err
	}
	if err := h.checkOutcomes(res.GetOutcomes()); err != nil {
		return err
	}
	switch o := res.GetOutcome().(type) {
	case *agenthooksv1.ModifyResponse_Blocked:
		return fmt.Errorf("agenthooks: Modify %s %w by hook %s: %s", name, ErrBlocked, o.Blocked.GetHookId(), o.Blocked.GetMessage())
	case *agenthooksv1.ModifyResponse_ResultJson:
		if err := json.Unmarshal([]byte(o.ResultJson), result); err != nil {
			return fmt.Errorf("agenthooks: Modify %s: %w", name, err)
		}
		return nil
	default:
		return fmt.Errorf("agenthooks: Modify %s answered without a result: %w", name, ErrNoDecision)
	}
}

// pointName is the spec's name of a modifying point, such as beforeToolCall.
func pointName(point agenthooksv1.ModifyPoint) string {
	words := strings.Split(strings.ToLower(strings.TrimPrefix(point.String(), "MODIFY_POINT_")), "_")
	for i := 1; i < len(words); i++ {
		if words[i] != "" {
			words[i] = strings.ToUpper(words[i][:1]) + words[i][1:]
		}
	}
	return strings.Join(words, "")
}

// transformContext runs the transformContext hooks; iteration is stepIndex + 1.
func (h *Hooks) transformContext(ctx context.Context, messages []llms.MessageContent, step int) ([]llms.MessageContent, error) {
	var result struct {
		Messages []Message `json:"messages"`
	}
	err := h.modify(ctx, agenthooksv1.ModifyPoint_MODIFY_POINT_TRANSFORM_CONTEXT,
		map[string]any{"messages": ToMessages(messages), "iteration": step + 1}, &result)
	if err != nil {
		return nil, err
	}
	if result.Messages == nil {
		return messages, nil
	}
	return FromMessages(result.Messages)
}

// ---- decisions: the tool wrapper ----

// Tools wraps tools so that the sidecar decides each call. The executor must
// have [Hooks.Handler] as its callbacks handler (it supplies the tool call ids).
func (h *Hooks) Tools(ts ...tools.Tool) []tools.Tool {
	out := make([]tools.Tool, len(ts))
	for i, t := range ts {
		out[i] = &tool{h: h, inner: t}
	}
	return out
}

type tool struct {
	h     *Hooks
	inner tools.Tool
}

func (t *tool) Name() string        { return t.inner.Name() }
func (t *tool) Description() string { return t.inner.Description() }

// toolContext maps langchaingo's ids to the spec's tool-call context.
func (h *Hooks) toolContext(action schema.AgentAction, apiName string, args map[string]any) (*agenthooksv1.ToolCallContext, error) {
	h.mu.Lock()
	callIndex, ok := h.callIndex[action.ToolID]
	step := h.callStep[action.ToolID]
	h.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("agenthooks: tool call %q of %s was not in a model response seen by Hooks.Model: %w", action.ToolID, apiName, ErrUnknownToolCall)
	}
	s, err := structpb.NewStruct(args)
	if err != nil {
		return nil, fmt.Errorf("agenthooks: arguments of %s: %w", apiName, err)
	}
	return &agenthooksv1.ToolCallContext{
		ToolCallId:         action.ToolID,
		AssistantMessageId: fmt.Sprintf("%s:assistant:%d", h.cfg.OperationID, step),
		Identifier:         h.cfg.Identifier,
		ApiName:            apiName,
		Args:               s,
		CallIndex:          int32(callIndex),
		StepIndex:          int32(step),
		OperationId:        h.cfg.OperationID,
		Executor:           agenthooksv1.Executor_EXECUTOR_SERVER,
		AgentId:            optional(h.cfg.AgentID),
		UserId:             optional(h.cfg.UserID),
	}, nil
}

// parseArgs reads the tool input as a JSON object; other input is {"input": <text>}.
func parseArgs(input string) (map[string]any, bool) {
	var args map[string]any
	if json.Unmarshal([]byte(input), &args) == nil && args != nil {
		return args, true
	}
	return map[string]any{"input": input}, false
}

// Call runs the tool as the sidecar decides; the step's afterStep follows its last tool call.
func (t *tool) Call(ctx context.Context, input string) (string, error) {
	out, err := t.call(ctx, input)
	if doneErr := t.h.toolDone(ctx); doneErr != nil && err == nil {
		return "", doneErr
	}
	return out, err
}

func (t *tool) call(ctx context.Context, input string) (string, error) {
	h := t.h
	if err := h.Err(); err != nil {
		return "", err
	}
	if err := h.checkHandlers(); err != nil {
		return "", err
	}
	h.mu.Lock()
	action := h.action
	h.action = nil
	h.mu.Unlock()
	name := t.inner.Name()
	if action == nil || !strings.EqualFold(action.Tool, name) {
		return "", fmt.Errorf("agenthooks: no agent action for tool %s (set Hooks.Handler() as the executor's callbacks handler): %w", name, ErrUnknownToolCall)
	}
	args, isObject := parseArgs(input)

	// beforeToolCall modifying hooks: argument rewrite or an answer in the tool's place.
	h.mu.Lock()
	iteration := h.callStep[action.ToolID] + 1
	h.mu.Unlock()
	var before struct {
		Content *string        `json:"content"`
		IsError *bool          `json:"isError"`
		Args    map[string]any `json:"args"`
	}
	err := h.modify(ctx, agenthooksv1.ModifyPoint_MODIFY_POINT_BEFORE_TOOL_CALL, map[string]any{
		"toolCall": map[string]any{"id": action.ToolID, "name": name}, "args": args, "iteration": iteration,
	}, &before)
	if err != nil {
		return "", err
	}
	if before.Args != nil {
		args = before.Args
	}
	callCtx, err := h.toolContext(*action, name, args)
	if err != nil {
		return "", err
	}

	// The controls run for every call, a modifying hook's answer included.
	c, cancel := h.ctx(ctx)
	decision, err := h.client.DecideToolCall(c, &agenthooksv1.DecideToolCallRequest{
		Event: &agenthooksv1.BeforeToolCallEvent{Context: callCtx},
	})
	cancel()
	if err != nil {
		return "", fmt.Errorf("agenthooks: DecideToolCall %s/%s: %w: %w", h.cfg.Identifier, name, ErrSidecar, err)
	}
	if err := h.checkHandlers(); err != nil {
		return "", err
	}
	if err := h.checkOutcomes(decision.GetOutcomes()); err != nil {
		return "", err
	}
	// What stands in for the tool: a local handler's mock, else a
	// beforeToolCall modifying hook's answer; either is a mocked result.
	var stand *agenthooksv1.ToolResult
	switch d := decision.GetDecision().GetOutcome().(type) {
	case *agenthooksv1.Decision_Deny:
		result := d.Deny.GetBlockedResult()
		return result.GetContent(), h.afterToolCall(ctx, callCtx, result, false)
	case *agenthooksv1.Decision_Mock:
		stand = d.Mock.GetResult()
		if stand == nil {
			stand = &agenthooksv1.ToolResult{}
		}
	case *agenthooksv1.Decision_Allow:
		if before.Content != nil || (before.IsError != nil && *before.IsError) {
			content := ""
			if before.Content != nil {
				content = *before.Content
			}
			stand = &agenthooksv1.ToolResult{Content: content, Success: before.IsError == nil || !*before.IsError}
		}
	default:
		return "", fmt.Errorf("agenthooks: DecideToolCall %s/%s: %w", h.cfg.Identifier, name, ErrNoDecision)
	}
	mocked := stand != nil

	result := stand
	if !mocked {
		toolInput := input
		if before.Args != nil {
			if isObject || len(before.Args) != 1 || before.Args["input"] == nil {
				b, _ := json.Marshal(before.Args)
				toolInput = string(b)
			} else if s, ok := before.Args["input"].(string); ok {
				toolInput = s
			}
		}
		output, runErr := t.inner.Call(ctx, toolInput)
		if runErr != nil {
			event := &agenthooksv1.HookEvent{Event: &agenthooksv1.HookEvent_OnToolCallError{
				OnToolCallError: &agenthooksv1.OnToolCallErrorEvent{Context: callCtx, Error: runErr.Error()},
			}}
			if err := h.notify(h.dispatch(ctx, event)); err != nil {
				return "", errors.Join(runErr, err)
			}
			return "", runErr
		}
		result = &agenthooksv1.ToolResult{Content: output, Success: true}
	}

	// The result controls see every result the model would read, a mock's too.
	c, cancel = h.ctx(ctx)
	checked, err := h.client.DecideToolResult(c, &agenthooksv1.DecideToolResultRequest{
		Event: &agenthooksv1.AfterToolCallEvent{Context: callCtx, Mocked: mocked, Result: result},
	})
	cancel()
	if err != nil {
		return "", fmt.Errorf("agenthooks: DecideToolResult %s/%s: %w: %w", h.cfg.Identifier, name, ErrSidecar, err)
	}
	if err := h.checkOutcomes(checked.GetOutcomes()); err != nil {
		return "", err
	}
	switch d := checked.GetDecision().GetOutcome().(type) {
	case *agenthooksv1.Decision_Deny:
		result = d.Deny.GetBlockedResult()
	case *agenthooksv1.Decision_Allow:
	default:
		return "", fmt.Errorf("agenthooks: DecideToolResult %s/%s: %w", h.cfg.Identifier, name, ErrNoDecision)
	}
	return result.GetContent(), h.afterToolCall(ctx, callCtx, result, mocked)
}

// afterToolCall dispatches the tool's afterToolCall notification (awaited).
func (h *Hooks) afterToolCall(ctx context.Context, callCtx *agenthooksv1.ToolCallContext, result *agenthooksv1.ToolResult, mocked bool) error {
	return h.notify(h.dispatch(ctx, &agenthooksv1.HookEvent{Event: &agenthooksv1.HookEvent_AfterToolCall{
		AfterToolCall: &agenthooksv1.AfterToolCallEvent{Context: callCtx, Mocked: mocked, Result: result},
	}}))
}

// ---- local handlers: the Handle stream ----

// handlerWorkers bounds the local handler calls that run at once.
const handlerWorkers = 16

type handleStream struct {
	stream grpc.BidiStreamingClient[agenthooksv1.HandleRequest, agenthooksv1.HandleResponse]
	cancel context.CancelFunc
	sendMu sync.Mutex
	done   chan struct{}
	// workers holds one token per handler call running.
	workers chan struct{}
	// errMu guards closing and ended.
	errMu sync.Mutex
	// closing: close was called, so the stream's end is this side's doing.
	closing bool
	// ended: why the stream ended, when this side did not end it.
	ended error
}

// failure is why the stream ended when this side did not close it, else nil.
func (s *handleStream) failure() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.ended
}

// end records why the stream ended, unless this side is closing it.
func (s *handleStream) end(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if !s.closing && s.ended == nil {
		s.ended = err
	}
}

func openHandleStream(client agenthooksv1.HookServiceClient, operationID string, fn HandleFunc, timeout time.Duration) (*handleStream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.Handle(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &handleStream{stream: stream, cancel: cancel, done: make(chan struct{}), workers: make(chan struct{}, handlerWorkers)}
	if err := s.send(&agenthooksv1.HandleRequest{Message: &agenthooksv1.HandleRequest_Attach{
		Attach: &agenthooksv1.HandleAttach{OperationIds: []string{operationID}},
	}}); err != nil {
		cancel()
		return nil, err
	}
	attached := make(chan error, 1)
	go s.serve(ctx, fn, attached)
	select {
	case err := <-attached:
		if err != nil {
			cancel()
			return nil, err
		}
	case <-time.After(timeout):
		cancel()
		return nil, errors.New("the sidecar did not confirm the attachment")
	}
	return s, nil
}

func (s *handleStream) send(req *agenthooksv1.HandleRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(req)
}

func (s *handleStream) serve(ctx context.Context, fn HandleFunc, attached chan<- error) {
	defer close(s.done)
	for {
		msg, err := s.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the Handle stream ended")
			}
			s.end(err)
			select {
			case attached <- err:
			default:
			}
			return
		}
		switch m := msg.GetMessage().(type) {
		case *agenthooksv1.HandleResponse_Attached:
			select {
			case attached <- nil:
			default:
			}
		case *agenthooksv1.HandleResponse_Call:
			// Each call is answered when it completes, not in turn: a slow call must not
			// hold back the calls of concurrent tool or model calls past the sidecar's
			// --handler-timeout. At most handlerWorkers run at once; the next waits here.
			select {
			case s.workers <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func(call *agenthooksv1.HandlerCall) {
				defer func() { <-s.workers }()
				s.answer(ctx, fn, call)
			}(m.Call)
		}
	}
}

// answer serves one call and sends its reply; a failed send ends the stream.
func (s *handleStream) answer(ctx context.Context, fn HandleFunc, call *agenthooksv1.HandlerCall) {
	reply := fn(ctx, call)
	if reply == nil {
		reply = &agenthooksv1.HandlerReply{Outcome: &agenthooksv1.HandlerReply_Done{Done: &agenthooksv1.HandlerDone{}}}
	}
	reply.CallId = call.GetCallId()
	if err := s.send(&agenthooksv1.HandleRequest{Message: &agenthooksv1.HandleRequest_Reply{Reply: reply}}); err != nil {
		s.end(err)
	}
}

func (s *handleStream) close() {
	s.errMu.Lock()
	s.closing = true
	s.errMu.Unlock()
	s.sendMu.Lock()
	_ = s.stream.CloseSend()
	s.sendMu.Unlock()
	select {
	case <-s.done:
	case <-time.After(2 * time.Second):
	}
	s.cancel()
}

// MockReply answers a beforeToolCall handler call with a mock result.
func MockReply(content string) *agenthooksv1.HandlerReply {
	return &agenthooksv1.HandlerReply{Outcome: &agenthooksv1.HandlerReply_Mock{
		Mock: &agenthooksv1.HandlerMock{Result: &agenthooksv1.ToolResult{Content: content, Success: true}},
	}}
}
