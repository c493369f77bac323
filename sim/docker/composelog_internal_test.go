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
