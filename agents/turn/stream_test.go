package turn_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/internal/redact"
)

// shower records what it was asked to show; it stops the showing after
// stopAfter shows (0: never).
type shower struct {
	texts     []string
	endings   []bool
	stopAfter int
}

func (s *shower) Show(_ context.Context, text string, ending bool) (bool, bool) {
	s.texts = append(s.texts, text)
	s.endings = append(s.endings, ending)
	return true, s.stopAfter == 0 || len(s.texts) < s.stopAfter
}

// TestStreamPaces: the first sentence is shown at once, a change waits
// for a tick, a tick without a change shows nothing, and :end: is never
// shown but marks the show as ending.
func TestStreamPaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := &shower{}
		tick := make(chan time.Time)
		s := turn.StartStream(t.Context(), sh, &redact.Masker{}, tick)
		s.OnText("Hello")
		synctest.Wait()
		if len(sh.texts) != 0 {
			t.Fatalf("shown before a whole sentence: %q", sh.texts)
		}
		s.OnText("Hello there. More")
		synctest.Wait()
		if !slices.Equal(sh.texts, []string{"Hello there. More"}) {
			t.Fatalf("first sentence: shown %q", sh.texts)
		}
		s.OnText("Hello there. More words")
		synctest.Wait()
		if len(sh.texts) != 1 {
			t.Fatalf("a change shown before a tick: %q", sh.texts)
		}
		tick <- time.Time{}
		synctest.Wait()
		if !slices.Equal(sh.texts, []string{"Hello there. More", "Hello there. More words"}) {
			t.Fatalf("after a tick: shown %q", sh.texts)
		}
		tick <- time.Time{}
		synctest.Wait()
		if len(sh.texts) != 2 {
			t.Fatalf("a tick without a change showed %q", sh.texts)
		}
		s.OnText("Hello there. More words. Done. :end:")
		synctest.Wait()
		if got := sh.texts[len(sh.texts)-1]; got != "Hello there. More words. Done." || !sh.endings[len(sh.endings)-1] {
			t.Fatalf("the :end: reply: shown %q (ending %v)", got, sh.endings[len(sh.endings)-1])
		}
		s.Stop()
	})
}

// TestStreamStopsWhenTheShowerGivesUp: once Show says no more, nothing
// more is shown.
func TestStreamStopsWhenTheShowerGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := &shower{stopAfter: 1}
		tick := make(chan time.Time)
		s := turn.StartStream(t.Context(), sh, &redact.Masker{}, tick)
		s.OnText("One sentence. ")
		synctest.Wait()
		tick <- time.Time{}
		s.OnText("One sentence. Two sentences.")
		synctest.Wait()
		s.Stop()
		if !slices.Equal(sh.texts, []string{"One sentence."}) {
			t.Errorf("shown %q after the shower gave up, want only the first", sh.texts)
		}
	})
}
