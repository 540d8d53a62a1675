package commit

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing/format/gitattributes"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// checkFilters refuses merged paths that git would pass through a filter
// driver (filter=lfs, …): their committed form is not their content, and
// fluffy commits content as is. The .gitattributes files on each path's
// directory chain and info/attributes are read, as git does.
func (st *repo) checkFilters(paths []string) error {
	dirs := map[string][]string{"": nil}
	for _, p := range paths {
		parts := strings.Split(p, "/")
		for i := 1; i < len(parts); i++ {
			dirs[strings.Join(parts[:i], "/")] = parts[:i]
		}
	}
	keys := make([]string, 0, len(dirs))
	for k := range dirs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if a, b := len(dirs[keys[i]]), len(dirs[keys[j]]); a != b {
			return a < b
		}
		return keys[i] < keys[j]
	})
	wt := osfs.New(st.project)
	var stack []gitattributes.MatchAttribute
	for _, k := range keys {
		attrs, err := gitattributes.ReadAttributesFile(wt, dirs[k], ".gitattributes", k == "")
		if err != nil {
			return repoErr("read "+k+"/.gitattributes", err)
		}
		stack = append(stack, attrs...)
	}
	// info/attributes applies from the root, with the highest priority.
	if f, err := os.Open(filepath.Join(st.common, "info", "attributes")); err == nil {
		info, err := gitattributes.ReadAttributes(f, nil, true)
		f.Close()
		if err != nil {
			return repoErr("read info/attributes", err)
		}
		stack = append(stack, info...)
	}
	m := gitattributes.NewMatcher(stack)
	for _, p := range paths {
		res, _ := m.Match(strings.Split(p, "/"), []string{"filter"})
		if a, ok := res["filter"]; ok && a.IsValueSet() {
			return uerr.New(CodeUnsupported, fmt.Sprintf("%s goes through git's %q filter", p, a.Value()),
				"its committed form is not its content (e.g. a Git LFS pointer), and fluffy commits content as is: merge done, commit skipped",
				"commit the merged files with git (`git add` runs the filter)")
		}
	}
	return nil
}
