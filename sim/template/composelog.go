package template

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
)

// compose-go says of each variable an env or label file uses that is not
// set, as it reads the file at launch, "The "HOME" variable is not set.
// Defaulting to a blank string." on logrus's process-wide logger, with
// nothing else: no instance, no template, and a process that launches
// many could not tell whose it was. The line cannot be kept from being
// written (compose-go's dotenv substitutes with logging, and answering
// every name would turn ${X-default} into ""), so it is labelled: while
// a launch loads a template that reads files, its template and instance
// are the fields of each such line; while validation does (an included
// file's env_file is read then too), its template is.
//
// logrus is one logger per process, so the labelled loads take turns
// (composeLog.mu): only a load that reads files (readsFiles) can write
// the line, and only for a moment each. A line of any other kind is not
// labelled, since another goroutine (the Compose SDK's) may write it
// meanwhile.
var composeLog struct {
	mu     sync.Mutex
	fields atomic.Pointer[logrus.Fields] // nil outside a labelled load
}

// unsetVariableLine ends compose-go's line (template.go in its template
// package).
const unsetVariableLine = "variable is not set. Defaulting to a blank string."

func init() { logrus.AddHook(composeLogHook{}) }

// composeLogHook adds the labelled load's fields to compose-go's
// unset-variable line. It must fire before the hook that writes the
// entry elsewhere (sim/docker's RouteComposeLogs keeps it first).
type composeLogHook struct{}

func (composeLogHook) Levels() []logrus.Level { return []logrus.Level{logrus.WarnLevel} }

func (composeLogHook) Fire(e *logrus.Entry) error {
	f := composeLog.fields.Load()
	if f == nil || !strings.HasSuffix(e.Message, unsetVariableLine) {
		return nil
	}
	for k, v := range *f {
		if _, set := e.Data[k]; !set {
			e.Data[k] = v // e.Data is this entry's own copy (logrus clones it)
		}
	}
	return nil
}

// labelled runs load, a load of l's compose file for instance ("" for
// validation's), with compose-go's unset-variable lines labelled: only a
// load that reads files (an env or label file, an included file's
// env_file) can write one, so only such a load takes its turn.
func (l *Loaded) labelled(instance string, load func()) {
	if readsFiles(l.compose) {
		labelComposeLog(l.Template.Name, instance, load)
	} else {
		load()
	}
}

// labelComposeLog runs load with compose-go's unset-variable lines
// labelled with the template's name and, where there is one, the
// instance's id.
func labelComposeLog(template, instance string, load func()) {
	fields := logrus.Fields{"template": template}
	if instance != "" {
		fields["instance"] = instance
	}
	composeLog.mu.Lock()
	defer composeLog.mu.Unlock()
	composeLog.fields.Store(&fields)
	defer composeLog.fields.Store(nil)
	load()
}
