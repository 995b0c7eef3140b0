package llm

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	openai "github.com/sashabaranov/go-openai"
)

// buildCall turns a request into the library's request, applying the
// profile and working around what the library checks or drops:
//
//   - go-openai omits a float32 temperature of 0 (omitempty), so 0 is sent
//     as the smallest non-zero float32, which every endpoint reads as 0;
//   - for the models go-openai treats as reasoning models it refuses
//     max_tokens and any temperature but 1 before sending, so those get
//     max_completion_tokens and no temperature.
func buildCall(p Profile, r Request) (openai.ChatCompletionRequest, error) {
	call := openai.ChatCompletionRequest{Model: cmp.Or(r.Model, p.Model)}
	if len(r.Messages) == 0 {
		return call, errors.New("no messages")
	}
	if r.MaxTokens < 0 {
		return call, fmt.Errorf("max tokens %d is negative", r.MaxTokens)
	}
	temp := r.Temperature
	if temp == nil {
		temp = p.Temperature
	}
	if temp != nil && !(*temp >= 0) {
		return call, fmt.Errorf("temperature %v is negative", *temp)
	}
	msgs := make([]openai.ChatCompletionMessage, 0, len(r.Messages))
	for i, m := range r.Messages {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant:
		default:
			return call, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		if last := len(msgs) - 1; p.MergeConsecutive && last >= 0 && msgs[last].Role == m.Role {
			msgs[last].Content += "\n\n" + m.Content
			continue
		}
		msgs = append(msgs, openai.ChatCompletionMessage{Role: m.Role, Content: m.Content})
	}
	for i, round := range r.ToolRounds {
		if len(round.Calls) == 0 || len(round.Results) != len(round.Calls) {
			return call, fmt.Errorf("tool round %d: %d calls and %d results", i, len(round.Calls), len(round.Results))
		}
		msgs = append(msgs, openai.ChatCompletionMessage{Role: RoleAssistant, Content: round.Content, ToolCalls: wireToolCalls(round.Calls)})
		for j, result := range round.Results {
			msgs = append(msgs, openai.ChatCompletionMessage{Role: "tool", Content: result, ToolCallID: round.Calls[j].ID})
		}
	}
	call.Messages = msgs
	for _, t := range r.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		call.Tools = append(call.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: params,
		}})
	}

	maxTokens := cmp.Or(r.MaxTokens, p.MaxTokens)
	if IsReasoningModel(call.Model) {
		call.MaxCompletionTokens = maxTokens
	} else {
		// max_tokens, deprecated by OpenAI for its own models, is the field
		// Ollama, vLLM, LiteLLM and other compatible servers read.
		//lint:ignore SA1019 the field compatible endpoints understand
		call.MaxTokens = maxTokens
		if temp != nil {
			call.Temperature = wireTemperature(*temp)
		}
	}
	if r.JSON && p.JSONMode {
		call.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	}
	return call, nil
}

// wireTemperature converts t for go-openai, keeping 0 on the wire.
func wireTemperature(t float64) float32 {
	if f := float32(t); f != 0 {
		return f
	}
	return math.SmallestNonzeroFloat32
}

// IsReasoningModel reports whether go-openai applies its reasoning-model
// rules to model (o1, o3, o4 and gpt-5 prefixes, and the GPT-6 ids it
// knows): such a model is sent max_completion_tokens and no temperature.
// It asks the library's own validator, so it follows the library's list.
func IsReasoningModel(model string) bool {
	//lint:ignore SA1019 the probe sets what the validator refuses
	probe := openai.ChatCompletionRequest{Model: model, MaxTokens: 1}
	return openai.NewReasoningValidator().Validate(probe) != nil
}

func wireToolCalls(calls []ToolCall) []openai.ToolCall {
	out := make([]openai.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = openai.ToolCall{ID: c.ID, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments}}
	}
	return out
}
