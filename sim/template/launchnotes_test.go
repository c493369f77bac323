package template

import (
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// validate said that app starts without db (required: false, db behind a
// profile); a launch of the same template dropped db just as silently as
// it dropped the note. The instance's adjustments (the launch response,
// GET /api/v1/instances/{id}, the instance page) say it now, on every
// runtime, and a launch from the cached project says it too.
func TestSkippedDependencyIsSaidOnTheInstance(t *testing.T) {
	files := tpl(`
services:
  app:
    image: busybox
    x-normsim: {command: [sleep, "30"]}
    depends_on:
      db:
        condition: service_started
        required: false
  db:
    image: busybox
    profiles: [extra]
`, "")
	res := validateOne(t, "optional", files)
	var note string
	for _, w := range res.Warnings {
		if strings.HasPrefix(w, "services.app.depends_on.db:") {
			note = w
		}
	}
	if note == "" {
		t.Fatalf("validate warnings %q lack the skipped dependency", res.Warnings)
	}
	l := MustLoad(t, files)
	for i, rt := range []string{sim.RuntimeDocker, sim.RuntimeProcess, sim.RuntimeDocker} {
		in := input(nil)
		in.Runtime = rt
		spec, err := l.Launch(in)
		if err != nil {
			t.Fatalf("launch %d (%s): %v", i, rt, err)
		}
		n := 0
		for _, a := range spec.Adjustments {
			if a == note {
				n++
			}
		}
		if n != 1 {
			t.Errorf("launch %d (%s): adjustments %q, want validate's note once: %q", i, rt, spec.Adjustments, note)
		}
	}
}
