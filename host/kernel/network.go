package kernel

import (
	"fmt"

	"github.com/fluffy-waffle/fluffy/policy"
)

// networkPolicy gives the CONNECT proxy the policy's network_whitelist.
// It reads the engine's policy at every request, so a hot-reloaded policy
// applies to the next tunnel of every running plugin.
type networkPolicy struct{ e *policy.Engine }

// AllowHost implements sandbox.NetworkPolicy.
func (n networkPolicy) AllowHost(target string) (bool, string) {
	p := n.e.Policy()
	if p.Network.Allows(target) {
		return true, ""
	}
	return false, fmt.Sprintf("host not in the network_whitelist of the project policy (%s)", p.File)
}
