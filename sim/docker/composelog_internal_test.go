package docker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

func TestComposeLogsGoToTheLogger(t *testing.T) {
	var buf bytes.Buffer
	RouteComposeLogs(slog.New(slog.NewJSONHandler(&buf, nil)))
	logrus.WithField("project", "p1").Warn("Found orphan containers")
	got := buf.String()
	for _, want := range []string{`"level":"WARN"`, `"msg":"Found orphan containers"`, `"component":"compose"`, `"project":"p1"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %s", got, want)
		}
	}
}

// fieldHook adds a field to each entry, as sim/template's hook adds the
// template and instance to compose-go's unset-variable lines.
type fieldHook struct{}

func (fieldHook) Levels() []logrus.Level { return logrus.AllLevels }

func (fieldHook) Fire(e *logrus.Entry) error {
	e.Data["template"] = "tpl"
	return nil
}

// RouteComposeLogs removed every hook it found, so sim/template's, which
// names the template and instance of compose-go's unset-variable lines,
// was gone once a Docker runtime was made. It keeps other hooks, firing
// before its own so that their fields are written, and a second call
// still writes each line once.
func TestComposeLogsKeepOtherHooksFields(t *testing.T) {
	std := logrus.StandardLogger()
	old := std.ReplaceHooks(logrus.LevelHooks{})
	t.Cleanup(func() { std.ReplaceHooks(old) })
	std.AddHook(fieldHook{})
	var buf bytes.Buffer
	RouteComposeLogs(slog.New(slog.NewJSONHandler(&buf, nil)))
	RouteComposeLogs(slog.New(slog.NewJSONHandler(&buf, nil)))
	logrus.Warn(`The "HOME" variable is not set. Defaulting to a blank string.`)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"template":"tpl"`) || !strings.Contains(lines[0], `The \"HOME\" variable is not set`) {
		t.Errorf("log %q, want the line once with the other hook's field", lines)
	}
}
