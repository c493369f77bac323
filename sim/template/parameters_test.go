package template

import (
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

func TestParametersRefused(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		wantPath string
		wantMsg  string
	}{
		{"not YAML", "parameters: [\n", "", "parameters.yaml: not valid YAML"},
		{"duplicate key", "parameters: []\nparameters: []\n", "", "not valid YAML"},
		{"two documents", "parameters: []\n---\nparameters: []\n", "", "single YAML document"},
		{"top-level list", "- name: A\n", "", "parameters.yaml: must be an object; got an array"},
		{"top-level string", "hello\n", "", `must be an object; got "hello"`},
		{"parameters mapping", "parameters: {A: 1}\n", "parameters", "must be an array"},
		{"parameters null", "parameters:\n", "parameters", "must be an array; got null"},
		{"entry not mapping", "parameters: [A]\n", "parameters[0]", "must be an object"},
		{"name missing", "parameters:\n  - type: int\n", "parameters[0].name", "is required"},
		{"name lower", "parameters:\n  - name: A\n    purpose: p\n  - name: B\n    purpose: p\n  - name: port\n    purpose: p\n", "parameters[2].name", `parameters[2].name: must match ^[A-Z][A-Z0-9_]*$; got "port"`},
		{"name digit first", "parameters:\n  - name: 9A\n    purpose: p\n", "parameters[0].name", "must match"},
		{"name dash", "parameters:\n  - name: A-B\n    purpose: p\n", "parameters[0].name", "must match"},
		{"name number", "parameters:\n  - name: 5\n    purpose: p\n", "parameters[0].name", "must be a string; got 5"},
		{"name NORSK_", "parameters:\n  - name: NORSK_WORKER_TOKEN\n    purpose: p\n", "parameters[0].name", "NORSK_ namespace"},
		{"name duplicate", "parameters:\n  - name: A\n    purpose: p\n  - name: A\n    purpose: p\n", "parameters[1].name", "must be unique"},
		{"purpose missing", "parameters:\n  - name: A\n", "parameters[0].purpose", "parameters[0].purpose: is required"},
		{"purpose missing on a later one", "parameters:\n  - name: A\n    purpose: p\n  - name: B\n    type: int\n", "parameters[1].purpose", "is required"},
		{"purpose null", "parameters:\n  - name: A\n    purpose: ~\n", "parameters[0].purpose", "must be a string; got null"},
		{"purpose number", "parameters:\n  - name: A\n    purpose: 5\n", "parameters[0].purpose", "must be a string"},
		{"type unknown", "parameters:\n  - name: A\n    purpose: p\n    type: float\n", "parameters[0].type", `must be one of string, int, number, boolean, enum; got "float"`},
		{"type null", "parameters:\n  - name: A\n    purpose: p\n    type:\n", "parameters[0].type", "got null"},
		{"default int", "parameters:\n  - name: A\n    purpose: p\n    type: int\n    default: 5\n", "parameters[0].default", `must be a string; got 5 (quote it: default: "5")`},
		{"default bool", "parameters:\n  - name: A\n    purpose: p\n    type: boolean\n    default: true\n", "parameters[0].default", `(quote it: default: "true")`},
		{"default null", "parameters:\n  - name: A\n    purpose: p\n    default: ~\n", "parameters[0].default", "must be a string; got null"},
		{"default list", "parameters:\n  - name: A\n    purpose: p\n    default: [a]\n", "parameters[0].default", "got an array"},
		{"secret string", "parameters:\n  - name: A\n    purpose: p\n    secret: \"yes\"\n", "parameters[0].secret", "must be a boolean"},
		{"required number", "parameters:\n  - name: A\n    purpose: p\n    required: 1\n", "parameters[0].required", "must be a boolean"},
		{"min on string", "parameters:\n  - name: A\n    purpose: p\n    min: 1\n", "parameters[0].min", "only allowed for type int or number; type is string"},
		{"max on boolean", "parameters:\n  - name: A\n    purpose: p\n    type: boolean\n    max: 1\n", "parameters[0].max", "only allowed for type int or number"},
		{"min on enum", "parameters:\n  - name: A\n    purpose: p\n    type: enum\n    values: [a]\n    min: 1\n", "parameters[0].min", "only allowed"},
		{"min > max", "parameters:\n  - name: A\n    purpose: p\n    type: int\n    min: 10\n    max: 1\n", "parameters[0].min", "must be at most max (1); got 10"},
		{"min string", "parameters:\n  - name: A\n    purpose: p\n    type: int\n    min: \"1\"\n", "parameters[0].min", "must be a number"},
		{"max infinite", "parameters:\n  - name: A\n    purpose: p\n    type: number\n    max: .inf\n", "parameters[0].max", "must be a finite number"},
		{"min NaN", "parameters:\n  - name: A\n    purpose: p\n    type: number\n    min: .nan\n", "parameters[0].min", "must be a finite number"},
		{"values on string", "parameters:\n  - name: A\n    purpose: p\n    values: [a]\n", "parameters[0].values", "only allowed for type enum; type is string"},
		{"values on int", "parameters:\n  - name: A\n    purpose: p\n    type: int\n    values: [\"1\"]\n", "parameters[0].values", "only allowed for type enum"},
		{"enum no values", "parameters:\n  - name: A\n    purpose: p\n    type: enum\n", "parameters[0].values", "is required for type enum"},
		{"enum empty values", "parameters:\n  - name: A\n    purpose: p\n    type: enum\n    values: []\n", "parameters[0].values", "must have at least one entry"},
		{"values number item", "parameters:\n  - name: A\n    purpose: p\n    type: enum\n    values: [1]\n", "parameters[0].values[0]", "must be a string; got 1"},
		{"values string", "parameters:\n  - name: A\n    purpose: p\n    type: enum\n    values: a\n", "parameters[0].values", "must be an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, probs := ValidateParameters([]byte(tt.yaml))
			if ps != nil {
				t.Fatalf("accepted: %+v", ps)
			}
			if len(probs) == 0 {
				t.Fatal("no problems reported")
			}
			p := probs[0]
			if p.Code != sim.EParametersInvalid || p.File != "parameters.yaml" {
				t.Errorf("code/file = %s/%s", p.Code, p.File)
			}
			if p.Path != tt.wantPath {
				t.Errorf("path = %q, want %q (%s)", p.Path, tt.wantPath, p.Message)
			}
			if !strings.Contains(p.Message, tt.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", p.Message, tt.wantMsg)
			}
		})
	}
}

func TestParametersAccepted(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	s := func(v string) *string { return &v }
	tests := []struct {
		name string
		yaml string
		want []sim.Parameter
	}{
		{"empty file", "", []sim.Parameter{}},
		{"comments only", "# nothing\n", []sim.Parameter{}},
		{"no parameters key", "other: 1\n", []sim.Parameter{}},
		{"empty list", "parameters: []\n", []sim.Parameter{}},
		{"type defaults to string", "parameters:\n  - name: A\n    purpose: p\n", []sim.Parameter{{Name: "A", Purpose: "p", Type: "string"}}},
		{"full int", "parameters:\n  - name: RATE\n    purpose: p\n    type: int\n    default: \"50\"\n    secret: false\n    required: true\n    min: 1\n    max: 1000\n    extra: dropped\n",
			[]sim.Parameter{{Name: "RATE", Purpose: "p", Type: "int", Default: s("50"), Required: true, Min: f(1), Max: f(1000)}}},
		{"min == max", "parameters:\n  - name: A\n    purpose: p\n    type: number\n    min: 1.5\n    max: 1.5\n", []sim.Parameter{{Name: "A", Purpose: "p", Type: "number", Min: f(1.5), Max: f(1.5)}}},
		{"enum", "parameters:\n  - name: MODE\n    purpose: p\n    type: enum\n    values: [a, b]\n    default: b\n", []sim.Parameter{{Name: "MODE", Purpose: "p", Type: "enum", Values: []string{"a", "b"}, Default: s("b")}}},
		{"yes is a string in YAML 1.2", "parameters:\n  - name: A\n    purpose: p\n    default: yes\n", []sim.Parameter{{Name: "A", Purpose: "p", Type: "string", Default: s("yes")}}},
		{"timestamp is a string", "parameters:\n  - name: A\n    purpose: p\n    default: 2001-12-14\n", []sim.Parameter{{Name: "A", Purpose: "p", Type: "string", Default: s("2001-12-14")}}},
		{"secret boolean", "parameters:\n  - name: KEY\n    purpose: p\n    secret: true\n", []sim.Parameter{{Name: "KEY", Purpose: "p", Type: "string", Secret: true}}},
		{"purpose may be empty", "parameters:\n  - name: A\n    purpose: \"\"\n", []sim.Parameter{{Name: "A", Type: "string"}}},
		{"NORSK without underscore is fine", "parameters:\n  - name: NORSKY\n    purpose: p\n", []sim.Parameter{{Name: "NORSKY", Purpose: "p", Type: "string"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, probs := ValidateParameters([]byte(tt.yaml))
			if len(probs) > 0 {
				t.Fatalf("refused: %v", probs)
			}
			if len(ps) != len(tt.want) || ps == nil {
				t.Fatalf("got %+v, want %+v", ps, tt.want)
			}
			for i := range ps {
				if !equalParam(ps[i], tt.want[i]) {
					t.Errorf("[%d] = %+v, want %+v", i, ps[i], tt.want[i])
				}
			}
		})
	}
}

func equalParam(a, b sim.Parameter) bool {
	eqS := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqF := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.Name == b.Name && a.Purpose == b.Purpose && a.Type == b.Type && eqS(a.Default, b.Default) &&
		a.Secret == b.Secret && a.Required == b.Required && eqF(a.Min, b.Min) && eqF(a.Max, b.Max) &&
		strings.Join(a.Values, "\x00") == strings.Join(b.Values, "\x00")
}

// round 13, B9: a name declared both in parameters.yaml and as an
// allocatedPorts param validated ok: listed as an ordinary parameter
// ("X string") whose every non-port value a launch refused. Such an entry
// may only give the port its purpose and a default that opens it.
func TestParameterThatIsAlsoAnAllocatedPort(t *testing.T) {
	compose := "services:\n  app:\n    image: busybox\n    environment:\n      X: ${X:-none}\n"
	decl := []string{"allocatedPorts", `[{"param":"X","protocol":"tcp","preferred":2000}]`}
	for name, c := range map[string]struct{ param, path, want string }{
		"no default":    {"", "parameters[0]", "gives no default that opens the port, so it only lists the port as a string parameter"},
		"blank default": {"\n    default: \"\"", "parameters[0]", "gives no default that opens the port"},
		"enum":          {"\n    type: enum\n    values: [a]\n    default: a", "parameters[0].type", "is enum"},
		"required":      {"\n    required: true", "parameters[0].required", "a port does not honour"},
		"max":           {"\n    type: int\n    max: 9000\n    default: auto", "parameters[0].max", "is not applied to a port"},
		"default":       {"\n    default: web", "parameters[0].default", `"web" is not "auto" or a port number 1..65535, so every launch that does not give X is refused`},
		"fine, auto":    {"\n    default: auto", "", ""},
		"fine, a port":  {"\n    type: int\n    default: \"2001\"", "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			l := Load(MustWriteTemplate(t, "dup", tpl(compose, "parameters:\n  - name: X\n    purpose: p"+c.param+"\n", decl...)))
			if c.want == "" {
				if !l.Valid() {
					t.Fatalf("problems %v, want valid", l.Problems)
				}
				return
			}
			if l.Valid() || len(l.Problems) != 1 {
				t.Fatalf("problems %v, want one", l.Problems)
			}
			p := l.Problems[0]
			if p.Code != sim.EParametersInvalid || p.File != "parameters.yaml" || p.Path != c.path ||
				!strings.Contains(p.Message, c.want) || !strings.Contains(p.Message, "manifest.json's allocatedPorts[0].param") {
				t.Errorf("problem %+v, want PARAMETERS_INVALID at %s saying %q and naming allocatedPorts[0]", p, c.path, c.want)
			}
		})
	}
}
