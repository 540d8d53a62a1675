package policy

import (
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TestNetworkWhitelistSection: the section is parsed into host:port
// entries (a bare host is port 443), bad entries fail the load with the
// line, an absent section leaves the manifests alone to decide and an
// empty one allows nothing.
func TestNetworkWhitelistSection(t *testing.T) {
	p, err := Load("p.yaml", []byte("version: 1\nnetwork_whitelist: [API.openai.com, \"localhost:11434\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := p.Network
	if !w.Set || !w.Allows("api.openai.com:443") || !w.Allows("localhost:11434") || w.Allows("api.openai.com:80") || w.Allows("evil.com:443") {
		t.Fatalf("whitelist %+v", w)
	}
	if _, ok := p.Section(SectionNetworkWhitelist); ok {
		t.Fatal("network_whitelist is the policy's own section now")
	}
	p, _ = Load("p.yaml", []byte("version: 1\n"))
	if p.Network.Set || !p.Network.Allows("anything.example:443") {
		t.Fatalf("absent section must not narrow: %+v", p.Network)
	}
	p, _ = Load("p.yaml", []byte("version: 1\nnetwork_whitelist: []\n"))
	if !p.Network.Set || p.Network.Allows("api.openai.com:443") {
		t.Fatalf("empty section must allow nothing: %+v", p.Network)
	}
	for _, bad := range []string{"https://api.openai.com", "*.openai.com", "host:0", "host:x", "a/b", "network_whitelist:"} {
		text := "version: 1\nnetwork_whitelist: [\"" + bad + "\"]\n"
		if bad == "network_whitelist:" {
			text = "version: 1\nnetwork_whitelist:\n"
		}
		if _, err := Load("p.yaml", []byte(text)); !uerr.HasCode(err, CodeBadValue) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
