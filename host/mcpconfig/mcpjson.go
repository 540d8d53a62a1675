package mcpconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// ScopeMCPJSON marks a server from the project's .mcp.json.
const ScopeMCPJSON = "mcp.json"

// MCPJSONName is the file other agents read a project's servers from.
const MCPJSONName = ".mcp.json"

// CodeMCPJSON is a .mcp.json that cannot be used.
const CodeMCPJSON = "MCP_JSON_INVALID"

// ProjectJSON is what the project's .mcp.json says and whether the user
// trusted exactly this content.
type ProjectJSON struct {
	Path    string
	SHA256  string
	Servers []Server
	Trusted bool
	// TrustedOther: a different content was trusted before (the file
	// changed since).
	TrustedOther bool
}

// mcpJSONFile is the format: {"mcpServers": {NAME: {...}}}.
type mcpJSONFile struct {
	MCPServers map[string]struct {
		Type    string            `json:"type"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	} `json:"mcpServers"`
}

func (st Store) trustFile() string {
	return strings.TrimSuffix(st.ProjectFile(), ".yaml") + ".mcpjson.trusted"
}

// ReadProjectJSON reads the project's .mcp.json; nil, nil when it has none.
// Every entry is validated like `fluffy mcp add`'s; one that is not valid
// makes the whole file unusable (it is trusted as a whole).
func (st Store) ReadProjectJSON() (*ProjectJSON, error) {
	if st.Project == "" {
		return nil, nil
	}
	p := filepath.Join(st.Project, MCPJSONName)
	fi, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return nil, nil
	}
	bad := func(why, fix string) error {
		return uerr.New(CodeMCPJSON, p+" cannot be used", why, fix)
	}
	if err != nil {
		return nil, bad(err.Error(), "check the file's permissions")
	}
	if !fi.Mode().IsRegular() {
		return nil, bad("it is not a regular file (a link is not followed)", "make it a plain file")
	}
	if fi.Size() > maxFile {
		return nil, bad(fmt.Sprintf("it is larger than %d bytes", maxFile), "list fewer servers")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, bad(err.Error(), "check the file's permissions")
	}
	var f mcpJSONFile
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		return nil, bad("it is not the mcpServers JSON other agents use: "+err.Error(), `write {"mcpServers": {"NAME": {"command": "...", "args": [...]}}}`)
	}
	sum := sha256.Sum256(b)
	pj := &ProjectJSON{Path: p, SHA256: hex.EncodeToString(sum[:])}
	names := make([]string, 0, len(f.MCPServers))
	for n := range f.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e := f.MCPServers[n]
		if len(e.Headers) > 0 {
			return nil, bad("server "+clip(n)+" sends HTTP headers, which fluffy does not support yet", "remove its headers, or leave the server out")
		}
		switch e.Type {
		case "", "stdio", "http", "streamable-http":
		default:
			return nil, bad(fmt.Sprintf("server %s has type %q", clip(n), clip(e.Type)), "fluffy runs stdio and streamable HTTP servers (type stdio, http)")
		}
		s := Server{Name: n, Command: e.Command, Args: e.Args, Env: e.Env, URL: e.URL, Scope: ScopeMCPJSON}
		if err := validate(s, st.Home, st.Project, false); err != nil {
			return nil, bad("server "+clip(n)+": "+uerr.From(err).What+" ("+uerr.From(err).Why+")", uerr.From(err).Fix)
		}
		pj.Servers = append(pj.Servers, s)
	}
	if t, err := os.ReadFile(st.trustFile()); err == nil {
		got := strings.TrimSpace(string(t))
		pj.Trusted = got == pj.SHA256
		pj.TrustedOther = !pj.Trusted && got != ""
	}
	return pj, nil
}

// TrustProjectJSON records that the user trusts exactly the content whose
// sha256 is sum (what ReadProjectJSON returned, shown to the user).
func (st Store) TrustProjectJSON(sum string) error {
	if err := os.MkdirAll(filepath.Dir(st.trustFile()), 0o700); err != nil {
		return err
	}
	return os.WriteFile(st.trustFile(), []byte(sum+"\n"), 0o600)
}
