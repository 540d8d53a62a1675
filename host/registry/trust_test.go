package registry

import (
	"os"
	"slices"
	"testing"
)

// TestBuiltinNamesCoverShippedPlugins: every plugin under builtin-plugins/
// has its name reserved, so a new builtin cannot be impersonated before
// someone remembers to list it.
func TestBuiltinNamesCoverShippedPlugins(t *testing.T) {
	ents, err := os.ReadDir("../../builtin-plugins")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		// internal/ is code the builtins share, not a plugin (make plugins skips it).
		if e.IsDir() && e.Name() != "internal" && !slices.Contains(BuiltinNames(), e.Name()) {
			t.Errorf("builtin-plugins/%s is not in BuiltinNames()", e.Name())
		}
	}
}

func TestEffectiveTags(t *testing.T) {
	cases := []struct {
		name               string
		builtin            bool
		requested, granted []string
		want               []string
	}{
		{"third-party request ignored", false, []string{"trusted_write"}, nil, []string{"third_party"}},
		{"third-party claims core", false, []string{"core_plugin"}, nil, []string{"third_party"}},
		{"granted", false, []string{"trusted_write"}, []string{"trusted_write"}, []string{"third_party", "trusted_write"}},
		{"cannot grant core", false, nil, []string{"core_plugin", "third_party"}, []string{"third_party"}},
		{"builtin keeps its tags", true, []string{"core_plugin", "trusted_write"}, nil, []string{"core_plugin", "trusted_write"}},
		{"builtin drops third_party", true, []string{"third_party"}, nil, []string{"core_plugin"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := EffectiveTags(c.builtin, c.requested, c.granted); !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestKernelNameIsReserved: the kernel's own tools are plugin "kernel" to
// the router and the policy (rule workflow-tools); a plugin named so would
// be judged as the kernel.
func TestKernelNameIsReserved(t *testing.T) {
	if !(&Registry{}).reservedName(KernelName, nil) {
		t.Fatal(`"kernel" is not a reserved plugin name`)
	}
	if (&Registry{}).reservedName("my-tool", nil) {
		t.Fatal(`"my-tool" is reserved`)
	}
}
