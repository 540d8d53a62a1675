package policy

import (
	"net"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// SectionNetworkWhitelist is the top-level section naming the hosts
// plugins may reach through the kernel's CONNECT proxy.
const SectionNetworkWhitelist = "network_whitelist"

// NetworkWhitelist is the policy's network_whitelist: a list of host or
// host:port entries (a bare host means port 443). The proxy lets a plugin
// reach a host only when its manifest's `network` list declares it AND,
// when the section is present, the whitelist lists it: the policy narrows
// what plugins reach, it never widens a manifest. Without the section
// (Set false) the manifests alone decide; `network_whitelist: []` lets no
// plugin reach any host.
type NetworkWhitelist struct {
	Set   bool
	Hosts []string // normalized host:port, lower case
}

// Allows reports whether target (host:port) may be reached as far as the
// policy is concerned.
func (w NetworkWhitelist) Allows(target string) bool {
	return !w.Set || slices.Contains(w.Hosts, NormalizeHost(target))
}

// NormalizeHost lower-cases a host[:port] entry and adds port 443 to a
// bare host (the proxy's and the manifests' convention).
func NormalizeHost(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if _, _, err := net.SplitHostPort(s); err != nil {
		return net.JoinHostPort(s, "443")
	}
	return s
}

func (l *loader) networkWhitelist(v *yaml.Node) error {
	entries, err := l.list(v, SectionNetworkWhitelist)
	if err != nil {
		return err
	}
	w := NetworkWhitelist{Set: true, Hosts: make([]string, 0, len(entries))}
	for i, e := range entries {
		n := v
		if v.Kind == yaml.SequenceNode {
			n = v.Content[i]
		}
		h := NormalizeHost(e)
		host, port, err := net.SplitHostPort(h)
		p, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || p < 1 || p > 65535 || strings.ContainsAny(host, "/@ \t*?") {
			return l.err(CodeBadValue, n, "network_whitelist: "+strconv.Quote(e)+" is not a host or host:port",
				"the proxy compares the host and port a plugin asks for (no scheme, path or wildcard)",
				"write e.g. api.openai.com (port 443) or localhost:11434")
		}
		if !slices.Contains(w.Hosts, h) {
			w.Hosts = append(w.Hosts, h)
		}
	}
	l.p.Network = w
	return nil
}
