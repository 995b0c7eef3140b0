package tools

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxResultBytes bounds what is read of one message from a server
// (tools.max_result_bytes): a tool that answers 400 MB must not take the
// heap with it.
const DefaultMaxResultBytes = 1 << 20

// errResultTooLarge is why a call whose answer passed the bound failed:
// the model reads "error: result too large".
var errResultTooLarge = errors.New("result too large")

// limitReader reads r, failing with errResultTooLarge once one message
// passes limit bytes: a message ends at sep ("\n" for stdio's lines,
// "\n\n" for a stream's events); with sep nil the whole body is one (a
// JSON answer). It marks the server, so that the call's error says why
// whatever the SDK wraps it in.
type limitReader struct {
	r     io.Reader
	limit int64
	sep   []byte
	n     int64 // bytes of the current message
	tail  []byte
	over  *atomic.Bool // the server's, cleared by the call that reports it
	// tripped stays set once a message passed limit.
	tripped atomic.Bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n > l.limit {
		return 0, errResultTooLarge
	}
	n, err := l.r.Read(p)
	chunk := p[:n]
	if l.sep != nil {
		// The current message is what follows the last separator, which
		// may straddle two reads.
		joined := append(l.tail, chunk...)
		if i := bytes.LastIndex(joined, l.sep); i >= 0 {
			l.n = int64(len(joined) - i - len(l.sep))
		} else {
			l.n += int64(n)
		}
		l.tail = append(l.tail[:0], joined[max(0, len(joined)-len(l.sep)+1):]...)
	} else {
		l.n += int64(n)
	}
	if l.n > l.limit {
		l.over.Store(true)
		l.tripped.Store(true)
		return 0, errResultTooLarge
	}
	return n, err
}

func (l *limitReader) Close() error {
	if c, ok := l.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// limitBody bounds an HTTP answer: each event of a stream, or the whole
// of any other body.
func limitBody(body io.ReadCloser, contentType string, limit int64, over *atomic.Bool) io.ReadCloser {
	var sep []byte
	if strings.HasPrefix(contentType, "text/event-stream") {
		sep = []byte("\n\n")
	}
	return &limitReader{r: body, limit: limit, sep: sep, over: over}
}

// commandTransport is mcp.CommandTransport with each line the server
// writes bounded: it starts the command and speaks newline-delimited
// JSON over its stdin and stdout.
type commandTransport struct {
	cmd   *exec.Cmd
	limit int64
	over  *atomic.Bool
}

// terminateAfter is how long Close waits for the server to exit after its
// stdin is closed, before it is killed.
const terminateAfter = 5 * time.Second

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	// The connection is closed by closing stdin; the pipe's read end is
	// closed by Wait.
	lr := &limitReader{r: stdout, limit: t.limit, sep: []byte("\n"), over: t.over}
	out := io.NopCloser(lr)
	in := &processStdin{WriteCloser: stdin, stdout: stdout, cmd: t.cmd, read: lr}
	return (&mcp.IOTransport{Reader: out, Writer: in, MaxLineLength: int(t.limit) + 1}).Connect(ctx)
}

// processStdin is a server's stdin; closing it ends the server: closed
// stdin, then a kill if it has not exited within terminateAfter. After an
// answer too large, its stdout is closed too: the server is stuck writing
// the rest, which nobody reads.
type processStdin struct {
	io.WriteCloser
	stdout io.Closer
	cmd    *exec.Cmd
	read   *limitReader
}

func (p *processStdin) Close() error {
	err := p.WriteCloser.Close()
	if p.read.tripped.Load() {
		_ = p.stdout.Close()
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(terminateAfter):
		_ = p.cmd.Process.Kill()
		<-done
	}
	return err
}
