package template

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// leastNodesCases are YAML texts that could fool a count that does not
// follow quotes, comments and block scalars.
var leastNodesCases = []string{
	"services:\n  app:\n    image: busybox\n    command: echo [a,b,c] {d, e} - f\n",
	"a: |\n  - not\n  - a list, [nor, a, flow]\n  key: not a key\nb: >-\n  more, text: here\n  - and here\n",
	"a: \"quoted, with: colons\n  - and a second line, [x, y]\"\nb: 'it''s - [a, b]'\n",
	"# - a comment, [with, commas]: x\na: b # - another, one: y\n",
	"list:\n- a\n- - b\n  - c\n- {k: v, l: [1, 2, 3]}\n",
	"x: &anchor [a, b, c]\ny: !!seq [d, e]\nz: *anchor\n",
	"flow: [a,\n  b, 'c, d',\n  \"e, f\"]\n",
	"k: it's [a, b]\nj: x'y, 'z'\n",
	"--- \na: 1\n---\nb: [1, 2]\n",
	"? complex\n: value\n",
	"url: http://example.com:8080/a,b\n",
	"a:\n  - |2\n     - text, with, commas\n  - b\n",
	"{\"services\": {\"app\": {\"image\": \"x\", \"command\": [\"a,b\", \"c\"]}}}\n",
	"a: [\n  # comment, with, commas\n  1, 2 ]\n",
	"a: \"x\ry, [a, b]\"\rb:\r- 1\r- 2\r",
	"a: b\u2028c: [1, 2]\u0085d:\u2029- e\r\n",
}

// TestLeastNodesIsALowerBound: the count read from the text is never more
// than the nodes the parser builds, for tricky texts and for every YAML
// file of the repository's templates and examples, or a valid template
// would be refused.
func TestLeastNodesIsALowerBound(t *testing.T) {
	texts := map[string]string{}
	for i, c := range leastNodesCases {
		texts["case "+string(rune('a'+i))] = c
	}
	for _, root := range []string{"../../templates", "../../examples", "../../docker-compose.dev.yml"} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yml") || strings.HasSuffix(p, ".yaml")) {
				if b, err := os.ReadFile(p); err == nil {
					texts[p] = string(b)
				}
			}
			return nil
		})
	}
	if len(texts) < len(leastNodesCases)+20 {
		t.Fatalf("only %d texts to check", len(texts))
	}
	for name, text := range texts {
		cost, _ := expandedCost([]byte(text))
		if least := leastNodes([]byte(text)); least > cost.nodes {
			t.Errorf("%s: read %d nodes from the text, the parser builds %d:\n%s", name, least, cost.nodes, text)
		}
	}
}

// FuzzLeastNodes: for any text the parser takes, the count read from the
// text is at most the nodes it builds.
func FuzzLeastNodes(f *testing.F) {
	for _, c := range leastNodesCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 1<<16 {
			return
		}
		if !parses(text) {
			return // compose-go refuses it whatever its size
		}
		cost, _ := expandedCost([]byte(text))
		if cost == over {
			return // past a bound anyway
		}
		if least := leastNodes([]byte(text)); least > cost.nodes {
			t.Fatalf("read %d nodes from the text, the parser builds %d:\n%q", least, cost.nodes, text)
		}
	})
}

// parses reports whether every document of text parses.
func parses(text string) bool {
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// TestNodeBombsAreRefusedBeforeParsing (issue 34, the fourth attack's
// finding 5): an 8 MiB file of millions of entries is refused by its
// text, before the parser builds its nodes (13 s and 1.4 GB before, for
// each such file a template directory held).
func TestNodeBombsAreRefusedBeforeParsing(t *testing.T) {
	fill := func(head, item string) []byte {
		return []byte(head + strings.Repeat(item, (maxFileBytes-len(head))/len(item)))
	}
	bombs := map[string][]byte{
		"a flow list":         append(fill("x-a: [", "a,"), ']'),
		"a block list":        fill("x-a:\n", "- a\n"),
		"a mapping":           fill("x-a:\n", "  k: v\n"),
		"a tagged flow list":  append(fill("x-a: !!seq [", "a,"), ']'),
		"a flow list in JSON": append(fill(`{"x-a": [`, `"a",`), []byte(`"a"]}`)...),
	}
	bombs["a flow list in UTF-16"] = []byte(utf16WithBOM(string(bombs["a flow list"][:maxFileBytes/2-16])) + "\x00]\x00")
	// Lines the parser breaks at that are not "\n" (issue 34, attack
	// round 9a, H1: 1.5 GB each, and three crashed normsim up).
	for name, br := range map[string]string{"CR": "\r", "CRLF": "\r\n", "NEL": "\u0085", "LS": "\u2028", "PS": "\u2029"} {
		bombs["a block list broken by "+name] = fill("x-a:"+br, "- a"+br)
	}
	for name, bomb := range bombs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := checkYAMLBounds(bomb)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "holds more than 10000 YAML nodes") {
			t.Errorf("%s: %v, want it refused for its nodes", name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
			t.Errorf("%s: judging it allocated %d MiB: it was parsed", name, alloc>>20)
		}
	}
}
