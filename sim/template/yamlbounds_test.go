package template

import (
	"strings"
	"testing"
)

// TestExpandedCostIsTheWrittenOutCost (issue 34 item 1): an alias costs
// what writing its value out would, wherever it stands, since that is what
// compose-go builds from it.
func TestExpandedCostIsTheWrittenOutCost(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ aliased, written string }{
		"scalar": {
			"a: &x hello\nb: *x\n",
			"a: hello\nb: hello\n",
		},
		"mapping under a longer key": {
			"a: &x {k: [1, 22]}\nlonger_key: *x\n",
			"a: {k: [1, 22]}\nlonger_key: {k: [1, 22]}\n",
		},
		"nested aliases in a list": {
			"a: &x [q, r]\nb: &y [*x, *x]\nc: [*y, *y, *y]\n",
			"a: [q, r]\nb: [[q, r], [q, r]]\nc: [[[q, r], [q, r]], [[q, r], [q, r]], [[q, r], [q, r]]]\n",
		},
		"merge key": {
			"x-base: &b {image: busybox, user: root}\nservices: {app: {<<: *b}}\n",
			"x-base: {image: busybox, user: root}\nservices: {app: {<<: {image: busybox, user: root}}}\n",
		},
		"aliased key": {
			"a: &k name\nb: {*k : 1}\n",
			"a: name\nb: {name: 1}\n",
		},
		"two documents": {
			"a: &x [1, 2]\n---\nb: [3]\n",
			"a: [1, 2]\n---\nb: [3]\n",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, aliases := expandedCost([]byte(tt.aliased))
			want, none := expandedCost([]byte(tt.written))
			if got != want {
				t.Errorf("aliased costs %+v, written out %+v", got, want)
			}
			if name != "two documents" && (!aliases || none) {
				t.Errorf("aliases seen: %v in the aliased form, %v in the written one", aliases, none)
			}
		})
	}
}

// TestYAMLBounds (issue 34 item 1): each bound refuses what passes it,
// with or without aliases, and a file without aliases at the file size
// limit passes.
func TestYAMLBounds(t *testing.T) {
	t.Parallel()
	// nested puts n keys of the given length around value.
	nested := func(n, keyLen int, value string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString("{k" + strings.Repeat("x", keyLen) + string(rune('a'+i%26)) + ": ")
		}
		b.WriteString(value)
		b.WriteString(strings.Repeat("}", n))
		return b.String()
	}
	// copies makes levels lists of nine aliases, each of the one before,
	// starting from first (an anchored value named l0).
	copies := func(first string, levels int) string {
		s := "x-l0: &l0 " + first + "\n"
		for i := 1; i <= levels; i++ {
			s += "x-l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" +
				strings.TrimSuffix(strings.Repeat("*l"+string(rune('0'+i-1))+",", 9), ",") + "]\n"
		}
		return s
	}
	tests := map[string]struct {
		content string
		want    string // "" when it passes
	}{
		"a product's compose file": {oneService, ""},
		"anchors merged into services": {
			"x-env: &env {environment: {A: '1', B: '2'}, image: busybox}\nservices:\n" +
				"  a: {<<: *env}\n  b: {<<: *env}\n  c: {<<: *env}\n", ""},
		"a file at the size limit, without aliases": {
			"x-big: " + strings.Repeat("z", maxFileBytes-100) + "\n" + oneService, ""},
		"nine levels of nine (billion laughs)": {copies("lol", 9), "expands to more than 8 MiB of text through YAML aliases"},
		"a 1 KB string copied 59,049 times":    {copies(strings.Repeat("z", 1024), 5), "expands to more than 8 MiB of text through YAML aliases"},
		"a bomb in the second document":        {oneService + "---\n" + copies(strings.Repeat("z", 4096), 4), "expands to more than 8 MiB of text"},
		"many nodes through aliases":           {copies("1", 6), "holds more than 10000 YAML nodes once its aliases (*name) are expanded"},
		// A second of compose-go's time, where 100,000 was ten.
		"11,000 nodes written out":           {"x: [" + strings.Repeat("1,", 11_000) + "1]\n", "holds more than 10000 YAML nodes"},
		"many nodes written out":             {"x: [" + strings.Repeat("1,", maxYAMLNodes) + "1]\n", "holds more than 10000 YAML nodes; a template's YAML file may hold at most 10000"},
		"long keys nested deep, written out": {"x: " + nested(60, 4096, "1") + "\n", "the paths naming its values (services.app.environment.KEY and the like) add up to more than 8 MiB; a template"},
		"long keys above aliased entries":    {copies("1", 3) + "x: " + nested(12, 1024, "*l3") + "\n", "add up to more than 8 MiB once its aliases (*name) are expanded"},
		"not YAML: the loader says why":      {"a: [\n", ""},
		// The document, the top mapping and 62 lists: 64 levels.
		"nested to the depth limit": {"x: " + strings.Repeat("[", 62) + strings.Repeat("]", 62) + "\n", ""},
		"nested a level past it":    {"x: " + strings.Repeat("[", 63) + strings.Repeat("]", 63) + "\n", "nests lists and mappings more than 64 levels deep; a template's YAML file may nest at most 64"},
		// The fresh attack's file: 5.6 KB that took compose-go 18 s.
		"2,800 nested lists": {"x: " + strings.Repeat("[", 2800) + strings.Repeat("]", 2800) + "\n", "more than 64 levels deep"},
		"deep through an alias": {"a: &a " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\nb: " + strings.Repeat("[", 30) + "*a" + strings.Repeat("]", 30) + "\n",
			"nests lists and mappings more than 64 levels deep once its aliases (*name) are expanded"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := checkYAMLBounds([]byte(tt.content))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("passed, want %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}
