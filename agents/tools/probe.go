package tools

import (
	"context"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Listing is what one server offers, for operators (conclave tools list).
type Listing struct {
	Server string
	Tools  []ToolInfo
	Err    error // the server could not be reached or listed; secrets hidden
}

// ToolInfo is one tool of a server.
type ToolInfo struct {
	Name        string // as the model sees it: "<server>__<tool>"
	Tool        string // as the server names it
	Description string // its first line
}

// Probe connects to every server once (within its timeout), lists its
// tools and disconnects, in the order the servers were configured.
func (h *Hub) Probe(ctx context.Context) []Listing {
	out := make([]Listing, len(h.servers))
	done := make(chan struct{})
	for i, s := range h.servers {
		go func() {
			defer func() { done <- struct{}{} }()
			out[i] = Listing{Server: s.cfg.Name}
			sess, tools, err := dial(ctx, s, h.opts.HTTPClient, h.log)
			if err != nil {
				out[i].Err = errors.New(s.clean(err))
				return
			}
			_ = sess.Close()
			out[i].Tools = infos(s.cfg.Name, tools)
		}()
	}
	for range h.servers {
		<-done
	}
	return out
}

func infos(server string, tools []*mcp.Tool) []ToolInfo {
	out := make([]ToolInfo, 0, len(tools))
	for _, t := range tools {
		first, _, _ := strings.Cut(strings.TrimSpace(description(t)), "\n")
		out = append(out, ToolInfo{Name: server + Separator + t.Name, Tool: t.Name, Description: first})
	}
	return out
}
