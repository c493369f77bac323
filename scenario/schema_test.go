package scenario

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/normsim/normsim/sim"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

func TestSchemaInDocsIsTheEmbeddedOne(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join("..", "docs", "scenario.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, Schema()) {
		t.Fatal("docs/scenario.schema.json differs from scenario/scenario.schema.json; copy one over the other")
	}
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("scenario.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("scenario.schema.json")
	if err != nil {
		t.Fatalf("compile the schema: %v", err)
	}
	return sch
}

// yamlDocs reads every YAML document of a file as a JSON value.
func yamlDocs(t *testing.T, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []any
	for {
		var v any
		if err := dec.Decode(&v); err != nil {
			break
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, inst)
	}
	return out
}

// TestSchemaAgreesWithTheParser checks the schema accepts what the parser
// accepts, and refuses the broken files whose fault is one of structure
// (the parser also checks references and combinations the schema cannot).
func TestSchemaAgreesWithTheParser(t *testing.T) {
	sch := compileSchema(t)
	good := []string{filepath.Join("testdata", "wrong", "handover-expects-gap.yaml"), filepath.Join("testdata", "wrong", "fail-start-expects-completed.yaml")}
	for _, name := range slices.Concat(exampleFiles, misbehavingFiles, videoFiles) {
		good = append(good, examplePath(name))
	}
	for _, f := range good {
		if _, err := ParseFile(f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, doc := range yamlDocs(t, f) {
			if err := sch.Validate(doc); err != nil {
				t.Errorf("%s: the parser accepts it but the schema does not: %v", f, err)
			}
		}
	}
	structural := []string{"unknown-key", "unknown-migrate-key", "bad-duration", "two-actions", "expect-on-wait", "external-runtime",
		"error-with-state", "bad-state", "repeat-zero", "fault-without-kind", "bad-timeouts", "wait-connected-false", "not-a-mapping",
		"missing-steps", "bad-judgement", "bad-applied", "bad-media-defects"}
	for _, name := range structural {
		f := filepath.Join("testdata", "broken", name+".yaml")
		docs := yamlDocs(t, f)
		if len(docs) == 0 {
			t.Fatalf("%s: no document", f)
		}
		if err := sch.Validate(docs[0]); err == nil {
			t.Errorf("%s: the parser refuses it but the schema accepts it", f)
		}
	}
}

// The schema's expect.phase lists the phases sim defines, in their order,
// so an editor accepts exactly what the parser does.
func TestSchemaPhasesAreSimPhases(t *testing.T) {
	var doc struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(Schema(), &doc); err != nil {
		t.Fatal(err)
	}
	got := doc.Defs["expect"].Properties["phase"].Enum
	if want := sim.PhaseNames(); !slices.Equal(got, want) {
		t.Fatalf("the schema's expect.phase is %v; sim.PhaseNames() is %v", got, want)
	}
}

// The schema's enums are the parser's: the seams, and the media checks
// sim names, so an editor accepts exactly what a run does.
func TestSchemaEnumsAreTheParsers(t *testing.T) {
	var doc struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Enum  []string `json:"enum"`
				Items struct {
					Enum []string `json:"enum"`
				} `json:"items"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(Schema(), &doc); err != nil {
		t.Fatal(err)
	}
	props := doc.Defs["expect"].Properties
	if got := props["seam"].Enum; !slices.Equal(got, Seams) {
		t.Errorf("the schema's expect.seam is %v; the parser's is %v", got, Seams)
	}
	if got := props["mediaDefects"].Items.Enum; !slices.Equal(got, sim.MediaChecks) {
		t.Errorf("the schema's expect.mediaDefects are %v; sim.MediaChecks is %v", got, sim.MediaChecks)
	}
}
