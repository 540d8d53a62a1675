// Command mcpserver is the tests' MCP server on the official Go SDK: an
// echo tool, a probe that reports what it can reach from inside its
// sandbox, and tools that crash, hang or flood their stdout.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type echoOut struct {
	Echo string `json:"echo"`
}

type none struct{}

type connectIn struct {
	Target string `json:"target" jsonschema:"host:port"`
}

// probeOut says, for each attempt, what happened ("ok: ..." or the error).
type probeOut struct {
	Results map[string]string `json:"results"`
	Env     []string          `json:"env"`
}

func main() {
	home := flag.String("home", "", "the kernel's $FLUFFY_HOME, to try to read")
	flag.Parse()
	s := mcp.NewServer(&mcp.Implementation{Name: "fixture-go", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
		return nil, echoOut{Echo: in.Text}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "forbidden", Description: "A tool the tests' policy denies"}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, echoOut, error) {
		return nil, echoOut{Echo: "the forbidden tool ran"}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "probe", Description: "Report what the server can reach"}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, probeOut, error) {
		return nil, probe(*home), nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "connect", Description: "Open a tunnel to target through $HTTPS_PROXY and read one line"}, func(_ context.Context, _ *mcp.CallToolRequest, in connectIn) (*mcp.CallToolResult, echoOut, error) {
		return nil, echoOut{Echo: connect(in.Target)}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit in the middle of the call"}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, echoOut, error) {
		os.Exit(3)
		return nil, echoOut{}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answer"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, echoOut, error) {
		time.Sleep(time.Hour)
		return nil, echoOut{}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "flood", Description: "Write an endless line to stdout"}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, echoOut, error) {
		chunk := []byte(strings.Repeat("x", 1<<16))
		for i := 0; i < 1<<10; i++ { // 64 MiB without a newline
			if _, err := os.Stdout.Write(chunk); err != nil {
				break
			}
		}
		time.Sleep(time.Hour)
		return nil, echoOut{}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Return a megabyte of text"}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, echoOut, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("y", 1<<20)}}}, echoOut{}, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// connect reports the proxy's status line and, through an open tunnel,
// the first line the target sends.
func connect(target string) string {
	proxy := strings.TrimPrefix(os.Getenv("HTTPS_PROXY"), "http://")
	if proxy == "" {
		return "no HTTPS_PROXY"
	}
	c, err := net.DialTimeout("tcp", proxy, 3*time.Second)
	if err != nil {
		return "dial proxy: " + err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil {
		return "read status: " + err.Error()
	}
	out := strings.TrimSpace(status)
	if !strings.Contains(status, " 200 ") {
		return out
	}
	for {
		l, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(l) == "" {
			break
		}
	}
	line, _ := r.ReadString('\n')
	return out + " | " + strings.TrimSpace(line)
}

func probe(home string) probeOut {
	r := map[string]string{}
	try := func(name string, f func() (string, error)) {
		s, err := f()
		if err != nil {
			r[name] = "error: " + err.Error()
			return
		}
		r[name] = "ok: " + s
	}
	try("read /etc/shadow", func() (string, error) {
		b, err := os.ReadFile("/etc/shadow")
		return fmt.Sprintf("%d bytes", len(b)), err
	})
	for _, sock := range []string{"/var/run/docker.sock", "/run/docker.sock"} {
		try("connect "+sock, func() (string, error) {
			c, err := net.DialTimeout("unix", sock, 2*time.Second)
			if err != nil {
				return "", err
			}
			c.Close()
			return "connected", nil
		})
	}
	try("list $FLUFFY_HOME", func() (string, error) {
		if home == "" {
			return "", errors.New("no home given")
		}
		es, err := os.ReadDir(home)
		return fmt.Sprintf("%d entries", len(es)), err
	})
	try("read $FLUFFY_HOME/db", func() (string, error) {
		es, err := os.ReadDir(home + "/db")
		return fmt.Sprintf("%d entries", len(es)), err
	})
	for _, addr := range []string{"1.1.1.1:443", "proxy.golang.org:443"} {
		try("dial "+addr, func() (string, error) {
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			if err != nil {
				return "", err
			}
			c.Close()
			return "connected", nil
		})
	}
	try("read /workspace/README.md", func() (string, error) {
		b, err := os.ReadFile("/workspace/README.md")
		return fmt.Sprintf("%d bytes", len(b)), err
	})
	try("write /workspace/mcp-was-here", func() (string, error) {
		return "written", os.WriteFile("/workspace/mcp-was-here", []byte("x"), 0o644)
	})
	try("write /out/mcp-was-here", func() (string, error) {
		return "written", os.WriteFile("/out/mcp-was-here", []byte("x"), 0o644)
	})
	try("write $TMPDIR", func() (string, error) {
		return "written", os.WriteFile(os.TempDir()+"/scratch", []byte("x"), 0o644)
	})
	env := os.Environ()
	sort.Strings(env)
	return probeOut{Results: r, Env: env}
}
