package template

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// checkProblems asserts the shape every problem must have.
func checkProblems(t *testing.T, probs []Problem, code, file string) {
	t.Helper()
	for _, p := range probs {
		prefix := p.Path
		if prefix == "" {
			prefix = file
		}
		if p.Code != code || p.File != file || !strings.HasPrefix(p.Message, prefix+": ") {
			t.Fatalf("malformed problem %+v", p)
		}
	}
}

// FuzzValidateManifest checks that validation never panics, that a result
// is either a manifest or problems, and that a valid manifest written back
// as JSON validates to the same manifest.
func FuzzValidateManifest(f *testing.F) {
	f.Add([]byte(manifestJSON()))
	f.Add([]byte(manifestJSON("migration", `{"strategy": "handover"}`, "allocatedPorts", `[{"param": "P", "protocol": "tcp", "preferred": 80}]`)))
	for _, name := range []string{"counter", "relay-overlap", "plain"} {
		if data, err := os.ReadFile(filepath.Join("../../templates", name, "manifest.json")); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, probs := ValidateManifest(data)
		if (m == nil) == (len(probs) == 0) {
			t.Fatalf("manifest %v with problems %v", m, probs)
		}
		checkProblems(t, probs, sim.EManifestInvalid, "manifest.json")
		if m == nil {
			return
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, probs := ValidateManifest(out)
		if len(probs) > 0 {
			t.Fatalf("round trip %s refused: %v", out, probs)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, m2)
		}
	})
}

// FuzzValidateParameters checks the same for parameters.yaml; JSON is YAML,
// so the round trip writes JSON.
func FuzzValidateParameters(f *testing.F) {
	f.Add([]byte("parameters:\n  - name: RATE\n    purpose: p\n    type: int\n    default: \"50\"\n    min: 1\n    max: 1000\n"))
	f.Add([]byte("parameters:\n  - name: MODE\n    purpose: p\n    type: enum\n    values: [a, b]\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, probs := ValidateParameters(data)
		if (ps == nil) == (len(probs) == 0) {
			t.Fatalf("parameters %v with problems %v", ps, probs)
		}
		checkProblems(t, probs, sim.EParametersInvalid, "parameters.yaml")
		if ps == nil {
			return
		}
		out, err := json.Marshal(map[string]any{"parameters": ps})
		if err != nil {
			t.Fatal(err)
		}
		ps2, probs := ValidateParameters(out)
		if len(probs) > 0 {
			t.Fatalf("round trip %s refused: %v", out, probs)
		}
		if len(ps) != len(ps2) {
			t.Fatalf("round trip changed the parameters: %+v %+v", ps, ps2)
		}
		for i := range ps {
			if !equalParam(ps[i], ps2[i]) {
				t.Fatalf("round trip changed parameter %d: %+v %+v", i, ps[i], ps2[i])
			}
		}
	})
}
