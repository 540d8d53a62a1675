package supervisor

import (
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/hashicorp/go-hclog"
)

// maxPluginLogField bounds one message or value a plugin writes to its
// stderr (go-plugin turns each line into a log entry).
const maxPluginLogField = 4096

// pluginLogger is the logger go-plugin writes a plugin's stderr lines to:
// every message and string value is the plugin's text, so it is escaped
// and bounded (textsafe.Line) before hclog writes it (hclog quotes odd
// values but writes messages raw, escape sequences included).
type pluginLogger struct{ hclog.Logger }

func newPluginLogger(l hclog.Logger) hclog.Logger { return pluginLogger{l} }

func safeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = textsafe.Line(v, maxPluginLogField)
		case []byte:
			out[i] = textsafe.Line(string(v), maxPluginLogField)
		case error:
			out[i] = textsafe.Line(v.Error(), maxPluginLogField)
		case int, int64, int32, uint, uint64, uint32, float64, float32, bool, nil:
			out[i] = v
		default:
			out[i] = textsafe.Line(fmt.Sprint(v), maxPluginLogField)
		}
	}
	return out
}

func safeMsg(m string) string { return textsafe.Line(m, maxPluginLogField) }

func (p pluginLogger) Log(level hclog.Level, msg string, args ...any) {
	p.Logger.Log(level, safeMsg(msg), safeArgs(args)...)
}
func (p pluginLogger) Trace(msg string, args ...any) { p.Logger.Trace(safeMsg(msg), safeArgs(args)...) }
func (p pluginLogger) Debug(msg string, args ...any) { p.Logger.Debug(safeMsg(msg), safeArgs(args)...) }
func (p pluginLogger) Info(msg string, args ...any)  { p.Logger.Info(safeMsg(msg), safeArgs(args)...) }
func (p pluginLogger) Warn(msg string, args ...any)  { p.Logger.Warn(safeMsg(msg), safeArgs(args)...) }
func (p pluginLogger) Error(msg string, args ...any) { p.Logger.Error(safeMsg(msg), safeArgs(args)...) }
func (p pluginLogger) With(args ...any) hclog.Logger {
	return pluginLogger{p.Logger.With(safeArgs(args)...)}
}
func (p pluginLogger) Named(name string) hclog.Logger {
	return pluginLogger{p.Logger.Named(safeMsg(name))}
}
func (p pluginLogger) ResetNamed(name string) hclog.Logger {
	return pluginLogger{p.Logger.ResetNamed(safeMsg(name))}
}

// StandardLogger and StandardWriter route go-plugin's standard-library
// loggers (its yamux session on the kernel side logs through one) through
// this logger, so their lines are bounded and escaped like every other and
// so shutdownNoise can apply.
func (p pluginLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(p.StandardWriter(opts), "", 0)
}

func (p pluginLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	infer := opts != nil && (opts.InferLevels || opts.InferLevelsWithTimestamp)
	force := hclog.NoLevel
	if opts != nil {
		force = opts.ForceLevel
	}
	return stdWriter{p: p, infer: infer, force: force}
}

type stdWriter struct {
	p     pluginLogger
	infer bool
	force hclog.Level
}

func (w stdWriter) Write(b []byte) (int, error) {
	line := strings.TrimRight(string(b), "\r\n")
	level := hclog.Info
	if w.force != hclog.NoLevel {
		level = w.force
	}
	if w.infer {
		for _, x := range []struct {
			prefix string
			level  hclog.Level
		}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info}, {"[WARN]", hclog.Warn}, {"[ERROR]", hclog.Error}, {"[ERR]", hclog.Error}} {
			if rest, ok := strings.CutPrefix(line, x.prefix); ok {
				level, line = x.level, strings.TrimSpace(rest)
				break
			}
		}
	}
	if level >= hclog.Warn && shutdownNoise(line) {
		level = hclog.Debug
	}
	w.p.Log(level, line)
	return len(b), nil
}

// shutdownNoise reports a line go-plugin's yamux session logs as an error
// when the kernel stops a plugin it no longer needs: Kill closes the
// connection while yamux still has a frame to send (a window update or the
// stream's close), and yamux logs "[ERR] yamux: Failed to write header"
// after every ordinary call. It is not a failure anyone can act on: a
// connection that breaks during a call fails that call, and the supervisor
// reports it with a structured error. So it is kept at debug level, where
// it is still there for whoever investigates.
func shutdownNoise(line string) bool {
	return strings.HasPrefix(line, "yamux: Failed to write header")
}
