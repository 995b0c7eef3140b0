// Package terminal is conclave's terminal transport, behind `conclave chat`:
// a person talks with the agents of one channel from a terminal instead of
// Slack. Each line read is a message in one thread; the agents' posts print
// as "Name: text". It implements agents.Chat, as package bot does for
// Slack, so the same engine, prompts, model endpoint and store run behind
// it.
//
// Read from a terminal, posts print as they come while the person types.
// Scripted (Options.Wait), each line waits for the agents to settle (see
// agents.Engine.Settled) before the next is read, so a template
// repository's CI can run a conversation against a model.
package terminal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
)

// Team is the team of the conversations held from a terminal, so that they
// never mix with a Slack workspace's conversations in a shared store.
const Team = "terminal"

// Engine is the engine's side of the transport.
type Engine interface {
	// Record records a message; dispatching the ticket hands it to the
	// engine's workers (the terminal has no acknowledgement to wait for,
	// so it dispatches at once).
	Record(ctx context.Context, ev agents.Event) (agents.Ticket, error)
	// Settled reports whether the conversation of a thread has nothing
	// left to do now.
	Settled(ctx context.Context, team, channel, threadTS string) (bool, error)
}

// Commands a line may be, instead of a message.
const (
	CommandEnd  = "/end"  // sends :end:, which concludes the conversation
	CommandNew  = "/new"  // the next line starts a new thread
	CommandHelp = "/help" // lists these commands
	CommandQuit = "/quit" // ends the session (as end of input does)
	// CommandTrace prints the thread's conversation id and its last turn
	// as `conclave trace` does (Options.Trace); "/trace all" prints every
	// turn.
	CommandTrace = "/trace"
)

// Help is what CommandHelp prints.
const Help = "Each line is a message in the thread. Commands: /end ends the conversation (sends :end:), " +
	"/new starts a new thread, /trace shows the last turn's trace (/trace all: every turn's), /help shows this, /quit or end of input quits."

// ErrUnknownCommand is returned, in scripted mode, for a line that starts
// with '/' and is no command.
var ErrUnknownCommand = errors.New("unknown command")

// Options configure a Terminal.
type Options struct {
	Channel            string    // the channel whose agents answer; required
	ChannelDescription string    // what .ChannelDescription shows
	Person             string    // the name of who types; default "you"
	Out                io.Writer // agents' posts and notices; required
	Status             io.Writer // who is working, command feedback; nil: discarded
	// Wait makes each line wait for the agents to settle before the next
	// is read (scripted mode); an unknown command is then an error.
	Wait bool
	// Poll is how often Settled is asked while waiting; default 50ms.
	Poll time.Duration
	// Names gives an agent's display name from its ENS name, for the
	// working line; nil: the ENS name's first label.
	Names func(ctx context.Context, ens string) string
	Now   func() time.Time // nil: time.Now
	// Trace, when set, answers CommandTrace: it writes the last turn of a
	// conversation to w, or with all every turn.
	Trace func(ctx context.Context, w io.Writer, conversationID string, all bool) error
}

// Terminal is the transport. Create it with New; it implements agents.Chat.
type Terminal struct {
	opts   Options
	userID string

	mu     sync.Mutex
	last   time.Time         // the latest ts handed out
	posts  map[string]string // post id → ts, for FindTurnPost
	thread string            // the current thread's root ts ("" before its first line)
	owned  map[string]bool   // conversation ids of the threads started here
	// notices counts the ⚠️ notices printed (agents.Reply.Notice).
	notices int
}

var _ agents.Chat = (*Terminal)(nil)

// New returns a Terminal; it starts nothing.
func New(opts Options) *Terminal {
	if opts.Person == "" {
		opts.Person = "you"
	}
	if opts.Status == nil {
		opts.Status = io.Discard
	}
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Names == nil {
		opts.Names = func(_ context.Context, ens string) string { l, _, _ := strings.Cut(ens, "."); return l }
	}
	return &Terminal{
		opts:   opts,
		userID: UserID(opts.Person),
		posts:  make(map[string]string),
		owned:  make(map[string]bool),
	}
}

// UserID is the user id the terminal gives a person's messages: what a
// human agent's pairing names to speak as that agent from a terminal.
func UserID(person string) string {
	return "terminal-" + strings.Join(strings.Fields(strings.ToLower(person)), "-")
}

// Owns reports whether a conversation is one of the threads started here
// (agents.Options.Owns): the engine behind a terminal leaves every other
// conversation of a shared store alone.
func (t *Terminal) Owns(conversationID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.owned[conversationID]
}

// Notices is how many ⚠️ notices were printed: turns that failed, or a
// conversation overloaded. A scripted session with any is a failed one.
func (t *Terminal) Notices() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.notices
}

// Person is the name of who types.
func (t *Terminal) Person() string { return t.opts.Person }

// Run reads lines from in until its end (or CommandQuit, or ctx ending)
// and hands each message to eng. It returns nil at the end of the input.
func (t *Terminal) Run(ctx context.Context, in io.Reader, eng Engine) error {
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
		close(lines)
	}()
	for n := 1; ; n++ {
		var line string
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case line, ok = <-lines:
		}
		if !ok {
			if err := <-readErr; err != nil {
				return fmt.Errorf("terminal: read input: %w", err)
			}
			return nil
		}
		text := strings.TrimSpace(line)
		switch {
		case text == "":
			continue
		case text == CommandQuit:
			return nil
		case text == CommandHelp:
			t.status(Help)
			continue
		case text == CommandNew:
			t.mu.Lock()
			t.thread = ""
			t.mu.Unlock()
			t.status("(the next message starts a new thread)")
			continue
		case text == CommandEnd:
			text = ":end:"
		case (text == CommandTrace || text == CommandTrace+" all") && t.opts.Trace != nil:
			t.showTrace(ctx, text != CommandTrace)
			continue
		case strings.HasPrefix(text, "/"):
			name, _, _ := strings.Cut(text, " ")
			if t.opts.Wait {
				return fmt.Errorf("terminal: line %d: %w %s (commands: %s, %s, %s, %s, %s)", n, ErrUnknownCommand, name, CommandEnd, CommandNew, CommandTrace, CommandHelp, CommandQuit)
			}
			t.status("unknown command " + name + "; " + Help)
			continue
		}
		ev := t.message(t.opts.Person, t.userID, text, false)
		if err := record(ctx, eng, ev); err != nil {
			return fmt.Errorf("terminal: record line %d: %w", n, err)
		}
		if !t.opts.Wait {
			continue
		}
		if err := t.settle(ctx, eng, ev); err != nil {
			return err
		}
	}
}

// Say hands eng one message from person (Options.Person when empty), as
// a reply in the current thread, or with newThread as the root of a new
// one, then waits for the agents to settle. It is one line of a script
// the caller reads itself, in which several people may speak
// (`conclave templates test`).
func (t *Terminal) Say(ctx context.Context, eng Engine, person, text string, newThread bool) error {
	userID := t.userID
	if person == "" {
		person = t.opts.Person
	} else {
		userID = UserID(person)
	}
	ev := t.message(person, userID, text, newThread)
	if err := record(ctx, eng, ev); err != nil {
		return fmt.Errorf("terminal: record: %w", err)
	}
	return t.settle(ctx, eng, ev)
}

// record records ev and dispatches it at once: the terminal has no
// acknowledgement to wait for.
func record(ctx context.Context, eng Engine, ev agents.Event) error {
	ticket, err := eng.Record(ctx, ev)
	if err != nil {
		return err
	}
	ticket.Dispatch()
	return nil
}

// showTrace prints the current thread's conversation id and its last
// turn, or with all every turn, on the status output.
func (t *Terminal) showTrace(ctx context.Context, all bool) {
	t.mu.Lock()
	thread := t.thread
	t.mu.Unlock()
	if thread == "" {
		t.status("(no turn yet in this thread)")
		return
	}
	conv := agents.ConversationID(Team, t.opts.Channel, thread)
	var b strings.Builder
	fmt.Fprintf(&b, "conversation %s (conclave trace %s)\n", conv, conv)
	if err := t.opts.Trace(ctx, &b, conv, all); err != nil {
		t.status("(no trace: " + err.Error() + ")")
		return
	}
	t.status(strings.TrimRight(b.String(), "\n"))
}

// message makes the event of one line: a new thread's root, or a reply in
// the current thread.
func (t *Terminal) message(person, userID, text string, newThread bool) agents.Event {
	ts, at := t.nextTS()
	t.mu.Lock()
	defer t.mu.Unlock()
	if newThread {
		t.thread = ""
	}
	ev := agents.Event{
		Kind: agents.EventMessage, Team: Team, Channel: t.opts.Channel, TS: ts, ThreadTS: t.thread,
		UserID: userID, UserName: person, Raw: text, Text: text, At: at,
	}
	if t.thread == "" {
		t.thread = ts
		t.owned[agents.ConversationID(Team, t.opts.Channel, ts)] = true
	}
	return ev
}

// settle waits until the conversation of ev has nothing left to do.
func (t *Terminal) settle(ctx context.Context, eng Engine, ev agents.Event) error {
	thread := ev.ThreadTS
	if thread == "" {
		thread = ev.TS
	}
	tick := time.NewTicker(t.opts.Poll)
	defer tick.Stop()
	for {
		done, err := eng.Settled(ctx, Team, t.opts.Channel, thread)
		if err != nil {
			return fmt.Errorf("terminal: wait for the agents: %w", err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// nextTS hands out a Slack-shaped ts from the clock, later than every
// earlier one.
func (t *Terminal) nextTS() (string, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.opts.Now().Truncate(time.Microsecond)
	if !now.After(t.last) {
		now = t.last.Add(time.Microsecond)
	}
	t.last = now
	return fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000), now
}

// print writes one block of output whole, so that concurrent posts never
// interleave.
func (t *Terminal) print(w io.Writer, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintln(w, text)
}

func (t *Terminal) status(text string) { t.print(t.opts.Status, text) }

// PostReply prints a post as "Name: text" and returns its ts (one part). A post in a
// thread other than the current one (a late conclusion after /new) says
// so.
func (t *Terminal) PostReply(_ context.Context, r agents.Reply) ([]string, error) {
	if len(r.Posted) > 0 {
		return r.Posted, nil // one part, already printed
	}
	text := strings.TrimSpace(r.Text)
	if text == "" {
		return nil, &agents.PostError{Err: errors.New("terminal: empty reply"), Permanent: true}
	}
	ts, _ := t.nextTS()
	t.mu.Lock()
	if r.TurnID != "" {
		t.posts[r.TurnID] = ts
	}
	earlier := r.ThreadTS != t.thread
	if r.Notice {
		t.notices++
	}
	t.mu.Unlock()
	prefix := ""
	if earlier {
		prefix = "(in an earlier thread) "
	}
	t.print(t.opts.Out, prefix+r.Username+": "+text)
	return []string{ts}, nil
}

// PostEphemeral prints a notice for the person.
func (t *Terminal) PostEphemeral(_ context.Context, _, _, text string) error {
	t.print(t.opts.Out, "(only you see this) "+strings.TrimSpace(text))
	return nil
}

// concludedReaction is the emoji the engine puts on a concluded thread's
// root.
const concludedReaction = "white_check_mark"

// AddReaction shows the conclusion of a thread; the working reaction is
// shown by the working line instead (Working).
func (t *Terminal) AddReaction(_ context.Context, _, _, name string) error {
	if name == concludedReaction {
		t.status("✅ (the conversation is concluded)")
	}
	return nil
}

// RemoveReaction does nothing: there is nothing to take back on a terminal.
func (t *Terminal) RemoveReaction(context.Context, string, string, string) error { return nil }

// FindPost finds a post made by this terminal (one part).
func (t *Terminal) FindPost(_ context.Context, _, _, postID string) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ts, ok := t.posts[postID]; ok {
		return []string{ts}, nil
	}
	return nil, nil
}

// ThreadHistory has nothing to add: a terminal thread lives in the store
// only.
func (t *Terminal) ThreadHistory(context.Context, string, string, int) ([]agents.Event, error) {
	return nil, nil
}

// ChannelDescription returns Options.ChannelDescription.
func (t *Terminal) ChannelDescription(context.Context, string) (string, error) {
	return t.opts.ChannelDescription, nil
}

// Working wraps the engine's model so that each call first prints who is
// working ("… Elen is thinking"), the terminal's working reaction.
func (t *Terminal) Working(m agents.Model) agents.Model { return workingModel{Model: m, t: t} }

type workingModel struct {
	agents.Model
	t *Terminal
}

func (w workingModel) Complete(ctx context.Context, r llm.Request) (llm.Response, error) {
	if r.Agent != "" {
		w.t.status("… " + w.t.opts.Names(ctx, r.Agent) + " is thinking")
	}
	return w.Model.Complete(ctx, r)
}
