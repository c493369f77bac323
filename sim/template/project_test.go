package template

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/normsim/normsim/sim"
)

// reload loads a spec's compose project as the Docker runtime does.
func reload(t *testing.T, spec *sim.LaunchSpec) *types.Project {
	t.Helper()
	if spec.Compose == nil {
		t.Fatal("spec has no compose project")
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  spec.Compose.WorkingDir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(spec.Compose.WorkingDir, "compose.yml"), Content: spec.Compose.YAML}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) {
		o.SetProjectName(spec.Project, true)
		o.SkipInterpolation = true
		o.SkipResolveEnvironment = true
	})
	if err != nil {
		t.Fatalf("reload compose project: %v\n%s", err, spec.Compose.YAML)
	}
	return p
}

func TestLaunchComposeProject(t *testing.T) {
	const compose = `
x-common: &common
  image: busybox
  environment:
    LITERAL: "a$$b"
    FROM_PARAM: ${RATE}
services:
  engine:
    <<: *common
    container_name: media-engine
    shm_size: 1gb
    networks: [media, control]
    ports: ["${PORT}:9000"]
  sidecar:
    image: busybox
    network_mode: service:engine
  host:
    image: busybox
    network_mode: host
  extra:
    image: busybox
    profiles: [debug]
networks:
  media:
  control:
`
	l := MustLoad(t, tpl(compose, "parameters:\n  - name: RATE\n    purpose: rate\n    default: \"5\"\n",
		"allocatedPorts", `[{"param":"PORT","protocol":"tcp","preferred":7000,"service":"engine"}]`))
	if !l.Valid() {
		t.Fatalf("invalid: %v", l.Problems)
	}
	in := input(map[string]string{"PORT": "7001"})
	spec, err := l.Launch(in)
	if err != nil {
		t.Fatal(err)
	}
	p := reload(t, spec)
	if p.Name != "normsim-inst-1" || spec.Project != p.Name {
		t.Fatalf("project %q, spec project %q", p.Name, spec.Project)
	}
	if _, ok := p.Services["extra"]; ok {
		t.Error("a service of an inactive profile is in the project")
	}
	engine := p.Services["engine"]
	if engine.ContainerName != "normsim-inst-1-media-engine" {
		t.Errorf("container_name %q, want it made unique", engine.ContainerName)
	}
	for _, n := range []string{"media", "control"} {
		if c := engine.Networks[n]; c == nil || !slices.Contains(c.Aliases, "media-engine") {
			t.Errorf("network %s: %+v, want alias media-engine", n, c)
		}
		if got := p.Networks[n].Name; got != "normsim-inst-1_"+n {
			t.Errorf("network %s is named %q", n, got)
		}
	}
	if engine.ShmSize != 1<<30 {
		t.Errorf("shm_size %d dropped", engine.ShmSize)
	}
	if got := *engine.Environment["LITERAL"]; got != "a$b" {
		t.Errorf("LITERAL = %q, want a$b (interpolated once, not twice)", got)
	}
	if got := *engine.Environment["FROM_PARAM"]; got != "5" {
		t.Errorf("FROM_PARAM = %q", got)
	}
	if got := *engine.Environment[EnvWorkerToken]; got != "secret-token" {
		t.Errorf("token = %q", got)
	}
	if engine.Labels[sim.LabelInstance] != "inst-1" || engine.Labels[sim.LabelService] != "engine" {
		t.Errorf("labels %v", engine.Labels)
	}
	if !slices.ContainsFunc(engine.Ports, func(pc types.ServicePortConfig) bool { return pc.Published == "7001" && pc.Target == 9000 }) {
		t.Errorf("ports %+v, want 7001:9000", engine.Ports)
	}
	if got := engine.ExtraHosts[ContainerHost]; !slices.Equal(got, []string{"host-gateway"}) {
		t.Errorf("engine extra_hosts %v", engine.ExtraHosts)
	}
	if got := p.Services["host"].ExtraHosts[ContainerHost]; !slices.Equal(got, []string{"host-gateway"}) {
		t.Errorf("network_mode host: extra_hosts %v, want the gateway too", p.Services["host"].ExtraHosts)
	}
	side := p.Services["sidecar"]
	if len(side.ExtraHosts) != 0 || len(service(t, spec, "sidecar").ExtraHosts) != 0 {
		t.Errorf("network_mode service:engine got extra_hosts %v", side.ExtraHosts)
	}
	if len(spec.Adjustments) != 2 {
		t.Fatalf("adjustments %q, want the container_name and the sidecar's extra_hosts", spec.Adjustments)
	}
	if !strings.Contains(spec.Adjustments[0], `"media-engine" runs as "normsim-inst-1-media-engine"`) ||
		!strings.Contains(spec.Adjustments[1], "services.sidecar: no extra_hosts") {
		t.Errorf("adjustments %q", spec.Adjustments)
	}

	// The process runtime gets the adjustments but no project to carry.
	in.Runtime = sim.RuntimeProcess
	spec, err = l.Launch(in)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Compose != nil || len(spec.Adjustments) != 2 {
		t.Errorf("process runtime: compose %v, adjustments %q", spec.Compose != nil, spec.Adjustments)
	}
}

func TestValidateWarnsAdjustments(t *testing.T) {
	dir := MustWriteTemplate(t, "named", tpl(`
services:
  app:
    image: busybox
    container_name: fixed
`, ""))
	res, err := ValidatePath(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || !res[0].Valid || len(res[0].Warnings) != 1 || !strings.Contains(res[0].Warnings[0], "services.app.container_name") {
		t.Fatalf("result %+v, want valid with one container_name warning", res)
	}
}

// TestValidateWarnsWhatInterpolatesEmpty (issue 34 round 7): a compose
// file using ${FROM_DOTENV}, set in the template's .env, launched with it
// empty and nothing said; docker compose up would have read .env (and
// warns of a variable it cannot set). Validation now says both.
func TestValidateWarnsWhatInterpolatesEmpty(t *testing.T) {
	dir := MustWriteTemplate(t, "dotenv", tpl(`
services:
  app:
    image: busybox
    environment:
      A: ${FROM_DOTENV}
      B: ${WITH_DEFAULT:-b}
      C: ${RATE}
`, `parameters:
  - name: RATE
    purpose: how fast
    default: "10"
`))
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("FROM_DOTENV=x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := ValidatePath(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || !res[0].Valid || len(res[0].Warnings) != 2 ||
		!strings.Contains(res[0].Warnings[0], "${FROM_DOTENV} is no parameter or allocated port and has no default") ||
		!strings.Contains(res[0].Warnings[1], ".env: not read") {
		t.Fatalf("result %+v, want valid with a warning for FROM_DOTENV and one for .env", res)
	}
}

// TestEnvFileVariablesNothingSets (issue 34, round 11): an env file
// holding A=${HOME}/x validated without a word, and each launch set A to
// "/x" with only compose-go's "The HOME variable is not set" in normsim's
// own log, naming no instance. Validation warns of such a variable, and
// the launch says it on the instance (its adjustments). A variable the
// launch sets, the file sets above, the service's environment sets, or
// the file gives a default or requires, is not one; nor is a raw file.
func TestEnvFileVariablesNothingSets(t *testing.T) {
	files := tpl(`
services:
  app:
    image: busybox
    environment:
      FROM_SERVICE: s
    env_file:
      - app.env
      - {path: raw.env, format: raw}
`, `parameters:
  - name: RATE
    purpose: how fast
    default: "10"
`)
	files["app.env"] = "A=${HOME}/x\nB=${RATE}\nC=${FROM_SERVICE}\nD=${WITH_DEFAULT:-d}\nE=${EMPTY_DEFAULT-}\nG=$A\nH=$UNSET_TOO\n"
	files["raw.env"] = "R=${NOT_INTERPOLATED}\n"
	dir := MustWriteTemplate(t, "envfilevars", files)
	res, err := ValidatePath(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	for _, w := range res[0].Warnings {
		if strings.Contains(w, "env_file") {
			warned = append(warned, w)
		}
	}
	if len(warned) != 2 ||
		!strings.Contains(warned[0], "compose.yml: services.app.env_file[0] (app.env): ${HOME} is no parameter or allocated port, nor set in the service's environment, and has no default, so it is empty in every launch") ||
		!strings.Contains(warned[1], "(app.env): ${UNSET_TOO}") {
		t.Fatalf("env file warnings %q, want HOME's and UNSET_TOO's", warned)
	}

	l := Load(dir)
	spec, err := l.Launch(input(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Services[0].Env["A"]; got != "/x" {
		t.Errorf("A = %q, want /x (HOME is empty, as compose-go reads it)", got)
	}
	if got := spec.Services[0].Env["R"]; got != "${NOT_INTERPOLATED}" {
		t.Errorf("R = %q from a raw env file, want it as written (docker compose's format: raw)", got)
	}
	var said []string
	for _, a := range spec.Adjustments {
		if strings.Contains(a, "env_file") {
			said = append(said, a)
		}
	}
	if len(said) != 2 || !strings.HasPrefix(said[0], "services.app.env_file[0] (app.env): ${HOME} is not set, so it is empty in the service's environment") {
		t.Fatalf("launch adjustments %q, want HOME and UNSET_TOO said unset", said)
	}

	// A label file's variables come only from the labels above them,
	// under docker compose too: a parameter there is empty, and said so.
	writeFiles(t, dir, map[string]string{
		"compose.yml": strings.Replace(files["compose.yml"], "    env_file:", "    label_file: app.lbl\n    env_file:", 1),
		"app.lbl":     "com.example.rate=${RATE}\nFIRST=1\nAGAIN=${FIRST}\n",
	})
	if res, err = ValidatePath(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	if n := len(res[0].Warnings); !res[0].Valid || !slices.ContainsFunc(res[0].Warnings, func(w string) bool {
		return strings.Contains(w, "services.app.label_file[0] (app.lbl): ${RATE} is empty in every launch: compose reads a label file's variables only from the labels above it")
	}) || slices.ContainsFunc(res[0].Warnings, func(w string) bool { return strings.Contains(w, "FIRST") }) {
		t.Fatalf("%d warnings %q (problems %v), want RATE's in the label file said empty, and no other label's", n, res[0].Warnings, res[0].Problems)
	}
	writeFiles(t, dir, map[string]string{"compose.yml": files["compose.yml"]})

	// A format docker compose does not know either fails every launch.
	writeFiles(t, dir, map[string]string{"compose.yml": strings.Replace(files["compose.yml"], "format: raw", "format: yaml", 1)})
	if res, err = ValidatePath(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	if res[0].Valid || !strings.Contains(res[0].Problems[0].String(), `services.app.env_file[1]: raw.env: unsupported env_file format "yaml"`) {
		t.Fatalf("with format: yaml: %+v, want invalid naming the format", res[0])
	}
	writeFiles(t, dir, map[string]string{"compose.yml": files["compose.yml"]})

	// A variable the file requires that nothing sets fails every launch:
	// validation says so, as compose-go does at launch.
	writeFiles(t, dir, map[string]string{"app.env": "F=${NEEDED:?say it}\n"})
	res, err = ValidatePath(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Valid || len(res[0].Problems) != 1 || !strings.Contains(res[0].Problems[0].String(), "services.app.env_file[0]: app.env: ") || !strings.Contains(res[0].Problems[0].String(), "NEEDED") {
		t.Fatalf("with ${NEEDED:?} in the env file: %+v, want invalid naming the file and NEEDED", res[0])
	}
	if _, err := Load(dir).Launch(input(nil)); err == nil || !strings.Contains(err.Error(), "NEEDED") {
		t.Fatalf("launch: %v, want it refused naming NEEDED", err)
	}
}

// TestValidateWarnsOfABuild (issue 34 round 7): a service with build: and
// no image validated "ok" and was refused at launch; one with both
// launched IMAGE_MISSING without a word about its build context.
func TestValidateWarnsOfABuild(t *testing.T) {
	dir := MustWriteTemplate(t, "builds", tpl(`
services:
  app:
    build: ./ctx
  named:
    build: ./ctx
    image: mine:1
    x-normsim:
      command: ["sleep", "1"]
`, ""))
	res, err := ValidatePath(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || len(res[0].Warnings) != 2 ||
		!strings.Contains(res[0].Warnings[0], "services.app.build: normsim builds no image (docker compose up would): on Docker it is refused (no image to run); without an x-normsim command it cannot run as a process either") ||
		!strings.Contains(res[0].Warnings[1], "services.named.build: normsim builds no image (docker compose up would): on Docker the image mine:1 must be in the engine already (in the template directory: docker build -t mine:1 ./ctx)") {
		t.Fatalf("result %+v", res)
	}
}

// TestParameterRulesHoldForTheirDefaults (issue 34, round 12): validate
// said ok for defaults that break their parameter's own rules, and every
// launch that did not give the value was refused; an enum listing a
// blank or a value twice, and an int whose min and max hold no whole
// number, were as unusable. A number given with blanks reached the job
// with them.
func TestParameterRulesHoldForTheirDefaults(t *testing.T) {
	compose := "services:\n  app:\n    image: busybox\n    environment:\n      V: ${V}\n"
	for name, c := range map[string]struct{ param, want string }{
		"over max":              {"type: int\n    max: 10\n    default: \"5000\"", "parameters[0].default: must be at most 10; got \"5000\", so every launch that does not give V is refused"},
		"not in the enum":       {"type: enum\n    values: [a, b]\n    default: c", "parameters[0].default: must be one of a, b; got \"c\""},
		"not whole":             {"type: int\n    default: \"1.5\"", "must be an int (a whole number); got \"1.5\""},
		"not a boolean":         {"type: boolean\n    default: \"yes\"", "must be true or false; got \"yes\""},
		"infinite":              {"type: number\n    default: \"1e400\"", "must be a finite number; got \"1e400\""},
		"hex":                   {"type: int\n    default: \"0x5\"", "must be an int; got \"0x5\""},
		"a blank enum":          {"type: enum\n    values: [\"\", a]", "parameters[0].values[0]: is blank"},
		"an enum twice":         {"type: enum\n    values: [a, b, a]", "parameters[0].values[2]: \"a\" is listed already, at values[0]"},
		"no whole number":       {"type: int\n    min: 0.5\n    max: 0.7", "no whole number lies between min (0.5) and max (0.7)"},
		"fine":                  {"type: int\n    min: 1\n    max: 10\n    default: \" 5 \"", ""},
		"empty":                 {"type: int\n    default: \"\"", "parameters[0].default: must be an int; got \"\", so every launch that does not give V is refused"},
		"fine, an empty string": {"type: string\n    default: \"\"", ""},
		"fine, a port":          {"type: int\n    default: auto", ""},
	} {
		t.Run(name, func(t *testing.T) {
			kv := []string{}
			if name == "fine, a port" {
				kv = []string{"allocatedPorts", `[{"param":"V","protocol":"tcp","preferred":7000}]`}
			}
			dir := MustWriteTemplate(t, "defaults", tpl(compose, "parameters:\n  - name: V\n    purpose: p\n    "+c.param+"\n", kv...))
			res, err := ValidatePath(t.Context(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if !res[0].Valid {
					t.Fatalf("problems %v, want valid", res[0].Problems)
				}
				return
			}
			if res[0].Valid || len(res[0].Problems) != 1 || !strings.Contains(res[0].Problems[0].String(), c.want) {
				t.Fatalf("problems %v, want one saying %q", res[0].Problems, c.want)
			}
		})
	}
	l := MustLoad(t, tpl(compose, "parameters:\n  - name: V\n    purpose: p\n    type: int\n"))
	spec, err := l.Launch(input(map[string]string{"V": " 7 "}))
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Services[0].Env["V"]; got != "7" {
		t.Errorf("V given as \" 7 \" reached the job as %q, want 7", got)
	}
}

// TestSharedNetworkRefusesWhatDockerRefuses (round 12): a service with
// network_mode service:engine and its own extra_hosts validated ok, and
// every launch then failed with the engine's "conflicting options: custom
// host-to-IP mapping and the network mode", naming no key. Validation now
// refuses each key Docker 20.10 refuses on such a container, naming it.
func TestSharedNetworkRefusesWhatDockerRefuses(t *testing.T) {
	for key, yaml := range map[string]string{
		"extra_hosts": "extra_hosts: ['db:10.0.0.1']",
		"ports":       "ports: ['8080:80']",
		"expose":      "expose: ['80']",
		"hostname":    "hostname: side",
		"dns":         "dns: 1.1.1.1",
	} {
		dir := MustWriteTemplate(t, "shared", tpl(`
services:
  engine:
    image: busybox
  side:
    image: busybox
    network_mode: service:engine
    `+yaml+`
`, ""))
		res, err := ValidatePath(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || res[0].Valid || !strings.Contains(fmt.Sprint(res[0].Problems), "services.side."+key+": Docker refuses it with network_mode") {
			t.Errorf("%s beside network_mode service:engine: %+v; want a problem naming services.side.%s", key, res, key)
		}
	}
	// The same keys on the service that owns the network are fine.
	dir := MustWriteTemplate(t, "owner", tpl(`
services:
  engine:
    image: busybox
    extra_hosts: ['db:10.0.0.1']
    hostname: engine
  side:
    image: busybox
    network_mode: service:engine
`, ""))
	res, err := ValidatePath(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || !res[0].Valid {
		t.Errorf("extra hosts on the network's owner: %+v; want valid", res)
	}
}

// round 13, B10: `stop_signal: SIGBOGUS` validated ok, and every launch
// failed at create with the engine's 422 "Invalid signal: SIGBOGUS".
// What the engine takes is what moby's ParseSignal takes on Linux.
func TestStopSignalJudgedAtValidate(t *testing.T) {
	for sig, ok := range map[string]bool{
		"SIGTERM": true, "sigint": true, "TERM": true, "9": true, "SIGRTMIN+3": true, "RTMAX-2": true, "SIGRTMAX": true, "64": true,
		"SIGBOGUS": false, "0": false, "65": false, "-1": false, "SIGRTMIN+16": false, "SIGSIGTERM": false, " SIGTERM": false, "RTMAX-15": false,
	} {
		t.Run(sig, func(t *testing.T) {
			compose := "services:\n  app:\n    image: busybox\n    stop_signal: \"" + sig + "\"\n"
			l := Load(MustWriteTemplate(t, "sig", tpl(compose, "")))
			if ok {
				if !l.Valid() {
					t.Fatalf("problems %v, want valid", l.Problems)
				}
				return
			}
			want := "services.app.stop_signal: " + strconv.Quote(sig) + " is no signal the engine knows"
			if l.Valid() || len(l.Problems) != 1 || l.Problems[0].Code != sim.EComposeInvalid || !strings.Contains(l.Problems[0].Message, want) {
				t.Fatalf("problems %v, want COMPOSE_INVALID saying %q", l.Problems, want)
			}
		})
	}
}

// round 13, B6: `deploy.replicas: 0` on every service validated ok, and an
// instance showed running with no container running, forever; a template
// whose services all sit behind profiles was already refused.
func TestEveryServiceScaledToZero(t *testing.T) {
	for name, c := range map[string]struct {
		compose string
		valid   bool
	}{
		"replicas 0":                 {"services:\n  a:\n    image: busybox\n    deploy:\n      replicas: 0\n  b:\n    image: busybox\n    deploy:\n      replicas: 0\n", false},
		"scale 0":                    {"services:\n  a:\n    image: busybox\n    scale: 0\n", false},
		"one still runs":             {"services:\n  a:\n    image: busybox\n    deploy:\n      replicas: 0\n  b:\n    image: busybox\n", true},
		"only a profiled one is not": {"services:\n  a:\n    image: busybox\n    deploy:\n      replicas: 0\n  b:\n    image: busybox\n    profiles: [x]\n", false},
	} {
		t.Run(name, func(t *testing.T) {
			l := Load(MustWriteTemplate(t, "rep0", tpl(c.compose, "")))
			if c.valid {
				if !l.Valid() {
					t.Fatalf("problems %v, want valid", l.Problems)
				}
				return
			}
			if l.Valid() || len(l.Problems) != 1 || l.Problems[0].Code != sim.EComposeInvalid || !strings.Contains(l.Problems[0].Message, "has deploy.replicas (or scale) 0, so a launch would start no container") {
				t.Fatalf("problems %v, want the one saying every service is scaled to 0", l.Problems)
			}
		})
	}
	// Scaled to 0 by a launch's values: that launch is refused.
	l := MustLoad(t, tpl("services:\n  a:\n    image: busybox\n    deploy:\n      replicas: ${N}\n", "parameters:\n  - name: N\n    purpose: p\n    type: int\n    default: \"1\"\n"))
	if _, err := l.Launch(input(nil)); err != nil {
		t.Fatal(err)
	}
	_, err := l.Launch(input(map[string]string{"N": "0"}))
	wantErr(t, err, sim.EParamsInvalid, "compose.yml: services: every service that runs without a profile (a) has deploy.replicas (or scale) 0")
}

// round 16, B-F2: `v:/data` (volume v, declared at the top level)
// validated ok, and every launch failed at create with the engine's 422
// "invalid mount path: 'v:/data' mount path must be absolute": compose-go
// takes one letter before a colon for a Windows drive (docker-compose 1.x
// read volume v). Every form that reads so, and every mount target that is
// no absolute path, is refused at validate, naming the service, the
// entry and the fix; a longer name, the long syntax and ordinary paths
// stay valid.
func TestOneLetterVolumeRefused(t *testing.T) {
	for entry, want := range map[string]string{
		`v:/data`:          `services.app.volumes[0]: "v:/data" is no volume v: Compose (compose-go) takes one letter before a colon for a Windows drive letter`,
		`V:/data`:          `"V:/data" is no volume V`,
		`v:/data:ro`:       `services.app.volumes[0]: "v:/data:ro" is no volume v`,
		`é:/data`:          `"é:/data" is no volume é`,
		`v:/data:/x`:       `services.app.volumes[0]: "v:/data:/x" binds "v:/data", which Compose (compose-go) reads as a path on the Windows drive v:`,
		`vol:/data`:        "",
		`/srv/x:/data`:     "",
		`./here:/data:ro`:  "",
		`/data`:            "",
		`vol:relative`:     `services.app.volumes[0]: the mount target "relative" is no absolute path in the container`,
		`${VOL:-v}:/data`:  `"v:/data" is no volume v`,
		`${VOL:-vv}:/data`: "",
	} {
		t.Run(entry, func(t *testing.T) {
			compose := "services:\n  app:\n    image: busybox\n    volumes:\n      - \"" + entry + "\"\nvolumes:\n  v: {}\n  V: {}\n  vol: {}\n  vv: {}\n"
			l := Load(MustWriteTemplate(t, "vol", tpl(compose, "")))
			if want == "" {
				if !l.Valid() {
					t.Fatalf("problems %v, want valid", l.Problems)
				}
				return
			}
			if l.Valid() || len(l.Problems) != 1 || l.Problems[0].Code != sim.EComposeInvalid || !strings.Contains(l.Problems[0].Message, want) {
				t.Fatalf("problems %v, want COMPOSE_INVALID saying %q", l.Problems, want)
			}
			if msg := l.Problems[0].Message; !strings.Contains(msg, "must be absolute") || (strings.Contains(want, "is no volume") && !strings.Contains(msg, "name the volume with two or more characters") && !strings.Contains(msg, "type: volume, source: ")) {
				t.Fatalf("problem %q says neither what the engine does nor the fix", msg)
			}
		})
	}
	long := "services:\n  app:\n    image: busybox\n    volumes:\n      - type: volume\n        source: v\n        target: /data\nvolumes:\n  v: {}\n"
	if l := Load(MustWriteTemplate(t, "long", tpl(long, ""))); !l.Valid() {
		t.Fatalf("the long syntax with volume v: problems %v, want valid", l.Problems)
	}
}

// A parameter that makes a one-letter volume name at launch is refused by
// the launch, as COMPOSE_INVALID naming the entry, not by the engine.
func TestOneLetterVolumeRefusedAtLaunch(t *testing.T) {
	compose := "services:\n  app:\n    image: busybox\n    volumes:\n      - ${VOL}:/data\nvolumes:\n  v: {}\n  vol: {}\n"
	params := "parameters:\n  - name: VOL\n    purpose: p\n    default: vol\n"
	l := MustLoad(t, tpl(compose, params))
	if _, err := l.Launch(input(nil)); err != nil {
		t.Fatalf("launch with the default: %v", err)
	}
	_, err := l.Launch(input(map[string]string{"VOL": "v"}))
	wantErr(t, err, sim.EComposeInvalid, `services.app.volumes[0]: "v:/data" is no volume v`)
}
