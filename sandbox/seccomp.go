package sandbox

import (
	"embed"
	"fmt"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

//go:embed seccomp/*.json
var seccompFS embed.FS

// SeccompProfile returns the embedded JSON profile of the given name.
func SeccompProfile(name string) (string, error) {
	switch name {
	case SeccompStrict, SeccompStandard, SeccompStandardNet:
	default:
		return "", uerr.New("SANDBOX_UNKNOWN_SECCOMP", fmt.Sprintf("unknown seccomp profile %q", name),
			"fluffy ships the profiles strict, standard and standard-net", "use one of them")
	}
	b, err := seccompFS.ReadFile("seccomp/" + name + ".json")
	if err != nil {
		return "", fmt.Errorf("read seccomp profile %s: %w", name, err)
	}
	return string(b), nil
}
