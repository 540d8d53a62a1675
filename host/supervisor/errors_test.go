package supervisor

import (
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TestAPIVersionAdvice: a plugin declaring only a version newer
// than the kernel's is not answered with "upgrade fluffy" alone: the
// manifest may be what is wrong, and its author must be told so.
func TestAPIVersionAdvice(t *testing.T) {
	cases := []struct {
		name     string
		versions []int
		want     []string
	}{
		{"newer than the kernel", []int{7}, []string{"if a newer fluffy release supports it, upgrade fluffy", "otherwise the manifest is wrong", "declare in api_versions only what the binary serves"}},
		{"older than the kernel", []int{0}, []string{"install a release of p built for plugin API", "pluginsdk"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckAPIVersions("p", c.versions)
			fix := uerr.From(err).Fix
			for _, w := range c.want {
				if !strings.Contains(fix, w) {
					t.Errorf("fix %q lacks %q", fix, w)
				}
			}
		})
	}
}
