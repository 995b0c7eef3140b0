package turn

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/internal/redact"
)

// StreamModel is a Model that can show a reply while it is written
// (llm.Client). A Model without it is never streamed.
type StreamModel interface {
	// Stream is Complete, calling onText with the reply's content so far
	// each time it grows (see llm.Client.Stream).
	Stream(ctx context.Context, r llm.Request, onText func(content string)) (llm.Response, error)
}

// Shower shows a reply while the model writes it: the one port a
// streamed reply goes out through. The engine implements it (the marker
// that keeps the reply exactly once, the post, its updates).
type Shower interface {
	// Show posts text, or updates the message already shown with it;
	// ending says the reply asks for the conclusion, so it calls
	// nobody. It reports whether text is shown now, and whether showing
	// goes on (false: a post or commit failed, nothing more is shown).
	Show(ctx context.Context, text string, ending bool) (shown, more bool)
}

// Stream paces one reply shown while it is written: its first sentence
// at once, then at most one update per tick, when the text changed. It
// touches nothing but its Shower.
type Stream struct {
	show Shower
	mask *redact.Masker
	tick <-chan time.Time

	mu   sync.Mutex
	text string // the model's text so far (its current attempt and round)
	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
}

// StartStream starts showing a reply through show, text masked with
// mask, updates allowed by tick. Stop ends it.
func StartStream(ctx context.Context, show Shower, mask *redact.Masker, tick <-chan time.Time) *Stream {
	s := &Stream{show: show, mask: mask, tick: tick, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	s.wg.Go(func() { s.loop(ctx) })
	return s
}

// Stop ends the showing and waits for its last Show to return: what the
// Shower did may be read after it.
func (s *Stream) Stop() {
	close(s.stop)
	s.wg.Wait()
}

// OnText takes the model's text so far and wakes the loop (the onText of
// StreamModel.Stream).
func (s *Stream) OnText(text string) {
	s.mu.Lock()
	s.text = text
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// latest is the text so far, as written and as shown.
func (s *Stream) latest() (raw, shown string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text, shownText(s.mask.String(s.text))
}

// loop shows the first sentence at once, then updates on the interval's
// ticks when the text changed: a tick allows one update, the next change
// uses it.
func (s *Stream) loop(ctx context.Context) {
	started, due, more := false, false, true
	shown := ""
	for {
		select {
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-s.tick:
			due = true
		}
		if !more {
			continue
		}
		raw, text := s.latest()
		// A reply asking for the conclusion calls nobody: no mentions.
		ending := HasEnd(raw)
		switch {
		case !started:
			if firstSentence(raw) && HasWords(text) {
				started = true
				due = false
				var ok bool
				if ok, more = s.show.Show(ctx, text, ending); ok {
					shown = text
				}
			}
		case due && text != shown && HasWords(text):
			due = false
			var ok bool
			if ok, more = s.show.Show(ctx, text, ending); ok {
				shown = text
			}
		}
	}
}

// sentenceEnd is the end of a sentence followed by a blank, or a line
// break.
var sentenceEnd = regexp.MustCompile(`[.!?…。！？][)"'”’\]]*\s|\n`)

// firstSentence reports whether the text as written holds a whole first
// sentence: the moment a streamed reply is first posted.
func firstSentence(text string) bool {
	return sentenceEnd.MatchString(text)
}

// shownText is what is shown of a reply being written: :end: removed (a
// token still being written too), an open code fence closed.
func shownText(s string) string {
	s, _ = StripEnd(s)
	for i := len(EndToken) - 1; i > 0; i-- {
		if strings.HasSuffix(s, EndToken[:i]) {
			s = s[:len(s)-i]
			break
		}
	}
	s = strings.TrimSpace(s)
	if strings.Count(s, "```")%2 == 1 {
		s += "\n```"
	}
	return s
}
