package template

import (
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// Issue 34 round 14, B1: a depends_on entry with required: false on a
// service behind a profile validated, and every launch was refused (the
// Docker runtime: "depends on db, which is no service of the file"; the
// process runtime: "not in the launch spec"). docker compose up skips it;
// so does a launch now, on both runtimes, and validate says so.
func TestOptionalDependencyOnAProfiledServiceIsSkipped(t *testing.T) {
	files := tpl(`
services:
  app:
    image: busybox
    x-normsim: {command: [sleep, "30"]}
    depends_on:
      db:
        condition: service_started
        required: false
      cache:
        condition: service_started
  cache:
    image: busybox
  db:
    image: busybox
    profiles: [extra]
`, "")
	res := validateOne(t, "optional", files)
	if !res.Valid {
		t.Fatalf("validate: %+v", res)
	}
	warned := strings.Join(res.Warnings, "\n")
	if !strings.Contains(warned, "services.app.depends_on.db: db runs only with profile extra") || !strings.Contains(warned, "app starts without it") {
		t.Errorf("warnings %q, want the skipped dependency named", res.Warnings)
	}

	l := MustLoad(t, files)
	for _, rt := range []string{sim.RuntimeDocker, sim.RuntimeProcess} {
		in := input(nil)
		in.Runtime = rt
		spec, err := l.Launch(in)
		if err != nil {
			t.Fatalf("%s: launch: %v", rt, err)
		}
		deps := service(t, spec, "app").DependsOn
		if len(deps) != 1 || deps[0].Service != "cache" {
			t.Errorf("%s: app depends on %+v, want cache only", rt, deps)
		}
		if rt == sim.RuntimeDocker {
			p := reload(t, spec)
			if _, ok := p.Services["app"].DependsOn["db"]; ok {
				t.Errorf("the compose project still makes app depend on db: %+v", p.Services["app"].DependsOn)
			}
		}
	}
	// A second launch (the cached project) is the same.
	spec, err := l.Launch(input(nil))
	if err != nil {
		t.Fatal(err)
	}
	if deps := service(t, spec, "app").DependsOn; len(deps) != 1 {
		t.Errorf("second launch: app depends on %+v", deps)
	}
}

// Issue 34 round 14, B1: the required form is refused at validate, and
// the message names the key and both fixes, not compose-go's bare
// "depends on undefined service".
func TestRequiredDependencyOnAProfiledServiceNamesTheFix(t *testing.T) {
	res := validateOne(t, "required", tpl(`
services:
  app:
    image: busybox
    depends_on: [db]
  db:
    image: busybox
    profiles: [extra, more]
`, ""))
	if res.Valid || len(res.Problems) != 1 {
		t.Fatalf("validate: %+v", res)
	}
	msg := res.Problems[0].Message
	for _, want := range []string{"services.app.depends_on.db", "profile extra, more", "required: false", "drop db's profiles"} {
		if !strings.Contains(msg, want) {
			t.Errorf("problem %q does not say %q", msg, want)
		}
	}
}

// Issue 34 round 14, B4: a service with network_mode host and ports: was
// listed as publishing them (normsim ps, the API's published), where
// Docker discards published ports on the host's network and publishes
// nothing. Nothing is listed now, and validate says why and what to do.
func TestHostNetworkPublishesNothing(t *testing.T) {
	files := tpl(`
services:
  app:
    image: busybox
    network_mode: host
    ports: ["127.0.0.1:19555:80"]
  web:
    image: busybox
    ports: ["8080:80"]
`, "", "allocatedPorts", `[{"param":"PORT","protocol":"tcp","preferred":7000,"service":"app"}]`)
	res := validateOne(t, "hostports", files)
	if !res.Valid {
		t.Fatalf("validate: %+v", res)
	}
	warned := strings.Join(res.Warnings, "\n")
	for _, want := range []string{
		"services.app.ports: not published: with network_mode host Docker discards published ports",
		"allocatedPorts[0] (PORT) names service app, which has network_mode host",
	} {
		if !strings.Contains(warned, want) {
			t.Errorf("warnings %q lack %q", res.Warnings, want)
		}
	}
	if strings.Contains(warned, "services.web.ports") {
		t.Errorf("warnings %q name web, which publishes", res.Warnings)
	}

	l := MustLoad(t, files)
	spec, err := l.Launch(input(map[string]string{"PORT": "auto"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range spec.PublishedPorts() {
		if p.Service == "app" {
			t.Errorf("app lists %+v as published; Docker publishes nothing for it", p)
		}
	}
	if got := spec.PublishedPorts(); len(got) != 1 || got[0].Service != "web" || got[0].HostPort != 8080 {
		t.Errorf("published %+v, want web's 8080 only", got)
	}
	if !strings.Contains(strings.Join(spec.Adjustments, "\n"), "services.app.ports: not published") {
		t.Errorf("adjustments %q do not say app's ports are not published", spec.Adjustments)
	}
	if spec.AllocatedPorts["PORT"].Port != 7000 {
		t.Errorf("allocated %+v: the job is still told its port", spec.AllocatedPorts)
	}
}

// Issue 34 round 14, B6: network_mode none validated, and every launch on
// Docker then ended "exited with code 1" with no reason: the job can never
// reach the job socket. A template that can run only on Docker is
// refused at validate; one with an x-normsim command is warned of, and a
// Docker launch on a node with a job socket is refused naming the key.
func TestNetworkModeNoneIsNamed(t *testing.T) {
	res := validateOne(t, "dockeronly", tpl(`
services:
  app:
    image: busybox
    network_mode: none
`, ""))
	if res.Valid || len(res.Problems) != 1 ||
		!strings.Contains(res.Problems[0].Message, "every service (app) has network_mode none, so no job can reach normsim's job socket") ||
		!strings.Contains(res.Problems[0].Message, "remove network_mode: none") {
		t.Fatalf("validate: %+v, want the problem named", res)
	}

	// A sidecar without a network beside a job with one: a warning only.
	res = validateOne(t, "sidecar", tpl(`
services:
  app:
    image: busybox
  side:
    image: busybox
    network_mode: none
`, ""))
	if !res.Valid || !strings.Contains(strings.Join(res.Warnings, "\n"), `services.side.network_mode: "none" gives the container no network`) {
		t.Fatalf("validate: %+v, want a warning naming side's network_mode", res)
	}

	// It can run as a host process, where network_mode means nothing.
	files := tpl(`
services:
  app:
    image: busybox
    network_mode: none
    x-normsim: {command: [sleep, "30"]}
`, "")
	res = validateOne(t, "both", files)
	if !res.Valid || !strings.Contains(strings.Join(res.Warnings, "\n"), `services.app.network_mode: "none"`) {
		t.Fatalf("validate: %+v, want valid with a warning", res)
	}
	l := MustLoad(t, files)
	_, err := l.Launch(input(nil))
	wantErr(t, err, sim.EComposeInvalid, "every service (app) has network_mode none")
	in := input(nil)
	in.Runtime = sim.RuntimeProcess
	if _, err := l.Launch(in); err != nil {
		t.Errorf("process runtime: %v", err)
	}
	in = input(nil)
	in.Node.SocketPort, in.Node.SocketURL = 0, ""
	if _, err := l.Launch(in); err != nil {
		t.Errorf("docker, a node without a job socket: %v", err)
	}
}

// Issue 34 round 14, B5: pull_policy: always validated, and a launch then
// tried the registry (a DNS error naming neither the key nor the fix).
// normsim never pulls: validate and the instance's adjustments say the
// policy is not applied and what to do (the Docker runtime runs the
// engine's image; sim/docker tests that).
func TestPullPolicyThatWouldPullIsNamed(t *testing.T) {
	files := tpl(`
services:
  app:
    image: busybox
    pull_policy: always
  daily:
    image: busybox
    pull_policy: daily
  kept:
    image: busybox
    pull_policy: missing
  never:
    image: busybox
    pull_policy: never
`, "")
	res := validateOne(t, "pull", files)
	if !res.Valid {
		t.Fatalf("validate: %+v", res)
	}
	warned := strings.Join(res.Warnings, "\n")
	for _, want := range []string{`services.app.pull_policy: "always" is not applied: normsim never pulls`, `services.daily.pull_policy: "daily"`, "docker pull (or build) busybox before launching"} {
		if !strings.Contains(warned, want) {
			t.Errorf("warnings %q lack %q", res.Warnings, want)
		}
	}
	if strings.Contains(warned, "services.kept") || strings.Contains(warned, "services.never") {
		t.Errorf("warnings %q name a policy that never pulls an image the engine has", res.Warnings)
	}
	spec, err := MustLoad(t, files).Launch(input(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(spec.Adjustments, "\n"), `services.app.pull_policy: "always" is not applied`) {
		t.Errorf("adjustments %q", spec.Adjustments)
	}
}
