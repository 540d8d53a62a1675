package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/landlock"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

const (
	// ToolPrefix starts every tool name the bridge offers: mcp.SERVER.TOOL.
	ToolPrefix = "mcp."
	// maxLine bounds one JSON-RPC frame from the server: a server that
	// floods its stdout without a newline ends its session instead of
	// growing the bridge's memory.
	maxLine = 4 << 20
	// maxText bounds the text of one result the model gets.
	maxText = 32 << 10
	// maxTools bounds how many tools one server may list.
	maxTools = 128
	// maxSummary bounds a tool's description.
	maxSummary = 1024
	// startBudget bounds starting the server and its initialize handshake.
	startBudget = 30 * time.Second
	// defaultTimeout bounds one tool call when the configuration sets none.
	defaultTimeout = 60 * time.Second
	// stderrTail is how much of the server's stderr is kept for errors.
	stderrTail = 4 << 10
)

// serverNameRE and toolNameRE are the names that can stand in a dotted
// fluffy tool name a policy glob matches (no dot inside a part).
var (
	serverNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	toolNameRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// config is the Configure JSON the kernel builds from `fluffy mcp add`.
type config struct {
	Server  string            `json:"server"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	// URL, instead of Command, is a streamable HTTP server reached through
	// the kernel's CONNECT proxy (the sandbox's only way out).
	URL string `json:"url"`
	// TimeoutSeconds bounds one tool call (0: defaultTimeout); a server
	// that does not answer in time is stopped and started afresh.
	TimeoutSeconds int `json:"timeout_seconds"`
}

// bridge is tool.Plugin over one MCP server that runs as its child.
type bridge struct {
	log hclog.Logger

	mu        sync.Mutex
	cfg       config
	workspace string
	sess      *mcp.ClientSession
	cmd       *exec.Cmd
	exited    chan struct{}
	scratch   string
	stderr    *tail
	fwd       *proxyForwarder
}

func newBridge(log hclog.Logger) *bridge { return &bridge{log: log} }

func (b *bridge) Info() base.Info {
	return base.Info{Name: "tool-mcp", Kind: base.KindTool, Version: version, APIVersions: base.SupportedAPIVersions()}
}

func cfgErr(what, why string) error {
	return uerr.New("MCP_CONFIG_INVALID", what, why, "check the server with `fluffy mcp list`; remove and add it again with `fluffy mcp add`")
}

func (b *bridge) Configure(_ context.Context, cfg base.Config, _ base.KernelClient) error {
	var c config
	if err := json.Unmarshal(cfg.ConfigJSON, &c); err != nil {
		return cfgErr("the MCP bridge's configuration is not JSON", err.Error())
	}
	if !serverNameRE.MatchString(c.Server) {
		return cfgErr(fmt.Sprintf("MCP server name %q is not allowed", clip(c.Server, 64)), "names are lowercase letters, digits, - and _ (at most 32), starting with a letter")
	}
	if (c.Command == "") == (c.URL == "") {
		return cfgErr("the MCP server "+c.Server+" needs a command or a URL", "a stdio server is a program the bridge starts, an HTTP server a URL it connects to; not both")
	}
	b.mu.Lock()
	b.cfg, b.workspace = c, cfg.Workspace
	b.mu.Unlock()
	return nil
}

// Health fails once the server has exited: the supervisor then stops this
// instance and the next use starts bridge and server afresh (with its
// restart backoff and circuit breaker).
func (b *bridge) Health(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.exited == nil {
		return nil
	}
	select {
	case <-b.exited:
		return fmt.Errorf("MCP server %s exited%s", b.cfg.Server, stderrNote(b.stderr))
	default:
		return nil
	}
}

// start runs the server and its initialize handshake, once per instance.
func (b *bridge) start(ctx context.Context) (*mcp.ClientSession, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sess != nil {
		select {
		case <-b.exited:
			return nil, fmt.Errorf("MCP server %s exited%s", b.cfg.Server, stderrNote(b.stderr))
		default:
			return b.sess, nil
		}
	}
	if b.cfg.Command == "" && b.cfg.URL == "" {
		return nil, cfgErr("the MCP bridge was not configured", "the kernel sends the server's command at Configure")
	}
	if b.cfg.URL != "" {
		return b.startHTTP(ctx)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locate own binary: %w", err)
	}
	scratch, err := os.MkdirTemp("", "fluffy-mcp-")
	if err != nil {
		return nil, fmt.Errorf("scratch dir: %w", err)
	}
	_ = os.Chmod(scratch, 0o755)
	// The server runs confined like a shell command: it can write only
	// its scratch directory (HOME and TMPDIR point there).
	argv := append(landlock.Command(self, scratch), b.cfg.Command)
	argv = append(argv, b.cfg.Args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = b.workspace
	extra := b.cfg.Env
	if b.fwd == nil {
		if b.fwd, err = startForwarder(); err != nil {
			os.RemoveAll(scratch)
			return nil, fmt.Errorf("proxy forwarder: %w", err)
		}
	}
	if b.fwd != nil {
		extra = map[string]string{}
		for k, v := range b.fwd.env() {
			extra[k] = v
		}
		for k, v := range b.cfg.Env {
			extra[k] = v
		}
	}
	cmd.Env = childEnv(os.Environ(), extra)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	st := &tail{max: stderrTail}
	cmd.Stderr = st
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(scratch)
		return nil, uerr.New("MCP_START_FAILED", fmt.Sprintf("MCP server %s could not be started", b.cfg.Server), err.Error(),
			"the command must be an absolute path fluffy mounts or a program on the policy's toolchains")
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "fluffy", Version: version}, nil)
	sctx, cancel := context.WithTimeout(ctx, startBudget)
	defer cancel()
	sess, err := client.Connect(sctx, &mcp.IOTransport{Reader: stdout, Writer: stdin, MaxLineLength: maxLine}, nil)
	if err != nil {
		killGroup(cmd)
		<-exited
		why := err.Error()
		if m, rerr := os.ReadFile(filepath.Join(scratch, landlock.FailedMarker)); rerr == nil {
			why = string(m)
		}
		os.RemoveAll(scratch)
		return nil, uerr.New("MCP_START_FAILED", fmt.Sprintf("MCP server %s did not complete the MCP handshake", b.cfg.Server),
			clip(why, 512)+stderrNote(st), "run the server's command by hand to see why; `fluffy mcp tools "+b.cfg.Server+"` retries")
	}
	b.sess, b.cmd, b.exited, b.scratch, b.stderr = sess, cmd, exited, scratch, st
	return sess, nil
}

func (b *bridge) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		killGroup(b.cmd)
	}
	if b.sess != nil {
		_ = b.sess.Close()
	}
	if b.scratch != "" {
		os.RemoveAll(b.scratch)
	}
	b.fwd.close()
}

func (b *bridge) Tools(ctx context.Context) ([]tool.Def, error) {
	sess, err := b.start(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var defs []tool.Def
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, b.transportErr("list its tools", err)
		}
		if len(defs) >= maxTools {
			b.log.Warn("the MCP server lists more tools than the bridge offers; the rest are left out", "server", b.cfg.Server, "max", maxTools)
			break
		}
		if !toolNameRE.MatchString(t.Name) || seen[t.Name] {
			b.log.Warn("MCP tool left out: its name cannot stand in a fluffy tool name", "server", b.cfg.Server, "tool", clip(t.Name, 80))
			continue
		}
		schema := []byte(`{"type":"object"}`)
		if t.InputSchema != nil {
			if schema, err = json.Marshal(t.InputSchema); err != nil {
				b.log.Warn("MCP tool left out: its input schema does not encode", "server", b.cfg.Server, "tool", t.Name, "error", err)
				continue
			}
		}
		seen[t.Name] = true
		defs = append(defs, tool.Def{Name: ToolPrefix + b.cfg.Server + "." + t.Name, Summary: clip(t.Description, maxSummary),
			Parameters: schema, OutputMode: tool.OutputFull, Lifetime: tool.LifetimeSession})
	}
	return defs, nil
}

func (b *bridge) Execute(ctx context.Context, call tool.Call, _ func(tool.Progress)) (tool.Result, error) {
	prefix := ToolPrefix + b.cfg.Server + "."
	name, ok := strings.CutPrefix(call.Tool, prefix)
	if !ok || !toolNameRE.MatchString(name) {
		return tool.Result{Err: uerr.New("TOOL_UNKNOWN", fmt.Sprintf("the MCP bridge of %s has no tool %q", b.cfg.Server, clip(call.Tool, 200)),
			"its tools are named "+prefix+"TOOL", "call one of the tools `fluffy mcp tools "+b.cfg.Server+"` lists")}, nil
	}
	sess, err := b.start(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	var args map[string]any
	if len(call.Args) > 0 {
		if err := json.Unmarshal(call.Args, &args); err != nil {
			return tool.Result{Err: uerr.New("TOOL_ARGS_INVALID", "arguments to "+call.Tool+" are not a JSON object", err.Error(), "send a JSON object matching the tool's schema")}, nil
		}
	}
	timeout := defaultTimeout
	if b.cfg.TimeoutSeconds > 0 {
		timeout = time.Duration(b.cfg.TimeoutSeconds) * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := sess.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && cctx.Err() == nil {
			// The server answered with a JSON-RPC error: it works, the call did not.
			return tool.Result{Err: uerr.New("MCP_TOOL_FAILED", fmt.Sprintf("MCP server %s refused %s", b.cfg.Server, name), clip(err.Error(), 1024),
				"check the arguments against the tool's schema")}, nil
		}
		if cctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s: %w", timeout, err)
		}
		return tool.Result{}, b.transportErr("answer "+name, err)
	}
	out, ok := render(res)
	if !ok {
		return tool.Result{Err: uerr.New("MCP_TOOL_ERROR", fmt.Sprintf("%s reported an error", call.Tool), clip(out.text(), 2048),
			"read the server's message; fix the arguments or ask the user")}, nil
	}
	enc, err := json.Marshal(out)
	if err != nil {
		return tool.Result{}, err
	}
	return tool.Result{OK: true, Output: enc}, nil
}

// transportErr is a failure of the server itself (it exited, hung until
// the deadline, flooded a line): a plain error, so the supervisor counts it
// against the instance, stops it, and restarts it on next use.
func (b *bridge) transportErr(doing string, err error) error {
	b.mu.Lock()
	st, exited, child := b.stderr, b.exited, b.cmd != nil
	b.mu.Unlock()
	if exited != nil && child {
		// A server that is going away: let it finish, so Health sees
		// it gone and its last words are in stderr.
		select {
		case <-exited:
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("MCP server %s did not %s: %v%s", b.cfg.Server, doing, err, stderrNote(st))
}

// result is what the model gets from one MCP tool call.
type result struct {
	Content    []item          `json:"content"`
	Structured json.RawMessage `json:"structured_content,omitempty"`
	Truncated  bool            `json:"truncated,omitempty"`
}

type item struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	URI      string `json:"uri,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
	Bytes    int    `json:"bytes,omitempty"`
	Note     string `json:"note,omitempty"`
}

func (r result) text() string {
	var b strings.Builder
	for _, it := range r.Content {
		b.WriteString(it.Text)
		b.WriteString(it.Note)
	}
	return b.String()
}

const binaryNote = "binary content is not passed to the model"

// render bounds a CallToolResult: text up to maxText in all, binary
// content replaced by a note of its size, structured content kept only
// when it fits. ok is false when the server flagged the result an error.
func render(res *mcp.CallToolResult) (result, bool) {
	var out result
	budget := maxText
	add := func(s string) string {
		if len(s) > budget {
			out.Truncated = true
			s = clip(s, max(budget, 0))
		}
		budget -= len(s)
		return s
	}
	for _, c := range res.Content {
		if budget <= 0 {
			out.Truncated = true
			break
		}
		switch v := c.(type) {
		case *mcp.TextContent:
			out.Content = append(out.Content, item{Type: "text", Text: add(v.Text)})
		case *mcp.ImageContent:
			out.Content = append(out.Content, item{Type: "image", MIMEType: clip(v.MIMEType, 100), Bytes: len(v.Data), Note: binaryNote})
		case *mcp.AudioContent:
			out.Content = append(out.Content, item{Type: "audio", MIMEType: clip(v.MIMEType, 100), Bytes: len(v.Data), Note: binaryNote})
		case *mcp.ResourceLink:
			out.Content = append(out.Content, item{Type: "resource_link", URI: add(clip(v.URI, 2048)), Text: add(clip(v.Name, 256))})
		case *mcp.EmbeddedResource:
			it := item{Type: "resource"}
			if v.Resource != nil {
				it.URI, it.MIMEType = add(clip(v.Resource.URI, 2048)), clip(v.Resource.MIMEType, 100)
				it.Text = add(v.Resource.Text)
				if len(v.Resource.Blob) > 0 {
					it.Bytes, it.Note = len(v.Resource.Blob), binaryNote
				}
			}
			out.Content = append(out.Content, it)
		default:
			out.Content = append(out.Content, item{Type: "other", Note: fmt.Sprintf("content of type %T is not passed to the model", c)})
		}
	}
	if res.StructuredContent != nil {
		if enc, err := json.Marshal(res.StructuredContent); err == nil {
			if len(enc) <= max(budget, 0) {
				out.Structured = enc
			} else {
				out.Truncated = true
			}
		}
	}
	return out, !res.IsError
}

// childEnv is the server's environment: the sandbox's own (PATH from the
// policy's toolchains; never the host's) without the plugin protocol's
// variables, plus exactly what `fluffy mcp add --env` named.
func childEnv(env []string, extra map[string]string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PLUGIN_") || strings.HasPrefix(k, "FLUFFY_") {
			continue
		}
		if _, set := extra[k]; set {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range extra {
		out = append(out, k+"="+v)
	}
	return out
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

func stderrNote(t *tail) string {
	if t == nil {
		return ""
	}
	if s := strings.TrimSpace(t.String()); s != "" {
		return "; server stderr: " + clip(s, 1024)
	}
	return ""
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
