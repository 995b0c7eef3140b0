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
	r := streamedReply{reply: openai.ChatCompletionResponse{Model: call.Model}, onText: onText}
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return r.reply, silent(err)
			}
			return r.reply, fmt.Errorf("%w: %w", errStreamCut, err)
		}
		timer.Reset(idle)
		r.add(chunk)
	}
	return r.done()
}

// streamedReply gathers a streamed reply from its chunks, showing its
// visible text so far (onText) each time it grows.
type streamedReply struct {
	reply     openai.ChatCompletionResponse
	onText    func(string)
	content   strings.Builder
	reasoning strings.Builder
	shown     string
	calls     []openai.ToolCall
	finish    openai.FinishReason
	chosen    bool
	quiet     bool // tool calls began: the content is no longer shown
}

// add takes one chunk: its model and usage, and the first choice's delta.
func (r *streamedReply) add(chunk openai.ChatCompletionStreamResponse) {
	if chunk.Model != "" {
		r.reply.Model = chunk.Model
	}
	if chunk.Usage != nil {
		r.reply.Usage = *chunk.Usage
	}
	for _, ch := range chunk.Choices {
		if ch.Index != 0 {
			continue
		}
		r.chosen = true
		if ch.FinishReason != "" {
			r.finish = ch.FinishReason
		}
		for _, d := range ch.Delta.ToolCalls {
			r.quiet = true
			r.calls = mergeToolCall(r.calls, d)
		}
		r.reasoning.WriteString(ch.Delta.ReasoningContent)
		if ch.Delta.Content != "" {
			r.content.WriteString(ch.Delta.Content)
			// Reasoning and text tool calls are never shown.
			if v := visibleSoFar(r.content.String()); !r.quiet && v != r.shown {
				r.shown = v
				r.onText(v)
			}
		}
	}
}

// done is the reply once the stream ended: a stream with no finish
// reason was cut; one with no choice is an empty reply.
func (r *streamedReply) done() (openai.ChatCompletionResponse, error) {
	if !r.chosen {
		return r.reply, nil // no choice: classified as an empty reply
	}
	if r.finish == "" {
		return r.reply, fmt.Errorf("%w: no finish reason", errStreamCut)
	}
	r.reply.Choices = []openai.ChatCompletionChoice{{
		Message: openai.ChatCompletionMessage{Role: RoleAssistant, Content: r.content.String(),
			ReasoningContent: r.reasoning.String(), ToolCalls: r.calls},
		FinishReason: r.finish,
	}}
	return r.reply, nil
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
