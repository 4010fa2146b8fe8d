// Command canonical runs the canonical scenario of the framework adapters
// with langchaingo: an OpenAI-functions agent on a scripted model (no network,
// no weights) whose first step calls get_weather {"city":"Paris"} (id
// call_weather_1) and whose second step answers "It is sunny in Paris.",
// connected to the sidecar by the agenthooks adapter. It registers no hooks:
// the caller registers them on the operation first.
//
// It prints one JSON line {"final":"<final text>","toolRuns":<n>} and exits 0,
// or prints the error on stderr and exits 1. With --trace the line also holds
// the tool's arguments (toolArgs) and the messages the model got at each step
// (modelInputs, as the spec's messages), and a failed run prints it too, with
// `error` in place of `final`. With --scenario mock it serves a local handler that mocks
// every beforeToolCall call with "mocked weather". With --scenario concurrent
// it makes two model calls at once instead of the run, and serves a local
// handler (a transformContext hook) that answers each call once both reached
// it, or after 5 s; it prints {"met":N}, N the calls that saw the other one.
// With --pause-after-attach it
// prints {"attached":true} once its Handle stream is attached and waits for a
// line on stdin before it runs.
//
//	go run ./cmd/canonical --target 127.0.0.1:PORT --operation-id ID
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	agenthooksv1 "agenthooks.local/client/agenthooks/v1"
	agenthooks "agenthooks.local/langchaingo"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
)

// scriptedModel is an llms.Model that answers from a script: a tool call, then text.
type scriptedModel struct {
	mu     sync.Mutex
	step   int
	inputs [][]agenthooks.Message
}

func (m *scriptedModel) GenerateContent(_ context.Context, messages []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inputs = append(m.inputs, agenthooks.ToMessages(messages))
	m.step++
	switch m.step {
	case 1:
		return &llms.ContentResponse{Choices: []*llms.ContentChoice{{
			StopReason: "tool_calls",
			ToolCalls: []llms.ToolCall{{ID: "call_weather_1", Type: "function",
				FunctionCall: &llms.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		}}}, nil
	case 2:
		return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "It is sunny in Paris.", StopReason: "stop"}}}, nil
	default:
		return nil, errors.New("the scripted model has no more steps")
	}
}

func (m *scriptedModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// weather is the get_weather tool; it counts its runs and keeps the arguments it got.
type weather struct {
	mu   sync.Mutex
	runs int
	args []json.RawMessage
}

func (w *weather) Name() string        { return "get_weather" }
func (w *weather) Description() string { return "The weather in a city." }
func (w *weather) Call(_ context.Context, input string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runs++
	w.args = append(w.args, json.RawMessage(input))
	var args struct {
		City string `json:"city"`
	}
	if err := json.Unmarshal([]byte(input), &args); err != nil {
		return "", fmt.Errorf("get_weather: %w", err)
	}
	return "sunny in " + args.City, nil
}

func run() error {
	target := flag.String("target", "", "the sidecar's gRPC address, host:port")
	operationID := flag.String("operation-id", "", "the run's operation id")
	scenario := flag.String("scenario", "canonical", "canonical or mock")
	trace := flag.Bool("trace", false, "add toolArgs and modelInputs to the output line")
	mockBytes := flag.Int("mock-bytes", 0, "with --scenario mock, a mock of this many bytes instead of the text")
	pause := flag.Bool("pause-after-attach", false, "print {\"attached\":true} once attached, then wait for a line on stdin")
	userID := flag.String("user-id", "user-1", "the run's user id (an empty one is refused)")
	flag.Parse()
	if *target == "" {
		return errors.New("--target is required")
	}

	cfg := agenthooks.Config{
		Target: *target, OperationID: *operationID,
		UserID: *userID, AgentID: "agent-1", Identifier: "weather",
	}
	if *scenario == "mock" {
		cfg.Handle = func(_ context.Context, call *agenthooksv1.HandlerCall) *agenthooksv1.HandlerReply {
			if call.GetEvent().GetBeforeToolCall() != nil {
				if *mockBytes > 0 {
					return agenthooks.MockReply(strings.Repeat("x", *mockBytes))
				}
				return agenthooks.MockReply("mocked weather")
			}
			return nil
		}
	} else if *scenario == "concurrent" {
		cfg.Handle = meetingHandler(2, 5*time.Second)
	} else if *scenario != "canonical" {
		return fmt.Errorf("unknown --scenario %q", *scenario)
	}
	hooks, err := agenthooks.New(cfg)
	if err != nil {
		return err
	}
	defer hooks.Close()
	if *pause {
		// For a test that breaks the connection now: go on at a line on stdin.
		fmt.Println(`{"attached":true}`)
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return fmt.Errorf("waiting on stdin: %w", err)
		}
	}

	if *scenario == "concurrent" {
		return concurrentModelCalls(hooks)
	}

	llm := &scriptedModel{}
	tool := &weather{}
	agent := agents.NewOpenAIFunctionsAgent(hooks.Model(llm), hooks.Tools(tool))
	executor := agents.NewExecutor(agent, agents.WithCallbacksHandler(hooks.Handler()), agents.WithMaxIterations(4))
	out, err := chains.Call(context.Background(), executor, map[string]any{"input": "What is the weather in Paris?"})
	if err == nil {
		err = hooks.Err()
	}
	line := map[string]any{"toolRuns": tool.runs}
	if err != nil {
		line["error"] = err.Error()
	} else {
		line["final"], _ = out["output"].(string)
	}
	if *trace {
		line["toolArgs"] = tool.args
		line["modelInputs"] = llm.inputs
	}
	if err == nil || *trace {
		b, jsonErr := json.Marshal(line)
		if jsonErr != nil {
			return jsonErr
		}
		fmt.Println(string(b))
	}
	return err
}

// met counts the handler calls that saw the other calls in flight.
var met atomic.Int32

// meetingHandler answers each call (no change) once n calls are in flight at
// once, or after wait: a handler served one call at a time never meets another.
func meetingHandler(n int, wait time.Duration) agenthooks.HandleFunc {
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	return func(_ context.Context, _ *agenthooksv1.HandlerCall) *agenthooksv1.HandlerReply {
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			met.Add(1)
		case <-time.After(wait):
		}
		return &agenthooksv1.HandlerReply{Outcome: &agenthooksv1.HandlerReply_Modified{
			Modified: &agenthooksv1.HandlerModified{ResultJson: "{}"},
		}}
	}
}

// concurrentModelCalls makes two model calls at once through the hooks and prints {"met":N}.
func concurrentModelCalls(hooks *agenthooks.Hooks) error {
	model := hooks.Model(&scriptedModel{})
	prompt := []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "What is the weather in Paris?")}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = model.GenerateContent(context.Background(), prompt)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("{\"met\":%d}\n", met.Load())
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "canonical (langchaingo):", strings.TrimSpace(err.Error()))
		os.Exit(1)
	}
}
