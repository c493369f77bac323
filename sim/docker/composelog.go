package docker

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/sirupsen/logrus"
)

// RouteComposeLogs sends what the Compose SDK and compose-go log (through
// logrus's process-wide logger: orphan containers, nothing to remove, ...)
// to log, so it honours --log-format instead of going to stderr as text.
// logrus has one logger per process: the last runtime made wins, which in
// normsim up is the only one. Other hooks stay, before this one, so that
// the fields they add are written (sim/template names the template and
// instance of compose-go's unset-variable lines).
func RouteComposeLogs(log *slog.Logger) {
	std := logrus.StandardLogger()
	std.SetOutput(io.Discard)
	kept := logrus.LevelHooks{}
	for level, hooks := range std.ReplaceHooks(logrus.LevelHooks{}) {
		for _, h := range hooks {
			if _, ours := h.(slogHook); !ours {
				kept[level] = append(kept[level], h)
			}
		}
	}
	std.ReplaceHooks(kept)
	std.AddHook(slogHook{log.With("component", "compose")})
}

type slogHook struct{ log *slog.Logger }

func (slogHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h slogHook) Fire(e *logrus.Entry) error {
	level := slog.LevelDebug
	switch {
	case e.Level <= logrus.ErrorLevel:
		level = slog.LevelError
	case e.Level == logrus.WarnLevel:
		level = slog.LevelWarn
	}
	attrs := make([]any, 0, 2*len(e.Data))
	for k, v := range e.Data {
		attrs = append(attrs, k, v)
	}
	h.log.Log(context.Background(), level, strings.TrimSpace(e.Message), attrs...)
	return nil
}
