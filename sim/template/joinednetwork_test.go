package template

import (
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// A service with network_mode service:x, where x has network_mode none,
// validated without a word about it: Docker runs the pair (the joiner
// gets x's namespace, loopback only; checked on Docker 20.10), and the
// job in the joiner can never reach the job socket. validate and the
// instance's adjustments now name both services and the fixes, through
// a chain of joins and a container: that names a service's
// container_name too; a template none of whose services has a network
// is refused as network_mode none everywhere is (round 14, B6).
func TestJoiningANamespaceWithoutNetworkIsNamed(t *testing.T) {
	files := tpl(`
services:
  app:
    image: busybox
  side:
    image: busybox
    network_mode: none
    container_name: side-box
  probe:
    image: busybox
    network_mode: service:side
  tail:
    image: busybox
    network_mode: service:probe
  byname:
    image: busybox
    network_mode: container:side-box
  outside:
    image: busybox
    network_mode: container:not-in-this-project
  shared:
    image: busybox
    network_mode: service:app
`, "")
	res := validateOne(t, "joined", files)
	if !res.Valid {
		t.Fatalf("validate: %+v", res)
	}
	warned := strings.Join(res.Warnings, "\n")
	for _, want := range []string{
		`services.probe.network_mode: "service:side" joins service side, which has network_mode none: Docker runs it, and probe has no network either (only loopback), so the job in it cannot reach normsim's job socket`,
		"remove network_mode: none from side, or remove network_mode from probe to give it the default network",
		`services.tail.network_mode: "service:probe" joins service probe, which joins side, which has network_mode none`,
		`services.byname.network_mode: "container:normsim-<instance>-side-box" joins service side, which has network_mode none`,
	} {
		if !strings.Contains(warned, want) {
			t.Errorf("warnings lack %q:\n%s", want, warned)
		}
	}
	for _, not := range []string{"services.outside.network_mode", "services.shared.network_mode", "services.app.network_mode"} {
		if strings.Contains(warned, not) {
			t.Errorf("warnings name %s, which has a network (or one normsim cannot judge):\n%s", not, warned)
		}
	}
	spec, err := MustLoad(t, files).Launch(input(nil))
	if err != nil {
		t.Fatal(err)
	}
	// The rename of side-box is followed: byname still joins side.
	if said := strings.Join(spec.Adjustments, "\n"); !strings.Contains(said, `services.probe.network_mode: "service:side" joins service side`) ||
		!strings.Contains(said, `services.byname.network_mode: "container:normsim-inst-1-side-box" joins service side`) {
		t.Errorf("adjustments lack the joins:\n%s", said)
	}

	// No service with a network at all: the job can reach nothing.
	only := `
services:
  side:
    image: busybox
    network_mode: none
  app:
    image: busybox
    network_mode: service:side
`
	res = validateOne(t, "nonetwork", tpl(only, ""))
	if res.Valid || len(res.Problems) != 1 ||
		!strings.Contains(res.Problems[0].Message, "no service (app, side) has a network: each has network_mode none or joins the namespace of one that has (app joins service side)") {
		t.Fatalf("validate: %+v, want the problem named", res)
	}
	withCommand := tpl(strings.Replace(only, "    network_mode: service:side\n", "    network_mode: service:side\n    x-normsim: {command: [sleep, \"30\"]}\n", 1), "")
	l := MustLoad(t, withCommand)
	_, err = l.Launch(input(nil))
	wantErr(t, err, sim.EComposeInvalid, "app joins service side")
	in := input(nil)
	in.Runtime = sim.RuntimeProcess
	if _, err := l.Launch(in); err != nil {
		t.Errorf("process runtime: %v", err)
	}
}
