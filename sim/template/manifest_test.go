package template

import (
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// baseManifest is a valid manifest's fields, in order.
var baseManifest = [][2]string{
	{"productTemplateSchemaVersion", `1`},
	{"productName", `"Counter"`},
	{"productVersion", `"1.0.0"`},
	{"generatedAt", `"2025-01-01T00:00:00Z"`},
	{"target", `"docker-compose"`},
}

// manifestJSON returns the base manifest with each key/raw-JSON pair of kv
// set (replacing a base field, or appended); a value of "-" deletes the key.
func manifestJSON(kv ...string) string {
	fields := append([][2]string(nil), baseManifest...)
	for i := 0; i+1 < len(kv); i += 2 {
		k, v := kv[i], kv[i+1]
		found := false
		for j := range fields {
			if fields[j][0] == k {
				fields[j][1] = v
				found = true
			}
		}
		if !found {
			fields = append(fields, [2]string{k, v})
		}
	}
	var parts []string
	for _, f := range fields {
		if f[1] != "-" {
			parts = append(parts, `"`+f[0]+`": `+f[1])
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func TestManifestRefused(t *testing.T) {
	tests := []struct {
		name     string
		json     string
		wantPath string
		wantMsg  string // substring of the problem's message
	}{
		// the document
		{"not JSON", `{"productName": }`, "", "manifest.json: not valid JSON"},
		{"trailing garbage", manifestJSON() + ` x`, "", "not valid JSON"},
		{"trailing comma", `{"productName": "x",}`, "", "not valid JSON"},
		{"BOM", "\ufeff" + manifestJSON(), "", "not valid JSON"},
		{"array", `[]`, "", "manifest.json: must be an object; got an array"},
		{"null", `null`, "", "must be an object; got null"},
		{"empty", ``, "", "not valid JSON"},

		// required fields
		{"version missing", manifestJSON("productTemplateSchemaVersion", "-"), "productTemplateSchemaVersion", "productTemplateSchemaVersion: is required"},
		{"version 2", manifestJSON("productTemplateSchemaVersion", "2"), "productTemplateSchemaVersion", "productTemplateSchemaVersion: must be 1; got 2"},
		{"version string", manifestJSON("productTemplateSchemaVersion", `"1"`), "productTemplateSchemaVersion", `must be the number 1, not a string or other type; got "1" (write 1 without quotes)`},
		{"version null", manifestJSON("productTemplateSchemaVersion", `null`), "productTemplateSchemaVersion", `must be the number 1, not a string or other type; got null`},
		{"productName missing", manifestJSON("productName", "-"), "productName", "productName: is required"},
		{"productName number", manifestJSON("productName", "5"), "productName", "productName: must be a string; got 5"},
		{"productName null", manifestJSON("productName", "null"), "productName", "must be a string; got null"},
		{"productVersion missing", manifestJSON("productVersion", "-"), "productVersion", "is required"},
		{"productVersion object", manifestJSON("productVersion", "{}"), "productVersion", "must be a string; got an object"},
		{"generatedAt missing", manifestJSON("generatedAt", "-"), "generatedAt", "is required"},
		{"generatedAt bool", manifestJSON("generatedAt", "true"), "generatedAt", "must be a string; got true"},
		{"target missing", manifestJSON("target", "-"), "target", "target: is required"},
		{"target other", manifestJSON("target", `"kubernetes"`), "target", `target: must be "docker-compose"; got "kubernetes"`},
		{"keys are case-sensitive", manifestJSON("productName", "-", "ProductName", `"x"`), "productName", "is required"},

		// migration
		{"migration live", manifestJSON("migration", `{"strategy": "live"}`), "migration.strategy", `migration.strategy: must be one of overlap, stopThenStart, handover; got "live"`},
		{"migration case", manifestJSON("migration", `{"strategy": "Handover"}`), "migration.strategy", `got "Handover"`},
		{"migration no strategy", manifestJSON("migration", `{}`), "migration.strategy", "migration.strategy: is required"},
		{"migration null", manifestJSON("migration", `null`), "migration", "migration: must be an object; got null"},
		{"migration string", manifestJSON("migration", `"handover"`), "migration", "must be an object"},

		// studioAccessModes
		{"studioAccessModes string", manifestJSON("studioAccessModes", `"full"`), "studioAccessModes", "must be an array"},
		{"studioAccessModes empty item", manifestJSON("studioAccessModes", `["full", ""]`), "studioAccessModes[1]", "studioAccessModes[1]: must not be empty"},
		{"studioAccessModes number item", manifestJSON("studioAccessModes", `[1]`), "studioAccessModes[0]", "must be a string; got 1"},
		{"studioAccessModes null", manifestJSON("studioAccessModes", `null`), "studioAccessModes", "must be an array; got null"},

		// ui
		{"ui no url", manifestJSON("ui", `{}`), "ui.runtimeScreenUrl", "ui.runtimeScreenUrl: is required"},
		{"ui url number", manifestJSON("ui", `{"runtimeScreenUrl": 1}`), "ui.runtimeScreenUrl", "must be a string"},
		{"ui label number", manifestJSON("ui", `{"runtimeScreenUrl": "/", "runtimeScreenLabel": 1}`), "ui.runtimeScreenLabel", "must be a string; got 1"},
		{"ui service null", manifestJSON("ui", `{"runtimeScreenUrl": "/", "runtimeScreenService": null}`), "ui.runtimeScreenService", "got null"},
		{"ui readyWhen", manifestJSON("ui", `{"runtimeScreenUrl": "/", "runtimeScreenReadyWhen": "started"}`), "ui.runtimeScreenReadyWhen", `must be one of running, healthy, never; got "started"`},
		{"ui readyPath relative", manifestJSON("ui", `{"runtimeScreenUrl": "/", "runtimeReadyPath": "health"}`), "ui.runtimeReadyPath", `must start with "/"; got "health"`},
		{"ui readyPath empty", manifestJSON("ui", `{"runtimeScreenUrl": "/", "runtimeReadyPath": ""}`), "ui.runtimeReadyPath", `must start with "/"`},
		{"ui array", manifestJSON("ui", `[]`), "ui", "must be an object; got an array"},

		// debug
		{"debug studio string", manifestJSON("debug", `{"studio": "yes"}`), "debug.studio", `debug.studio: must be a boolean; got "yes"`},
		{"debug visualiser number", manifestJSON("debug", `{"visualiser": 1}`), "debug.visualiser", "must be a boolean; got 1"},
		{"debug null", manifestJSON("debug", `null`), "debug", "must be an object"},

		// proxy
		{"proxy expose string", manifestJSON("proxy", `{"expose": "web"}`), "proxy.expose", "must be an array"},
		{"proxy expose item", manifestJSON("proxy", `{"expose": [1]}`), "proxy.expose[0]", "must be a string"},
		{"proxy expose null", manifestJSON("proxy", `{"expose": null}`), "proxy.expose", "got null"},
		{"proxy routes object", manifestJSON("proxy", `{"routes": {}}`), "proxy.routes", "must be an array"},
		{"route segment missing", manifestJSON("proxy", `{"routes": [{"service": "web"}]}`), "proxy.routes[0].segment", "is required"},
		{"route segment upper", manifestJSON("proxy", `{"routes": [{"segment": "Web", "service": "web"}]}`), "proxy.routes[0].segment", `must match ^[a-z0-9][a-z0-9-]*$; got "Web"`},
		{"route segment leading dash", manifestJSON("proxy", `{"routes": [{"segment": "-a", "service": "web"}]}`), "proxy.routes[0].segment", "must match"},
		{"route segment slash", manifestJSON("proxy", `{"routes": [{"segment": "a/b", "service": "web"}]}`), "proxy.routes[0].segment", "must match"},
		{"route segment studio", manifestJSON("proxy", `{"routes": [{"segment": "studio", "service": "web"}]}`), "proxy.routes[0].segment", `reserved); got "studio"`},
		{"route segment media", manifestJSON("proxy", `{"routes": [{"segment": "media", "service": "web"}]}`), "proxy.routes[0].segment", "reserved"},
		{"route segment visualiser", manifestJSON("proxy", `{"routes": [{"segment": "visualiser", "service": "web"}]}`), "proxy.routes[0].segment", "reserved"},
		{"route segment uvis", manifestJSON("proxy", `{"routes": [{"segment": "uvis", "service": "web"}]}`), "proxy.routes[0].segment", "reserved"},
		{"route segment status", manifestJSON("proxy", `{"routes": [{"segment": "status", "service": "web"}]}`), "proxy.routes[0].segment", "reserved"},
		{"route segment metrics", manifestJSON("proxy", `{"routes": [{"segment": "metrics", "service": "web"}]}`), "proxy.routes[0].segment", "reserved"},
		{"route service missing", manifestJSON("proxy", `{"routes": [{"segment": "a"}]}`), "proxy.routes[0].service", "is required"},
		{"route service empty", manifestJSON("proxy", `{"routes": [{"segment": "a", "service": ""}]}`), "proxy.routes[0].service", "must not be empty"},
		{"route port zero", manifestJSON("proxy", `{"routes": [{"segment": "a", "service": "w", "port": 0}]}`), "proxy.routes[0].port", "must be a positive integer; got 0"},
		{"route port fraction", manifestJSON("proxy", `{"routes": [{"segment": "a", "service": "w", "port": 80.5}]}`), "proxy.routes[0].port", "must be an integer; got 80.5"},
		{"route port string", manifestJSON("proxy", `{"routes": [{"segment": "a", "service": "w", "port": "80"}]}`), "proxy.routes[0].port", `must be a number; got "80"`},
		{"route websocket string", manifestJSON("proxy", `{"routes": [{"segment": "a", "service": "w", "websocket": "true"}]}`), "proxy.routes[0].websocket", "must be a boolean"},
		{"route auth null", manifestJSON("proxy", `{"routes": [{"segment": "a", "service": "w", "auth": null}]}`), "proxy.routes[0].auth", "got null"},
		{"second route", manifestJSON("proxy", `{"routes": [{"segment": "a", "service": "w"}, {"segment": "status", "service": "w"}]}`), "proxy.routes[1].segment", "reserved"},

		// top-level booleans
		{"allowWorkflowUploads string", manifestJSON("allowWorkflowUploads", `"true"`), "allowWorkflowUploads", "must be a boolean"},
		{"isStudio number", manifestJSON("isStudio", `1`), "isStudio", "must be a boolean; got 1"},
		{"supportsCustomAssets null", manifestJSON("supportsCustomAssets", `null`), "supportsCustomAssets", "must be a boolean; got null"},
		{"requiresWorkingDirectory string", manifestJSON("requiresWorkingDirectory", `"no"`), "requiresWorkingDirectory", "must be a boolean"},

		// sideload
		{"sideload gpuInference", manifestJSON("sideload", `{"gpuInference": "yes"}`), "sideload.gpuInference", "must be a boolean"},
		{"sideload models", manifestJSON("sideload", `{"models": 0}`), "sideload.models", "must be a boolean"},
		{"sideload modelsReasoning", manifestJSON("sideload", `{"modelsReasoning": null}`), "sideload.modelsReasoning", "must be a boolean"},
		{"sideload llmVenv", manifestJSON("sideload", `{"llmVenv": []}`), "sideload.llmVenv", "must be a boolean; got an array"},
		{"sideload array", manifestJSON("sideload", `[]`), "sideload", "must be an object"},

		// advanced
		{"advanced string", manifestJSON("advanced", `"x"`), "advanced", "must be an object"},
		{"networkMode host", manifestJSON("advanced", `{"networkMode": {"default": "host"}}`), "advanced.networkMode.default", `must be one of docker, hybrid; got "host"`},
		{"networkMode not object", manifestJSON("advanced", `{"networkMode": "docker"}`), "advanced.networkMode", "must be an object"},
		{"containerUser number", manifestJSON("advanced", `{"containerUser": {"default": 1000}}`), "advanced.containerUser.default", "must be a string; got 1000"},
		{"publicHost null", manifestJSON("advanced", `{"publicHost": {"default": null}}`), "advanced.publicHost.default", "got null"},
		{"shmSize number", manifestJSON("advanced", `{"shmSize": {"default": 64}}`), "advanced.shmSize.default", "must be a string"},
		{"hostPorts string", manifestJSON("advanced", `{"hostPorts": {"default": "80/tcp"}}`), "advanced.hostPorts.default", "must be an array"},
		{"sharedMemory item", manifestJSON("advanced", `{"sharedMemory": {"default": [1]}}`), "advanced.sharedMemory.default[0]", "must be a string"},
		{"openFileLimit low", manifestJSON("advanced", `{"openFileLimit": {"default": 1023}}`), "advanced.openFileLimit.default", "must be between 1024 and 1048576; got 1023"},
		{"openFileLimit high", manifestJSON("advanced", `{"openFileLimit": {"default": 1048577}}`), "advanced.openFileLimit.default", "must be between 1024 and 1048576"},
		{"openFileLimit fraction", manifestJSON("advanced", `{"openFileLimit": {"default": 2048.5}}`), "advanced.openFileLimit.default", "must be an integer; got 2048.5"},
		{"openFileLimit string", manifestJSON("advanced", `{"openFileLimit": {"default": "4096"}}`), "advanced.openFileLimit.default", "must be a number"},

		// requirements: the {mode, value} envelope
		{"requirements array", manifestJSON("requirements", `[]`), "requirements", "must be an object"},
		{"cores no mode", manifestJSON("requirements", `{"cores": {"value": 2}}`), "requirements.cores.mode", "is required"},
		{"cores bad mode", manifestJSON("requirements", `{"cores": {"mode": "exact", "value": 2}}`), "requirements.cores.mode", `must be one of fixed, default, required; got "exact"`},
		{"cores fixed no value", manifestJSON("requirements", `{"cores": {"mode": "fixed"}}`), "requirements.cores.value", `is required when mode is "fixed"`},
		{"cores default no value", manifestJSON("requirements", `{"cores": {"mode": "default"}}`), "requirements.cores.value", `is required when mode is "default"`},
		{"cores required with value", manifestJSON("requirements", `{"cores": {"mode": "required", "value": 2}}`), "requirements.cores.value", `must be absent when mode is "required"; got 2`},
		{"cores required with null", manifestJSON("requirements", `{"cores": {"mode": "required", "value": null}}`), "requirements.cores.value", "must be absent"},
		{"cores not object", manifestJSON("requirements", `{"cores": 2}`), "requirements.cores", "must be an object"},
		// requirements values
		{"capacity zero", manifestJSON("requirements", `{"capacity": {"mode": "fixed", "value": 0}}`), "requirements.capacity.value", "must be a positive number; got 0"},
		{"capacity negative", manifestJSON("requirements", `{"capacity": {"mode": "default", "value": -1.5}}`), "requirements.capacity.value", "must be a positive number"},
		{"capacity infinite", manifestJSON("requirements", `{"capacity": {"mode": "fixed", "value": 1e400}}`), "requirements.capacity.value", "must be a finite number; got 1e400"},
		{"capacity string", manifestJSON("requirements", `{"capacity": {"mode": "fixed", "value": "1"}}`), "requirements.capacity.value", "must be a number"},
		{"capacity required with value", manifestJSON("requirements", `{"capacity": {"mode": "required", "value": 1}}`), "requirements.capacity.value", "must be absent"},
		{"cores zero", manifestJSON("requirements", `{"cores": {"mode": "fixed", "value": 0}}`), "requirements.cores.value", "must be a positive integer; got 0"},
		{"cores fraction", manifestJSON("requirements", `{"cores": {"mode": "fixed", "value": 1.5}}`), "requirements.cores.value", "must be an integer; got 1.5"},
		{"cores unsafe", manifestJSON("requirements", `{"cores": {"mode": "fixed", "value": 9007199254740993}}`), "requirements.cores.value", "must be an integer"},
		{"gpu empty", manifestJSON("requirements", `{"gpu": {"mode": "fixed", "value": {}}}`), "requirements.gpu.value", "must set at least one of capacity, model"},
		{"gpu capacity zero", manifestJSON("requirements", `{"gpu": {"mode": "fixed", "value": {"capacity": 0}}}`), "requirements.gpu.value.capacity", "must be a positive number"},
		{"gpu model number", manifestJSON("requirements", `{"gpu": {"mode": "default", "value": {"model": 4090}}}`), "requirements.gpu.value.model", "must be a string"},
		{"gpu value string", manifestJSON("requirements", `{"gpu": {"mode": "fixed", "value": "a100"}}`), "requirements.gpu.value", "must be an object"},
		{"gpu required with value", manifestJSON("requirements", `{"gpu": {"mode": "required", "value": {"model": "x"}}}`), "requirements.gpu.value", "must be absent"},
		{"capabilities empty", manifestJSON("requirements", `{"capabilities": {"mode": "fixed", "value": []}}`), "requirements.capabilities.value", "must have at least one entry"},
		{"capabilities no name", manifestJSON("requirements", `{"capabilities": {"mode": "fixed", "value": [{}]}}`), "requirements.capabilities.value[0].name", "is required"},
		{"capabilities count zero", manifestJSON("requirements", `{"capabilities": {"mode": "fixed", "value": [{"name": "x", "count": 0}]}}`), "requirements.capabilities.value[0].count", "must be a positive integer; got 0"},
		{"capabilities count fraction", manifestJSON("requirements", `{"capabilities": {"mode": "fixed", "value": [{"name": "x", "count": 1.5}]}}`), "requirements.capabilities.value[0].count", "must be an integer"},
		{"capabilities attributeMatches value", manifestJSON("requirements", `{"capabilities": {"mode": "fixed", "value": [{"name": "x", "attributeMatches": {"k": 1}}]}}`), "requirements.capabilities.value[0].attributeMatches.k", "must be a string; got 1"},
		{"capabilities attributeMatches array", manifestJSON("requirements", `{"capabilities": {"mode": "fixed", "value": [{"name": "x", "attributeMatches": []}]}}`), "requirements.capabilities.value[0].attributeMatches", "must be an object"},
		{"capabilities required with value", manifestJSON("requirements", `{"capabilities": {"mode": "required", "value": [{"name": "x"}]}}`), "requirements.capabilities.value", "must be absent"},
		{"hostPorts empty", manifestJSON("requirements", `{"hostPorts": {"mode": "fixed", "value": []}}`), "requirements.hostPorts.value", "must have at least one entry"},
		{"hostPorts no protocol", manifestJSON("requirements", `{"hostPorts": {"mode": "fixed", "value": ["80"]}}`), "requirements.hostPorts.value[0]", `must be PORT/tcp or PORT/udp; got "80"`},
		{"hostPorts sctp", manifestJSON("requirements", `{"hostPorts": {"mode": "fixed", "value": ["80/sctp"]}}`), "requirements.hostPorts.value[0]", "must be PORT/tcp or PORT/udp"},
		{"hostPorts name", manifestJSON("requirements", `{"hostPorts": {"mode": "default", "value": ["80/tcp", "http/tcp"]}}`), "requirements.hostPorts.value[1]", "must be PORT/tcp"},
		{"hostPorts number", manifestJSON("requirements", `{"hostPorts": {"mode": "default", "value": [80]}}`), "requirements.hostPorts.value[0]", "must be a string"},
		{"hostPorts required with value", manifestJSON("requirements", `{"hostPorts": {"mode": "required", "value": ["80/tcp"]}}`), "requirements.hostPorts.value", "must be absent"},
		{"accelerator bad value", manifestJSON("requirements", `{"accelerator": {"mode": "fixed", "value": "amd"}}`), "requirements.accelerator.value", `must be one of none, nvidia, quadra; got "amd"`},
		{"accelerator no value", manifestJSON("requirements", `{"accelerator": {"mode": "default"}}`), "requirements.accelerator.value", "is required"},
		{"accelerator bad mode", manifestJSON("requirements", `{"accelerator": {"mode": "any"}}`), "requirements.accelerator.mode", "must be one of fixed, default, required"},
		{"accelerator no mode", manifestJSON("requirements", `{"accelerator": {}}`), "requirements.accelerator.mode", "is required"},

		// allocatedPorts
		{"allocatedPorts object", manifestJSON("allocatedPorts", `{}`), "allocatedPorts", "must be an array"},
		{"allocatedPorts item", manifestJSON("allocatedPorts", `[1]`), "allocatedPorts[0]", "must be an object"},
		{"param missing", manifestJSON("allocatedPorts", `[{"protocol": "tcp", "preferred": 8000}]`), "allocatedPorts[0].param", "is required"},
		{"param lower", manifestJSON("allocatedPorts", `[{"param": "port", "protocol": "tcp", "preferred": 8000}]`), "allocatedPorts[0].param", `must match ^[A-Z][A-Z0-9_]*$; got "port"`},
		{"param digit first", manifestJSON("allocatedPorts", `[{"param": "1PORT", "protocol": "tcp", "preferred": 8000}]`), "allocatedPorts[0].param", "must match"},
		{"param duplicate", manifestJSON("allocatedPorts", `[{"param": "P", "protocol": "tcp", "preferred": 8000}, {"param": "P", "protocol": "udp", "preferred": 9000}]`), "allocatedPorts[1].param", "must be unique"},
		{"protocol missing", manifestJSON("allocatedPorts", `[{"param": "P", "preferred": 8000}]`), "allocatedPorts[0].protocol", "is required"},
		{"protocol upper", manifestJSON("allocatedPorts", `[{"param": "P", "protocol": "TCP", "preferred": 8000}]`), "allocatedPorts[0].protocol", `must be one of tcp, udp; got "TCP"`},
		{"preferred missing", manifestJSON("allocatedPorts", `[{"param": "P", "protocol": "tcp"}]`), "allocatedPorts[0].preferred", "is required"},
		{"preferred zero", manifestJSON("allocatedPorts", `[{"param": "P", "protocol": "tcp", "preferred": 0}]`), "allocatedPorts[0].preferred", "must be between 1 and 65535; got 0"},
		{"preferred high", manifestJSON("allocatedPorts", `[{"param": "P", "protocol": "tcp", "preferred": 65536}]`), "allocatedPorts[0].preferred", "must be between 1 and 65535"},
		{"preferred fraction", manifestJSON("allocatedPorts", `[{"param": "P", "protocol": "tcp", "preferred": 8000.5}]`), "allocatedPorts[0].preferred", "must be an integer"},
		{"preferred string", manifestJSON("allocatedPorts", `[{"param": "P", "protocol": "tcp", "preferred": "8000"}]`), "allocatedPorts[0].preferred", "must be a number"},
		{"service number", manifestJSON("allocatedPorts", `[{"param": "P", "protocol": "tcp", "preferred": 8000, "service": 1}]`), "allocatedPorts[0].service", "must be a string"},
		{"label null", manifestJSON("allocatedPorts", `[{"param": "P", "protocol": "tcp", "preferred": 8000, "label": null}]`), "allocatedPorts[0].label", "got null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, probs := ValidateManifest([]byte(tt.json))
			if m != nil {
				t.Fatalf("accepted %s", tt.json)
			}
			if len(probs) == 0 {
				t.Fatal("no problems reported")
			}
			p := probs[0]
			if p.Code != sim.EManifestInvalid || p.File != "manifest.json" {
				t.Errorf("code/file = %s/%s, want %s/manifest.json", p.Code, p.File, sim.EManifestInvalid)
			}
			if p.Path != tt.wantPath {
				t.Errorf("path = %q, want %q (%s)", p.Path, tt.wantPath, p.Message)
			}
			if !strings.Contains(p.Message, tt.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", p.Message, tt.wantMsg)
			}
			prefix := tt.wantPath
			if prefix == "" {
				prefix = "manifest.json"
			}
			if !strings.HasPrefix(p.Message, prefix+": ") {
				t.Errorf("message %q does not start with %q", p.Message, prefix+": ")
			}
		})
	}
}

func TestManifestAccepted(t *testing.T) {
	tests := []struct {
		name  string
		json  string
		check func(t *testing.T, m *Manifest)
	}{
		{"minimal", manifestJSON(), func(t *testing.T, m *Manifest) {
			if m.Strategy() != sim.StopThenStart || m.Migration != nil {
				t.Errorf("strategy = %s, migration = %v; want the default and nil", m.Strategy(), m.Migration)
			}
			if !m.CustomAssets() {
				t.Error("supportsCustomAssets absent must mean true")
			}
			if m.AllocatedPorts != nil || m.Proxy != nil || m.Requirements != nil {
				t.Error("absent optional fields must be nil")
			}
		}},
		{"version 1.0", manifestJSON("productTemplateSchemaVersion", "1.0"), nil},
		{"version 1e0", manifestJSON("productTemplateSchemaVersion", "1e0"), nil},
		{"empty strings", manifestJSON("productName", `""`, "productVersion", `""`, "generatedAt", `""`), nil},
		{"unknown keys dropped", manifestJSON("future", `{"x": 1}`, "migration", `{"strategy": "overlap", "extra": true}`), func(t *testing.T, m *Manifest) {
			if m.Strategy() != sim.Overlap {
				t.Errorf("strategy = %s", m.Strategy())
			}
		}},
		{"duplicate key last wins", `{"productTemplateSchemaVersion": 2, "productTemplateSchemaVersion": 1, "productName": "a", "productVersion": "1", "generatedAt": "x", "target": "docker-compose"}`, nil},
		{"each strategy: handover", manifestJSON("migration", `{"strategy": "handover"}`), func(t *testing.T, m *Manifest) {
			if m.Strategy() != sim.Handover {
				t.Errorf("strategy = %s", m.Strategy())
			}
		}},
		{"each strategy: stopThenStart", manifestJSON("migration", `{"strategy": "stopThenStart"}`), func(t *testing.T, m *Manifest) {
			if m.Strategy() != sim.StopThenStart || m.Migration == nil {
				t.Errorf("strategy = %s", m.Strategy())
			}
		}},
		{"studioAccessModes", manifestJSON("studioAccessModes", `["full", "read-only"]`), func(t *testing.T, m *Manifest) {
			if !m.StudioAccessAllowed("full") || m.StudioAccessAllowed("admin") || m.StudioAccessAllowed("") {
				t.Error("StudioAccessAllowed wrong")
			}
		}},
		{"studioAccessModes empty", manifestJSON("studioAccessModes", `[]`), nil},
		{"ui full", manifestJSON("ui", `{"runtimeScreenUrl": "http://x", "runtimeScreenLabel": "L", "runtimeScreenService": "web", "runtimeScreenReadyWhen": "healthy", "runtimeReadyPath": "/ready"}`), func(t *testing.T, m *Manifest) {
			if m.UI == nil || *m.UI.RuntimeScreenReadyWhen != "healthy" || *m.UI.RuntimeReadyPath != "/ready" {
				t.Errorf("ui = %+v", m.UI)
			}
		}},
		{"ui readyWhen running", manifestJSON("ui", `{"runtimeScreenUrl": "", "runtimeScreenReadyWhen": "running"}`), nil},
		{"ui readyWhen never", manifestJSON("ui", `{"runtimeScreenUrl": "", "runtimeScreenReadyWhen": "never"}`), nil},
		{"debug", manifestJSON("debug", `{"studio": true, "visualiser": false}`), nil},
		{"debug empty", manifestJSON("debug", `{}`), nil},
		{"proxy default expose", manifestJSON("proxy", `{}`), func(t *testing.T, m *Manifest) {
			if m.Proxy.Expose == nil || len(m.Proxy.Expose) != 0 || m.Proxy.Routes == nil {
				t.Errorf("proxy = %+v, want expose [] and routes []", m.Proxy)
			}
		}},
		{"proxy routes", manifestJSON("proxy", `{"expose": ["web"], "routes": [{"segment": "0-api", "service": "web", "port": 8080, "websocket": true, "auth": false}, {"segment": "studio2", "service": "s"}]}`), func(t *testing.T, m *Manifest) {
			if len(m.Proxy.Routes) != 2 || *m.Proxy.Routes[0].Port != 8080 {
				t.Errorf("routes = %+v", m.Proxy.Routes)
			}
		}},
		{"booleans", manifestJSON("allowWorkflowUploads", "true", "isStudio", "false", "supportsCustomAssets", "false", "requiresWorkingDirectory", "true"), func(t *testing.T, m *Manifest) {
			if m.CustomAssets() {
				t.Error("supportsCustomAssets false ignored")
			}
		}},
		{"sideload", manifestJSON("sideload", `{"gpuInference": true, "models": false, "modelsReasoning": true, "llmVenv": false}`), nil},
		{"advanced all", manifestJSON("advanced", `{"networkMode": {"default": "hybrid"}, "containerUser": {"default": "1000:1000"}, "publicHost": {}, "shmSize": {"default": "1g"}, "hostPorts": {"default": ["80/tcp"]}, "sharedMemory": {"default": []}, "openFileLimit": {"default": 1048576}, "productKnob": {"default": 5}}`), func(t *testing.T, m *Manifest) {
			a := m.Advanced
			if *a.NetworkMode.Default != "hybrid" || a.PublicHost == nil || a.PublicHost.Default != nil || *a.OpenFileLimit.Default != 1048576 {
				t.Errorf("advanced = %+v", a)
			}
		}},
		{"openFileLimit low bound", manifestJSON("advanced", `{"openFileLimit": {"default": 1024}}`), nil},
		{"requirements fixed/default", manifestJSON("requirements", `{"capacity": {"mode": "fixed", "value": 0.5}, "cores": {"mode": "default", "value": 4}, "gpu": {"mode": "fixed", "value": {"model": "A100"}}, "capabilities": {"mode": "default", "value": [{"name": "x", "count": 2, "attributeMatches": {"k": "v"}}]}, "hostPorts": {"mode": "fixed", "value": ["5000/UDP", "80/tcp"]}, "accelerator": {"mode": "fixed", "value": "nvidia"}}`), func(t *testing.T, m *Manifest) {
			r := m.Requirements
			if *r.Capacity.Value != 0.5 || *r.Cores.Value != 4 || *r.GPU.Value.Model != "A100" || (*r.Capabilities.Value)[0].AttributeMatches["k"] != "v" || len(*r.HostPorts.Value) != 2 || *r.Accelerator.Value != "nvidia" {
				t.Errorf("requirements = %+v", r)
			}
		}},
		{"requirements required", manifestJSON("requirements", `{"capacity": {"mode": "required"}, "cores": {"mode": "required"}, "gpu": {"mode": "required"}, "capabilities": {"mode": "required"}, "hostPorts": {"mode": "required"}, "accelerator": {"mode": "required"}}`), nil},
		{"accelerator required drops value", manifestJSON("requirements", `{"accelerator": {"mode": "required", "value": "anything"}}`), func(t *testing.T, m *Manifest) {
			if m.Requirements.Accelerator.Value != nil {
				t.Error("value kept")
			}
		}},
		{"gpu capacity only", manifestJSON("requirements", `{"gpu": {"mode": "default", "value": {"capacity": 1}}}`), nil},
		{"allocatedPorts", manifestJSON("allocatedPorts", `[{"param": "HTTP_PORT", "protocol": "tcp", "preferred": 8080, "service": "web", "label": "HTTP"}, {"param": "P2", "protocol": "udp", "preferred": 65535}]`), func(t *testing.T, m *Manifest) {
			want := sim.AllocatedPortDecl{Param: "HTTP_PORT", Protocol: "tcp", Preferred: 8080, Service: "web", Label: "HTTP"}
			if len(m.AllocatedPorts) != 2 || m.AllocatedPorts[0] != want {
				t.Errorf("allocatedPorts = %+v", m.AllocatedPorts)
			}
		}},
		{"allocatedPorts empty", manifestJSON("allocatedPorts", `[]`), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, probs := ValidateManifest([]byte(tt.json))
			if len(probs) > 0 || m == nil {
				t.Fatalf("refused: %v", probs)
			}
			if tt.check != nil {
				tt.check(t, m)
			}
		})
	}
}

func TestManifestCollectsEveryProblem(t *testing.T) {
	_, probs := ValidateManifest([]byte(manifestJSON("productTemplateSchemaVersion", "2", "target", `"x"`, "migration", `{"strategy": "live"}`)))
	var paths []string
	for _, p := range probs {
		paths = append(paths, p.Path)
	}
	want := "productTemplateSchemaVersion target migration.strategy"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("paths = %q, want %q", got, want)
	}
}

// TestManifestJSONErrorsSayWhere: a manifest that is not valid JSON is
// refused with the line and column of the problem, as an editor shows it.
func TestManifestJSONErrorsSayWhere(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{"{\n  \"productName\": \"x\",\n  \"target\" \"docker-compose\"\n}", "line 3, column 12: invalid character '\"' after object key"},
		{"{\n  \"productName\": \"x\",", "line 2, column 22: the file ends before the JSON does"},
		{"{}\n{}", "line 2, column 1: unexpected data after the top-level value"},
		// Attack round 10a: "invalid character 'ï' looking for beginning of value".
		{"\xef\xbb\xbf{}", "begins with a UTF-8 byte order mark (BOM)"},
	} {
		_, probs := ValidateManifest([]byte(tc.data))
		if len(probs) != 1 || !strings.Contains(probs[0].Message, tc.want) {
			t.Errorf("%q: problems %+v, want one saying %q", tc.data, probs, tc.want)
		}
	}
}
