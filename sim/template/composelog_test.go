package template

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
)

// logCapture keeps what logrus's process-wide logger is given, after the
// hooks before it (composeLogHook among them) have fired.
type logCapture struct {
	mu      sync.Mutex
	entries []*logrus.Entry
}

func (*logCapture) Levels() []logrus.Level { return logrus.AllLevels }

func (c *logCapture) Fire(e *logrus.Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, &logrus.Entry{Message: e.Message, Data: maps.Clone(e.Data)})
	return nil
}

func captureComposeLog(t *testing.T) *logCapture {
	c := &logCapture{}
	std := logrus.StandardLogger()
	old := std.ReplaceHooks(logrus.LevelHooks{})
	hooks := logrus.LevelHooks{}
	for level, hs := range old {
		hooks[level] = slices.Clone(hs)
	}
	std.ReplaceHooks(hooks)
	std.AddHook(c) // after composeLogHook, as sim/docker's is
	t.Cleanup(func() { std.ReplaceHooks(old) })
	return c
}

// compose-go's "The "HOME" variable is not set. Defaulting to a blank
// string." lines, one for each variable an env or label file uses unset,
// were all a launch logged of them, naming no template or instance: a
// process that launches many could not tell whose. Each line now carries
// the template's name and the instance's id, and says what it said.
func TestUnsetVariableLinesNameTheTemplateAndInstance(t *testing.T) {
	files := tpl(`
services:
  app:
    image: busybox
    env_file: [app.env]
    label_file: app.lbl
`, "")
	files["app.env"] = "A=${NORMSIM_TEST_UNSET_A}/x\n"
	files["app.lbl"] = "com.example.b=${NORMSIM_TEST_UNSET_B}\n"
	l := MustLoad(t, files)
	c := captureComposeLog(t)
	if _, err := l.Launch(input(nil)); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	said := map[string]bool{}
	for _, e := range c.entries {
		if !strings.Contains(e.Message, "NORMSIM_TEST_UNSET_") {
			continue
		}
		if !strings.HasSuffix(e.Message, "variable is not set. Defaulting to a blank string.") {
			t.Errorf("line %q is not compose-go's", e.Message)
		}
		if e.Data["template"] != l.Template.Name || e.Data["instance"] != "inst-1" {
			t.Errorf("line %q has fields %v, want template %s and instance inst-1", e.Message, e.Data, l.Template.Name)
		}
		said[e.Message] = true
	}
	for _, v := range []string{"A", "B"} {
		if !said[`The "NORMSIM_TEST_UNSET_`+v+`" variable is not set. Defaulting to a blank string.`] {
			t.Errorf("no line for NORMSIM_TEST_UNSET_%s: %v", v, said)
		}
	}

	c.mu.Unlock()

	// A line of another kind, written meanwhile, is not labelled.
	labelComposeLog("tpl", "inst-2", func() { logrus.Warn("Found orphan containers") })
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.entries[len(c.entries)-1]
	if last.Message != "Found orphan containers" || len(last.Data) != 0 {
		t.Errorf("another line got %v", last.Data)
	}
}

// An included file's env_file is read while a template is validated too
// (normsim validate, and the catalog's load, which may run beside
// launches), and compose-go wrote its unset-variable lines there naming
// nothing: unlabelled, or labelled with the template and instance of a
// launch loading meanwhile. Validation's lines name the template.
func TestValidationsUnsetVariableLinesNameTheTemplate(t *testing.T) {
	files := tpl(`
include:
  - path: other.yml
    env_file: inc.env
services:
  app:
    image: busybox
`, "")
	files["other.yml"] = "services:\n  side:\n    image: busybox\n    environment:\n      X: ${Y}\n"
	files["inc.env"] = "Y=${NORMSIM_TEST_UNSET_INC}\n"
	c := captureComposeLog(t)
	l := Load(MustWriteTemplate(t, "included", files))
	if !l.Valid() {
		t.Fatalf("problems %v", l.Problems)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.entries {
		if !strings.Contains(e.Message, "NORMSIM_TEST_UNSET_INC") {
			continue
		}
		n++
		if e.Data["template"] != l.Template.Name || e.Data["instance"] != nil {
			t.Errorf("line %q has fields %v, want template %s alone", e.Message, e.Data, l.Template.Name)
		}
	}
	if n == 0 {
		t.Fatal("validation wrote no unset-variable line: nothing judged")
	}
}
