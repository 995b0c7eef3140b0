// Package mcptest is an MCP server for conclave's tests, built with the
// same SDK conclave's client uses. It serves over stdio (a test binary
// re-executing itself) and over Streamable HTTP (an httptest server).
//
// Its tools:
//   - lookup_customer {name}: the customer id of a name ("Ada Lovelace" is
//     C45653); an unknown name is a tool error;
//   - fail: always a tool error ("the CRM is down");
//   - hang: answers only when the call is cancelled;
//   - secret: the value of the MCPTEST_SECRET environment variable (stdio);
//   - crash: the process exits at once (stdio only);
//   - starts: how many times the stdio server was started (counted in the
//     file named by MCPTEST_STARTS);
//   - add_tool: adds the tool "late_tool" and announces the change.
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioEnv is the variable that makes a test binary serve over stdio
// (see ServeStdioIfAsked).
const StdioEnv = "CONCLAVE_MCPTEST_STDIO"

// Customers are the names lookup_customer knows.
var Customers = map[string]string{"Ada Lovelace": "C45653", "Grace Hopper": "C10001"}

// bigArgs asks the big tool for an answer of Bytes bytes.
type bigArgs struct {
	Bytes int `json:"bytes" jsonschema:"the length of the answer"`
}

type lookupArgs struct {
	Name string `json:"name" jsonschema:"the customer's full name"`
}

type empty struct{}

// NewServer builds the server; stdio adds the tools that only make sense
// in a process of its own (crash, starts).
func NewServer(stdio bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "lookup_customer", Description: "Finds a customer's id by name.\nReturns the id as text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in lookupArgs) (*mcp.CallToolResult, any, error) {
			id, ok := Customers[in.Name]
			if !ok {
				return nil, nil, fmt.Errorf("no customer named %q", in.Name)
			}
			return text(id), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the CRM is down")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Answers as many bytes as asked."},
		func(_ context.Context, _ *mcp.CallToolRequest, in bigArgs) (*mcp.CallToolResult, any, error) {
			return text(strings.Repeat("x", in.Bytes)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answers."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_tool", Description: "Adds late_tool."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "late_tool", Description: "Came later."},
				func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
					return text("late"), nil, nil
				})
			return text("added"), nil, nil
		})
	if stdio {
		mcp.AddTool(s, &mcp.Tool{Name: "secret", Description: "Shows MCPTEST_SECRET."},
			func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
				return text("secret=" + os.Getenv("MCPTEST_SECRET")), nil, nil
			})
		mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the server."},
			func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
				os.Exit(3)
				return nil, nil, nil
			})
		mcp.AddTool(s, &mcp.Tool{Name: "starts", Description: "Counts the server's starts."},
			func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
				b, _ := os.ReadFile(os.Getenv("MCPTEST_STARTS")) // #nosec G304 G703 -- a test server's counter file, named by its test
				return text(strconv.Itoa(strings.Count(string(b), "\n"))), nil, nil
			})
	}
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// Handler serves a fresh server over Streamable HTTP.
func Handler() http.Handler {
	s := NewServer(false)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

// ServeStdioIfAsked serves over stdio and exits when StdioEnv is set; a
// test binary's TestMain calls it first, so tests can start the binary as
// a stdio MCP server. Each start is counted in MCPTEST_STARTS when set.
func ServeStdioIfAsked() {
	if os.Getenv(StdioEnv) == "" {
		return
	}
	if path := os.Getenv("MCPTEST_STARTS"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600) // #nosec G304 G703 -- a test server's counter file, named by its test
		if err == nil {
			_, _ = f.WriteString("start\n")
			_ = f.Close()
		}
	}
	// Servers often print their settings; conclave must hide the secret.
	fmt.Fprintln(os.Stderr, "mcptest: serving on stdio with secret", os.Getenv("MCPTEST_SECRET"))
	if err := NewServer(true).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// StdioEnvFor is the environment a stdio test server needs: StdioEnv, and
// where its starts are counted.
func StdioEnvFor(startsFile string) map[string]string {
	return map[string]string{StdioEnv: "1", "MCPTEST_STARTS": startsFile}
}
