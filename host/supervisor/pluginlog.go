package supervisor

import (
	"fmt"

	"github.com/fluffy-waffle/fluffy/textsafe"
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
