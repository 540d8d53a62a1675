package glob

// vector is one pattern list, one path and whether the list matches it.
// Every vector is also checked against `git check-ignore` (see
// TestVectorsAgreeWithGit) so that the table cannot drift from .gitignore
// semantics. A trailing slash on path marks a directory.
type vector struct {
	patterns []string
	path     string
	want     bool
}

var vectors = []vector{
	// A pattern without a slash matches at any depth, files and directories.
	{[]string{"foo"}, "foo", true},
	{[]string{"foo"}, "a/foo", true},
	{[]string{"foo"}, "a/b/foo", true},
	{[]string{"foo"}, "foo/bar.go", true}, // everything beneath a matched directory
	{[]string{"foo"}, "a/foo/bar.go", true},
	{[]string{"foo"}, "foobar", false},
	{[]string{"foo"}, "barfoo", false},
	{[]string{"*.go"}, "main.go", true},
	{[]string{"*.go"}, "src/a/main.go", true},
	{[]string{"*.go"}, "main.gox", false},
	{[]string{"*.go"}, "src/main.go.txt", false},
	{[]string{"*.env"}, ".env", true}, // '*' matches a leading dot
	{[]string{".env"}, "config/.env", true},
	{[]string{".env.*"}, ".env.local", true},
	{[]string{"?.md"}, "a.md", true},
	{[]string{"?.md"}, "ab.md", false},
	{[]string{"[abc].txt"}, "b.txt", true},
	{[]string{"[abc].txt"}, "d.txt", false},
	{[]string{"[!abc].txt"}, "d.txt", true},
	{[]string{"[!abc].txt"}, "a.txt", false},
	{[]string{"[a-c]*.txt"}, "cat.txt", true},
	{[]string{"id_rsa*"}, "home/.ssh/id_rsa.pub", true},
	// A leading slash anchors to the root.
	{[]string{"/bar"}, "bar", true},
	{[]string{"/bar"}, "z/bar", false},
	{[]string{"/bar"}, "bar/x.go", true},
	{[]string{"/*.go"}, "main.go", true},
	{[]string{"/*.go"}, "cmd/main.go", false},
	// A slash in the middle anchors too.
	{[]string{"doc/*.md"}, "doc/a.md", true},
	{[]string{"doc/*.md"}, "doc/z/a.md", false},
	{[]string{"doc/*.md"}, "x/doc/a.md", false},
	{[]string{"src/a.go"}, "src/a.go", true},
	{[]string{"src/a.go"}, "lib/src/a.go", false},
	{[]string{".github/workflows"}, ".github/workflows/ci.yml", true},
	// '*' never crosses a slash.
	{[]string{"src/*"}, "src/a.go", true},
	{[]string{"src/*"}, "src/a/b.go", true}, // via the matched directory src/a
	{[]string{"src/*.go"}, "src/a/b.go", false},
	// "**" forms.
	{[]string{"**/x/y"}, "x/y", true},
	{[]string{"**/x/y"}, "q/x/y", true},
	{[]string{"**/x/y"}, "q/r/x/y", true},
	{[]string{"**/x/y"}, "q/x/z", false},
	{[]string{"**/foo"}, "foo", true},
	{[]string{"**/foo"}, "a/b/foo", true},
	{[]string{"a/**"}, "a", false}, // everything inside, not a itself
	{[]string{"a/**"}, "a/b", true},
	{[]string{"a/**"}, "a/b/c", true},
	{[]string{"a/**"}, "b/a/c", false},
	{[]string{"src/**"}, "src/a.go", true},
	{[]string{"src/**"}, "src/pkg/deep/a.go", true},
	{[]string{"src/**"}, "srcx/a.go", false},
	{[]string{"tests/**"}, "tests/unit/a_test.go", true},
	{[]string{"a/**/b"}, "a/b", true},
	{[]string{"a/**/b"}, "a/x/b", true},
	{[]string{"a/**/b"}, "a/x/y/b", true},
	{[]string{"a/**/b"}, "a/x/y/c", false},
	{[]string{"a/**/*.go"}, "a/x/y/m.go", true},
	{[]string{"a/**/*.go"}, "a/m.go", true},
	{[]string{"**"}, "anything/at/all.txt", true},
	{[]string{"**"}, "top", true},
	{[]string{"**/*.pem"}, "certs/server.pem", true},
	{[]string{"a**b"}, "axxb", true}, // "**" inside a segment is a plain '*'
	{[]string{"a**b"}, "ax/xb", false},
	// A trailing slash matches directories only (and what is inside them).
	{[]string{"build/"}, "build", false},
	{[]string{"build/"}, "build/", true},
	{[]string{"build/"}, "build/a.go", true},
	{[]string{"build/"}, "z/build/a.go", true},
	{[]string{"build/"}, "z/build", false},
	{[]string{".ssh/"}, "home/.ssh/id_ed25519", true},
	{[]string{"/out/"}, "out/x", true},
	{[]string{"/out/"}, "a/out/x", false},
	{[]string{"a/**/"}, "a/b/", true},
	{[]string{"a/**/"}, "a/b", false},
	{[]string{"a/**/"}, "a/b/c", true},
	// Escapes.
	{[]string{"\\#notes"}, "#notes", true},
	{[]string{"\\!bang"}, "!bang", true},
	{[]string{"f\\*o"}, "f*o", true},
	{[]string{"f\\*o"}, "fxo", false},
	// Exclude beats include (with the exclude written last, git agrees).
	{[]string{"src/**", "!src/keep.go"}, "src/keep.go", false},
	{[]string{"src/**", "!src/keep.go"}, "src/other.go", true},
	{[]string{"*.env", "!example.env"}, "config/example.env", false},
	{[]string{"*.env", "!example.env"}, "config/prod.env", true},
	{[]string{".env*", "!.env.example"}, ".env.example", false},
	{[]string{".env*", "!.env.example"}, ".env.production", true},
	{[]string{"*.go", "!*_test.go"}, "pkg/a_test.go", false},
	{[]string{"*.go", "!*_test.go"}, "pkg/a.go", true},
	// Lists OR.
	{[]string{"package.json", "Dockerfile", ".github/**"}, "Dockerfile", true},
	{[]string{"package.json", "Dockerfile", ".github/**"}, ".github/workflows/ci.yml", true},
	{[]string{"package.json", "Dockerfile", ".github/**"}, "src/Dockerfile.go", false},
}

// divergences are vectors where fluffy deliberately differs from git: in a
// policy an exclude always wins (order-independent), while git lets a later
// include re-match a path or refuses to re-include inside an excluded
// directory. The test checks git really disagrees, so this list stays true.
var divergences = []vector{
	// git: a later include wins ("last match wins"); fluffy: exclude wins.
	{[]string{"!src/keep.go", "src/**"}, "src/keep.go", false},
	// git: cannot re-include a file whose parent directory is excluded;
	// fluffy: the exclude wins.
	{[]string{"src/", "!src/keep.go"}, "src/keep.go", false},
	// git: the exclude of a directory does not re-include files matched
	// by a pattern that names them; fluffy: exclude covers the directory.
	{[]string{"src/**", "!src/vendor/"}, "src/vendor/x.go", false},
	// git matches the literal argument "a/" against "a/**" (the "**"
	// matching the empty string after the slash); fluffy: "a/**" is what is
	// inside a, never a itself, whether or not it is marked a directory.
	{[]string{"a/**"}, "a/", false},
}
