package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// errIdle is a stream that sent no chunk for the profile's IdleTimeout.
var errIdle = errors.New("the stream went silent")

// errStreamCut is a stream that ended before the model finished: the
// connection dropped, or the body ended without a finish reason.
var errStreamCut = errors.New("the stream ended before the reply was complete")

// Stream is Complete over a server-sent event stream (go-openai's
// CreateChatCompletionStream): onText is called, from the calling
// goroutine, with the reply's content so far each time it grows. It stops
// being called once the reply turns to tool calls, whose rounds are not
// shown. A retry starts the reply over, so the content onText sees may
// shrink. The Response and the errors are Complete's; a stream cut short
// is a connection failure, retried like one.
func (c *Client) Stream(ctx context.Context, req Request, onText func(content string)) (Response, error) {
	if onText == nil {
		onText = func(string) {}
	}
	return c.send(ctx, req, onText)
}

// stream makes one streamed call and gathers its chunks into the reply a
// plain call would have returned.
func (ep *endpoint) stream(ctx context.Context, call openai.ChatCompletionRequest, onText func(string)) (openai.ChatCompletionResponse, error) {
	// Silence, not length, ends a stream: the timer is wound up again by
	// every chunk.
	idle := ep.profile.IdleTimeout
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(idle, func() { cancel(errIdle) })
	defer timer.Stop()
	silent := func(err error) error {
		if context.Cause(ctx) == errIdle {
			return fmt.Errorf("%w: %w", errIdle, err)
		}
		return err
	}
	s, err := ep.api.CreateChatCompletionStream(ctx, call)
	if err != nil {
		return openai.ChatCompletionResponse{}, silent(err)
	}
	defer s.Close()
	var (
		reply     = openai.ChatCompletionResponse{Model: call.Model}
		content   strings.Builder
		reasoning strings.Builder
		shown     string
		calls     []openai.ToolCall
		finish    openai.FinishReason
		chosen    bool
		quietNow  bool // tool calls began: the content is no longer shown
	)
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return reply, silent(err)
			}
			return reply, fmt.Errorf("%w: %w", errStreamCut, err)
		}
		timer.Reset(idle)
		if chunk.Model != "" {
			reply.Model = chunk.Model
		}
		if chunk.Usage != nil {
			reply.Usage = *chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			chosen = true
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
			for _, d := range ch.Delta.ToolCalls {
				quietNow = true
				calls = mergeToolCall(calls, d)
			}
			reasoning.WriteString(ch.Delta.ReasoningContent)
			if ch.Delta.Content != "" {
				content.WriteString(ch.Delta.Content)
				// Reasoning and text tool calls are never shown.
				if v := visibleSoFar(content.String()); !quietNow && v != shown {
					shown = v
					onText(v)
				}
			}
		}
	}
	if !chosen {
		return reply, nil // no choice: classified as an empty reply
	}
	if finish == "" {
		return reply, fmt.Errorf("%w: no finish reason", errStreamCut)
	}
	reply.Choices = []openai.ChatCompletionChoice{{
		Message: openai.ChatCompletionMessage{Role: RoleAssistant, Content: content.String(),
			ReasoningContent: reasoning.String(), ToolCalls: calls},
		FinishReason: finish,
	}}
	return reply, nil
}

// mergeToolCall adds one streamed piece of a tool call: the piece with a
// new index starts a call, later ones append to its arguments.
func mergeToolCall(calls []openai.ToolCall, d openai.ToolCall) []openai.ToolCall {
	i := len(calls)
	if d.Index != nil {
		i = *d.Index
	}
	for len(calls) <= i {
		calls = append(calls, openai.ToolCall{Type: openai.ToolTypeFunction})
	}
	tc := &calls[i]
	if d.ID != "" {
		tc.ID = d.ID
	}
	if d.Function.Name != "" {
		tc.Function.Name += d.Function.Name
	}
	tc.Function.Arguments += d.Function.Arguments
	return calls
}
