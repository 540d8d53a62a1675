package supervisor

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestYamuxShutdownLineIsNotAnError: the "[ERR] yamux: Failed
// to write header" line go-plugin's yamux session logs when a plugin is
// stopped after an ordinary call is not printed as an ERROR (it stays at
// debug level); other standard-logger errors still are, escaped.
func TestYamuxShutdownLineIsNotAnError(t *testing.T) {
	for _, c := range []struct {
		level, line, want string
	}{
		{"warn", "[ERR] yamux: Failed to write header: io: read/write on closed pipe", ""},
		{"debug", "[ERR] yamux: Failed to write header: io: read/write on closed pipe", "[DEBUG] k.tool-x.yamux: yamux: Failed to write header"},
		{"warn", "[ERR] yamux: keepalive failed: session shutdown", "[ERROR] k.tool-x.yamux: yamux: keepalive failed"},
		{"warn", "[WARN] yamux: frame for missing stream \x1b[31m", `[WARN]  k.tool-x.yamux: yamux: frame for missing stream \x1b[31m`},
	} {
		var buf bytes.Buffer
		base := hclog.New(&hclog.LoggerOptions{Name: "k", Level: hclog.LevelFromString(c.level), Output: &buf})
		// What go-plugin's client muxer does with ClientConfig.Logger.
		std := newPluginLogger(base.Named("tool-x")).Named("yamux").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
		std.Printf("%s", c.line)
		got := buf.String()
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("level %s, %q: logged %q, want %q", c.level, c.line, got, c.want)
		}
	}
}
