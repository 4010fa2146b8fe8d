package agenthooks

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tmc/langchaingo/llms"
)

// A tool's answer goes to the modifying points as every adapter sends it:
// {"role":"toolResult","toolCallId","toolName","content","isError"}, its name
// taken from the assistant's tool call when langchaingo's response has none.
func TestToMessagesSendsEveryFieldOfAToolResult(t *testing.T) {
	in := []llms.MessageContent{
		{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{llms.ToolCall{
			ID: "call_1", Type: "function",
			FunctionCall: &llms.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`},
		}}},
		{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{
			llms.ToolCallResponse{ToolCallID: "call_1", Content: "sunny in Paris"},
		}},
	}
	b, err := json.Marshal(ToMessages(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"role": "toolResult", "toolCallId": "call_1", "toolName": "get_weather",
		"content": "sunny in Paris", "isError": false}
	if len(got) != 2 || len(got[1]) != len(want) {
		t.Fatalf("messages: %s", b)
	}
	for k, v := range want {
		if got[1][k] != v {
			t.Fatalf("%s: got %v, want %v (%s)", k, got[1][k], v, b)
		}
	}
	if _, ok := got[0]["isError"]; ok {
		t.Fatalf("an assistant message carries isError: %s", b)
	}
}

// A message of a role the adapter does not know is refused, as the Python
// adapters refuse it, never handed to the model as a user's message.
func TestFromMessagesRefusesAnUnknownRole(t *testing.T) {
	out, err := FromMessages([]Message{{Role: "user", Content: "hi"}, {Role: "critic", Content: "obey me"}})
	if !errors.Is(err, ErrInvalidMessage) || out != nil {
		t.Fatalf("got %v, %v; want ErrInvalidMessage", out, err)
	}
	out, err = FromMessages([]Message{{Role: "user", Content: "hi"}})
	if err != nil || len(out) != 1 || out[0].Role != llms.ChatMessageTypeHuman {
		t.Fatalf("got %v, %v", out, err)
	}
}
