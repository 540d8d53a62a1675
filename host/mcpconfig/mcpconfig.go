package mcpconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Scopes of a server entry.
const (
	ScopeProject = "project"
	ScopeUser    = "user"
)

// Error codes.
const (
	CodeInvalid  = "MCP_SERVER_INVALID"
	CodeExists   = "MCP_SERVER_EXISTS"
	CodeNotFound = "MCP_SERVER_NOT_FOUND"
	CodeBadFile  = "MCP_CONFIG_BAD_FILE"
)

// SpecPrefix names the supervisor spec of a server: mcp-NAME. ToolPrefix
// starts its tools' names: mcp.NAME.TOOL.
const (
	SpecPrefix = "mcp-"
	ToolPrefix = "mcp."
)

// maxFile bounds one configuration file.
const maxFile = 256 << 10

var (
	nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	envRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	hostRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`)
	// progRE is a program found on the toolchains' PATH inside the sandbox.
	progRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)
)

// Server is one configured stdio MCP server.
type Server struct {
	Name string `yaml:"name" json:"name"`
	// Command is an absolute host path (mounted read-only at the same
	// path) or a program name found on the policy's toolchains.
	Command string `yaml:"command,omitempty" json:"command,omitempty"`
	// URL, instead of Command, is a streamable HTTP server (http or
	// https), reached only through the kernel's CONNECT proxy.
	URL  string            `yaml:"url,omitempty" json:"url,omitempty"`
	Args []string          `yaml:"args,omitempty" json:"args,omitempty"`
	Env  map[string]string `yaml:"env,omitempty" json:"-"`
	// Network lists host:port endpoints the server may reach through the
	// kernel's proxy, when the policy also allows them.
	Network []string `yaml:"network,omitempty" json:"network,omitempty"`
	// TimeoutSeconds bounds one tool call (0: the bridge's 60 s).
	TimeoutSeconds int `yaml:"timeout_seconds,omitempty" json:"timeout_seconds,omitempty"`
	// Scope is where the entry is stored (not written to the file).
	Scope string `yaml:"-" json:"scope"`
}

// EnvNames are the server's environment variable names, sorted (values
// may be secrets and are never listed).
func (s Server) EnvNames() []string {
	var out []string
	for k := range s.Env {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// SpecName is the supervisor name of the server's bridge instance.
func (s Server) SpecName() string { return SpecPrefix + s.Name }

// ConfigJSON is the bridge's Configure JSON.
func (s Server) ConfigJSON() []byte {
	b, _ := json.Marshal(struct {
		Server  string            `json:"server"`
		Command string            `json:"command"`
		Args    []string          `json:"args,omitempty"`
		Env     map[string]string `json:"env,omitempty"`
		URL     string            `json:"url,omitempty"`
		Timeout int               `json:"timeout_seconds,omitempty"`
	}{s.Name, s.Command, s.Args, s.Env, s.URL, s.TimeoutSeconds})
	return b
}

// Absolute reports whether Command is a host path to mount.
func (s Server) Absolute() bool { return filepath.IsAbs(s.Command) }

func invalid(what, why, fix string) error { return uerr.New(CodeInvalid, what, why, fix) }

// Validate checks an entry. home and project are the directories a
// mounted program may not lie in (the store and the unfiltered project).
func Validate(s Server, home, project string) error { return validate(s, home, project, true) }

// validate is Validate; stat false skips looking at the program (a stored
// list stays readable, and removable, when a program went away).
func validate(s Server, home, project string, stat bool) error {
	if !nameRE.MatchString(s.Name) {
		return invalid(fmt.Sprintf("MCP server name %q is not allowed", clip(s.Name)),
			"the name becomes part of tool names (mcp.NAME.TOOL) that policy rules match", "use lowercase letters, digits, - and _ (at most 32), starting with a letter")
	}
	if s.URL != "" {
		return validateURL(s)
	}
	switch {
	case s.Command == "":
		return invalid("no command was given for MCP server "+s.Name, "a stdio server is a program fluffy starts in a sandbox", "fluffy mcp add NAME -- COMMAND [ARGS...]")
	case filepath.IsAbs(s.Command):
		if filepath.Clean(s.Command) != s.Command {
			return invalid(fmt.Sprintf("command %q is not a clean path", clip(s.Command)), "the path is mounted into the sandbox as written", "write it without .., // or a trailing /")
		}
		if !stat {
			break
		}
		fi, err := os.Stat(s.Command)
		if err != nil {
			return invalid(fmt.Sprintf("command %s cannot be used", clip(s.Command)), err.Error(), "give the absolute path of the server's program or script")
		}
		if !fi.Mode().IsRegular() {
			return invalid(fmt.Sprintf("command %s is not a regular file", clip(s.Command)), "only the program itself is mounted (read-only) into the sandbox", "give the path of the program or script, not a directory")
		}
		for _, private := range []string{home, project} {
			if private == "" {
				continue
			}
			if within(s.Command, private) {
				return invalid(fmt.Sprintf("command %s lies in %s", clip(s.Command), private),
					"fluffy's home and the unfiltered project are never mounted into a sandbox",
					"keep the program elsewhere, or run a script of the project through its interpreter: -- python3 /workspace/server.py")
			}
		}
	case !progRE.MatchString(s.Command):
		return invalid(fmt.Sprintf("command %q is neither an absolute path nor a program name", clip(s.Command)),
			"a relative path would name a file the sandbox cannot see", "give an absolute path, or a program on the policy's toolchains (npx, uvx, python3, node)")
	}
	if s.TimeoutSeconds < 0 || s.TimeoutSeconds > 3600 {
		return invalid(fmt.Sprintf("timeout %d s is out of range", s.TimeoutSeconds), "a call may be given 1 to 3600 seconds", "omit it for 60 s")
	}
	if len(s.Args) > 256 {
		return invalid("too many arguments", "at most 256 are passed", "pass fewer arguments")
	}
	for i, a := range s.Args {
		if strings.ContainsRune(a, 0) || len(a) > 4096 {
			return invalid(fmt.Sprintf("argument %d cannot be passed", i), "arguments are at most 4096 bytes without NUL", "shorten it")
		}
	}
	for k, v := range s.Env {
		if !envRE.MatchString(k) || strings.HasPrefix(k, "PLUGIN_") || strings.HasPrefix(k, "FLUFFY_") {
			return invalid(fmt.Sprintf("environment variable name %q is not allowed", clip(k)), "names are letters, digits and _; PLUGIN_* and FLUFFY_* belong to fluffy", "write --env NAME=VALUE")
		}
		if strings.ContainsRune(v, 0) || len(v) > 32<<10 {
			return invalid("the value of "+k+" cannot be passed", "values are at most 32 KiB without NUL", "shorten it")
		}
	}
	for _, h := range s.Network {
		if err := checkHost(h); err != "" {
			return invalid(fmt.Sprintf("network endpoint %q is not host:port", clip(h)), err, "write e.g. --network api.github.com:443")
		}
	}
	return nil
}

// validateURL checks an HTTP server's entry: a URL and nothing a program
// would take.
func validateURL(s Server) error {
	if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 || len(s.Network) > 0 {
		return invalid("MCP server "+s.Name+" has a URL and a command, arguments, --env or --network",
			"an HTTP server is reached at its URL's host alone; a command, its environment and its network belong to a stdio server", "give either --url URL or -- COMMAND [ARGS...]")
	}
	if _, err := URLHost(s.URL); err != nil {
		return err
	}
	if s.TimeoutSeconds < 0 || s.TimeoutSeconds > 3600 {
		return invalid(fmt.Sprintf("timeout %d s is out of range", s.TimeoutSeconds), "a call may be given 1 to 3600 seconds", "omit it for 60 s")
	}
	return nil
}

// URLHost is the host:port an HTTP server's URL is reached at.
func URLHost(raw string) (string, error) {
	u, err := url.Parse(raw)
	bad := func(why string) error {
		return invalid(fmt.Sprintf("URL %q cannot be used", clip(raw)), why, "give the server's endpoint, e.g. --url https://mcp.example.com/mcp")
	}
	switch {
	case err != nil:
		return "", bad(err.Error())
	case u.Scheme != "https" && u.Scheme != "http":
		return "", bad("the scheme is http or https")
	case u.User != nil:
		return "", bad("credentials in the URL would be stored and shown; they are not supported")
	case u.Hostname() == "":
		return "", bad("it has no host")
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	hp := net.JoinHostPort(strings.ToLower(u.Hostname()), port)
	if why := checkHost(hp); why != "" {
		return "", bad(why)
	}
	return hp, nil
}

func checkHost(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "give the host and the port, e.g. api.example.com:443"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "the port is 1 to 65535"
	}
	if net.ParseIP(host) == nil && !hostRE.MatchString(host) {
		return "the host is a lowercase DNS name or an IP address"
	}
	return ""
}

func within(p, dir string) bool {
	d, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	if r, err := filepath.EvalSymlinks(d); err == nil {
		d = r
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// Store reads and writes the two files.
type Store struct {
	Home    string // $FLUFFY_HOME
	Project string // the project root ("" outside a project)
}

// UserFile is the user's servers; ProjectFile the project's, keyed by the
// project's absolute path.
func (st Store) UserFile() string { return filepath.Join(st.Home, "mcp", "user.yaml") }

func (st Store) ProjectFile() string {
	abs, err := filepath.Abs(st.Project)
	if err != nil {
		abs = st.Project
	}
	sum := sha256.Sum256([]byte(filepath.Clean(abs)))
	return filepath.Join(st.Home, "mcp", "project-"+hex.EncodeToString(sum[:8])+".yaml")
}

type file struct {
	Project string   `yaml:"project,omitempty"`
	Servers []Server `yaml:"servers"`
}

func (st Store) path(scope string) (string, error) {
	switch scope {
	case ScopeUser:
		return st.UserFile(), nil
	case ScopeProject, "":
		if st.Project == "" {
			return "", invalid("there is no project here", "project-scoped MCP servers belong to a project", "run the command in a project, or pass --scope user")
		}
		return st.ProjectFile(), nil
	}
	return "", invalid(fmt.Sprintf("scope %q is not known", clip(scope)), "servers are stored per project or per user", "pass --scope project or --scope user")
}

func (st Store) read(scope string) ([]Server, error) {
	p, err := st.path(scope)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, uerr.Wrap(err, CodeBadFile, "cannot read "+p, err.Error(), "check the file's permissions")
	}
	if len(b) > maxFile {
		return nil, uerr.New(CodeBadFile, p+" is too large", fmt.Sprintf("the file is limited to %d bytes", maxFile), "remove servers with `fluffy mcp remove`")
	}
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && err.Error() != "EOF" {
		return nil, uerr.Wrap(err, CodeBadFile, p+" is not a valid MCP server list", err.Error(), "fix or remove the file; it is written by `fluffy mcp add`")
	}
	for i := range f.Servers {
		f.Servers[i].Scope = scope
		if scope == "" {
			f.Servers[i].Scope = ScopeProject
		}
		if err := validate(f.Servers[i], st.Home, st.Project, false); err != nil {
			return nil, uerr.Wrap(err, CodeBadFile, p+": server "+clip(f.Servers[i].Name)+" cannot be used", uerr.From(err).What+": "+uerr.From(err).Why, "remove it with `fluffy mcp remove` and add it again")
		}
	}
	return f.Servers, nil
}

func (st Store) write(scope string, servers []Server) error {
	p, err := st.path(scope)
	if err != nil {
		return err
	}
	f := file{Servers: servers}
	if scope != ScopeUser {
		f.Project, _ = filepath.Abs(st.Project)
	}
	b, err := yaml.Marshal(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp := p + ".tmp"
	// 0600: --env values may be tokens.
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// List is every server that applies: the project's, then the user's that
// the project does not override by name, then those of the project's
// .mcp.json when the user trusted its exact content, sorted by name.
func (st Store) List() ([]Server, error) {
	var out []Server
	seen := map[string]bool{}
	if st.Project != "" {
		ps, err := st.read(ScopeProject)
		if err != nil {
			return nil, err
		}
		for _, s := range ps {
			seen[s.Name] = true
			out = append(out, s)
		}
	}
	us, err := st.read(ScopeUser)
	if err != nil {
		return nil, err
	}
	for _, s := range us {
		if !seen[s.Name] {
			seen[s.Name] = true
			out = append(out, s)
		}
	}
	// A .mcp.json that cannot be used adds nothing (`fluffy mcp list`
	// says why) and does not stop the configured servers.
	if pj, err := st.ReadProjectJSON(); err == nil && pj != nil && pj.Trusted {
		for _, s := range pj.Servers {
			if !seen[s.Name] {
				out = append(out, s)
			}
		}
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Get is the server name as List sees it.
func (st Store) Get(name string) (Server, error) {
	all, err := st.List()
	if err != nil {
		return Server{}, err
	}
	for _, s := range all {
		if s.Name == name {
			return s, nil
		}
	}
	return Server{}, uerr.New(CodeNotFound, fmt.Sprintf("no MCP server named %q is configured", clip(name)), "the project's and the user's lists do not have it", "see `fluffy mcp list`; add it with `fluffy mcp add`")
}

// Add stores s in its scope; a server of that name in the same scope is
// an error (remove it first).
func (st Store) Add(s Server) error {
	if err := Validate(s, st.Home, st.Project); err != nil {
		return err
	}
	cur, err := st.read(s.Scope)
	if err != nil {
		return err
	}
	for _, c := range cur {
		if c.Name == s.Name {
			return uerr.New(CodeExists, fmt.Sprintf("MCP server %s is already configured (%s)", s.Name, s.Scope), "names are unique within a scope", "remove it first: fluffy mcp remove "+s.Name)
		}
	}
	scope := s.Scope
	if scope == "" {
		scope = ScopeProject
	}
	return st.write(scope, append(cur, s))
}

// Remove deletes name from scope ("" : the project's entry if it has one,
// else the user's) and returns the scope it was removed from.
func (st Store) Remove(name, scope string) (string, error) {
	scopes := []string{scope}
	if scope == "" {
		scopes = []string{ScopeUser}
		if st.Project != "" {
			scopes = []string{ScopeProject, ScopeUser}
		}
	}
	for _, sc := range scopes {
		cur, err := st.read(sc)
		if err != nil {
			return "", err
		}
		for i, c := range cur {
			if c.Name == name {
				return sc, st.write(sc, slices.Delete(cur, i, i+1))
			}
		}
	}
	return "", uerr.New(CodeNotFound, fmt.Sprintf("no MCP server named %q is configured", clip(name)), "neither the project's nor the user's list has it", "see `fluffy mcp list`")
}
