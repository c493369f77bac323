package template

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/normsim/normsim/sim"
)

// richCompose uses most of what serviceSpec reads, so a shared project that
// leaked between launches would show.
const richCompose = `
services:
  web:
    image: nginx:${TAG}
    command: ["serve", "--port", "${PORT}"]
    environment:
      A: "1"
      RATE: ${RATE:-5}
    labels:
      tier: front
    ports:
      - "${PORT}:80"
    volumes:
      - ./data:/data:ro
    extra_hosts:
      - "db.local:10.0.0.2"
    healthcheck:
      test: ["CMD", "true"]
      interval: 5s
    depends_on: [db]
  db:
    image: postgres
`

const richParams = `
parameters:
  - name: TAG
    purpose: p
    default: "1"
  - name: RATE
    purpose: p
    default: "5"
`

// TestLaunchCacheIsInvisible: a template launched again with the same
// values gets the project compose-go loaded the first time; every spec
// must be exactly what a fresh load gives, whatever the instance, and what
// one launch's caller changes must not reach the next.
func TestLaunchCacheIsInvisible(t *testing.T) {
	files := tpl(richCompose, richParams, "allocatedPorts", `[{"param":"PORT","protocol":"tcp","preferred":7000,"service":"web"}]`)
	dir := MustWriteTemplate(t, "tpl", files)
	cached := Load(dir)
	if !cached.Valid() {
		t.Fatal(cached.Problems)
	}
	launch := func(l *Loaded, id string, params map[string]string) *sim.LaunchSpec {
		t.Helper()
		in := input(params)
		in.Instance.ID, in.Instance.Token = id, "token-"+id
		in.Instance.Params = params
		spec, err := l.Launch(in)
		if err != nil {
			t.Fatal(err)
		}
		return spec
	}
	for i, tc := range []struct {
		id     string
		params map[string]string
	}{
		{"inst-a", map[string]string{"TAG": "2", "PORT": "7001"}},
		{"inst-b", map[string]string{"TAG": "2", "PORT": "7001"}}, // same values: from the cache
		{"inst-c", map[string]string{"TAG": "3", "PORT": "7001"}},
		{"inst-d", map[string]string{"TAG": "2", "PORT": "7001", "RATE": "9"}},
		{"inst-e", map[string]string{"TAG": "2", "PORT": "7001"}},
	} {
		got := launch(cached, tc.id, tc.params)
		want := launch(Load(dir), tc.id, tc.params) // loaded again: nothing cached
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("launch %d (%s): cached spec\n%+v\nfresh spec\n%+v", i, tc.id, got, want)
		}
		// A caller changing its spec must not change the next launch's.
		for si := range got.Services {
			s := &got.Services[si]
			s.Env["A"], s.Labels["tier"] = "changed", "changed"
			s.Command = append(s.Command[:0], "changed")
			if len(s.ExtraHosts) > 0 {
				s.ExtraHosts[0] = "changed"
			}
			if s.Healthcheck != nil {
				s.Healthcheck.Test[0] = "changed"
			}
		}
	}
	if n := len(cached.projects.byEnv); n != 3 {
		t.Errorf("the cache holds %d projects, want 3 (one per distinct set of values)", n)
	}
}

// TestLaunchCacheSkipsFilesReadAtLoad: a compose file that reads other
// files while loading (env_file here) is loaded afresh every launch, so a
// changed file is seen.
func TestLaunchCacheSkipsFilesReadAtLoad(t *testing.T) {
	const compose = `
services:
  app:
    image: busybox
    env_file: app.env
`
	files := tpl(compose, "")
	files["app.env"] = "GREETING=hello\n"
	dir := MustWriteTemplate(t, "envfile", files)
	l := Load(dir)
	if !l.Valid() {
		t.Fatal(l.Problems)
	}
	spec, err := l.Launch(input(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Services[0].Env["GREETING"]; got != "hello" {
		t.Fatalf("GREETING = %q", got)
	}
	writeFiles(t, dir, map[string]string{"app.env": "GREETING=changed\n"})
	if spec, err = l.Launch(input(nil)); err != nil {
		t.Fatal(err)
	}
	if got := spec.Services[0].Env["GREETING"]; got != "changed" {
		t.Fatalf("after the env file changed GREETING = %q, want the new value", got)
	}
	if len(l.projects.byEnv) != 0 {
		t.Fatal("a project reading an env file was cached")
	}
}

// TestLaunchCacheShared: launches with the same values share one cached
// project at the same time; under -race this shows any write to it.
func TestLaunchCacheShared(t *testing.T) {
	l := MustLoad(t, tpl(richCompose, richParams, "allocatedPorts", `[{"param":"PORT","protocol":"tcp","preferred":7000,"service":"web"}]`))
	params := map[string]string{"TAG": "2", "PORT": "7001"}
	done := make(chan error)
	for i := range 8 {
		go func() {
			in := input(params)
			in.Instance = &sim.Instance{ID: "i" + strconv.Itoa(i), JobID: "j", Role: "r", Params: params}
			spec, err := l.Launch(in)
			if err == nil {
				for si := range spec.Services {
					spec.Services[si].Env["A"] = strconv.Itoa(i) // each caller owns its spec
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if n := len(l.projects.byEnv); n != 1 {
		t.Errorf("cache holds %d projects for one set of values", n)
	}
}
