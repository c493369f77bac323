package template

import (
	"bytes"
	"fmt"
	"strconv"

	// The parser compose-go reads compose.yml with, so that the guard and
	// the loader cannot disagree about a file's documents and aliases.
	// go.mod still lists it as indirect: marking it direct would change
	// every example image's source tag (internal/srctag hashes go.mod),
	// which is for the next re-pin to do.
	"go.yaml.in/yaml/v4"
)

// What a template's YAML file may cost once its aliases are expanded.
// compose-go expands every alias into a copy before it looks at the
// result, and on each of its passes builds, for every node, the path that
// names it (services.app.environment.KEY); a file of a few kilobytes can
// ask it for gigabytes and minutes either way. The bounds are judged on
// the parsed tree, each node's cost counted once, before any loader
// expands anything.
const (
	// maxYAMLNodes: far more than any product's compose file holds (the
	// shipped ones hold at most 30), and what compose-go validates in
	// about a second (0.35 s for a flat list of 9,900 here; 100,000 took
	// 4 s flat and 10 s nested, every second of it deaf to Ctrl-C).
	maxYAMLNodes = 10_000
	// maxYAMLValueBytes bounds the text of the scalars, keys included,
	// aliases expanded. It is the file size limit: a file without aliases
	// never reaches it, and aliases cannot make a file cost more than the
	// largest file a template may hold.
	maxYAMLValueBytes = maxFileBytes
	// maxYAMLPathBytes bounds the paths compose-go builds, summed over
	// the nodes: at most 8 MiB, so long keys nested deep cost no more than
	// a largest file's values do. A product's compose file sums to tens
	// of kilobytes.
	maxYAMLPathBytes = maxFileBytes
	// maxYAMLDepth bounds how deep collections nest (the document counts
	// as one level, so services.app.healthcheck.test is five). compose-go
	// splits each node's path into its parts on every pass, once per rule
	// it matches, so its cost grows with nodes times depth: 2,800 nested
	// lists in 5.6 KB took it 18 s. The shipped templates nest at most
	// six deep; 64 leaves room for any extension a product writes.
	maxYAMLDepth = 64
)

// yamlCost is what a subtree costs once its aliases are expanded: its
// nodes, the bytes of its scalars, and the bytes of the paths to its
// nodes counted from the subtree's root, and how deep its collections
// nest. Below a key of n bytes the paths grow by nodes*(n+1), so a
// subtree's cost does not depend on where an alias puts it, and each node
// is costed once.
type yamlCost struct {
	nodes, values, paths, depth int64
}

// over is a cost past every bound; an alias cycle costs that.
var over = yamlCost{maxYAMLNodes + 1, maxYAMLValueBytes + 1, maxYAMLPathBytes + 1, maxYAMLDepth + 1}

// add adds c's cost placed offset bytes below the root, saturating past
// the bounds so that no sum overflows. Depth is the deeper of the two:
// add puts c beside what a holds, and a collection adds its own level.
func (a yamlCost) add(c yamlCost, offset int64) yamlCost {
	return yamlCost{
		nodes:  min(a.nodes+c.nodes, over.nodes),
		values: min(a.values+c.values, over.values),
		paths:  min(a.paths+c.paths+c.nodes*offset, over.paths),
		depth:  max(a.depth, c.depth),
	}
}

// nested is c as the content of one more collection level.
func (c yamlCost) nested() yamlCost {
	c.depth = min(c.depth+1, over.depth)
	return c
}

// checkYAMLBounds refuses content that, its aliases expanded, is past
// maxYAMLNodes, maxYAMLValueBytes or maxYAMLPathBytes, naming the bound
// and what to change.
func checkYAMLBounds(content []byte) error {
	c, aliases := expandedCost(content)
	return c.err(aliases)
}

// expandedCost is what content costs once its aliases are expanded, and
// whether it has any. Every document of the stream counts, as compose-go
// loads each of them. Content the parser rejects is left to the loader,
// which says what is wrong with it; the documents before the bad one are
// counted by then.
func expandedCost(content []byte) (total yamlCost, aliases bool) {
	if least := leastNodes(content); least > maxYAMLNodes {
		return yamlCost{nodes: least}, false // refused before a parse that costs a GB
	}
	dec := yaml.NewDecoder(bytes.NewReader(content))
	memo := map[*yaml.Node]yamlCost{}
	var cost func(n *yaml.Node) yamlCost
	cost = func(n *yaml.Node) yamlCost {
		if n == nil {
			return yamlCost{}
		}
		if c, ok := memo[n]; ok {
			return c
		}
		memo[n] = over // until known: an alias back into n is a cycle
		var c yamlCost
		switch n.Kind {
		case yaml.ScalarNode:
			c = yamlCost{nodes: 1, values: int64(len(n.Value))}
		case yaml.AliasNode:
			// Expanded, an alias is a copy of what it names.
			aliases = true
			c = cost(n.Alias)
		case yaml.MappingNode:
			c.nodes = 1
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := cost(n.Content[i])
				offset := 1 + k.values // "." and the key
				c = c.add(k, offset)
				c = c.add(cost(n.Content[i+1]), offset)
			}
			c = c.nested()
		default: // documents, sequences
			c.nodes = 1
			for i, e := range n.Content {
				c = c.add(cost(e), int64(1+len(strconv.Itoa(i))))
			}
			c = c.nested()
		}
		memo[n] = c
		return c
	}
	for total.err(false) == nil {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			break // io.EOF, or the loader's to report
		}
		total = total.add(cost(&doc), 0)
	}
	return total, aliases
}

// err says which bound c is past, if any.
func (c yamlCost) err(aliases bool) error {
	expanded := ""
	if aliases {
		expanded = " once its aliases (*name) are expanded"
	}
	switch {
	case c.values > maxYAMLValueBytes:
		// Only aliases take a file past the file size limit.
		return fmt.Errorf("expands to more than %s of text through YAML aliases (anchors &name, aliases *name); a template's YAML file may expand to at most %s, its size limit: use fewer aliases or alias shorter values",
			mib(maxYAMLValueBytes), mib(maxYAMLValueBytes))
	case c.nodes > maxYAMLNodes:
		return fmt.Errorf("holds more than %d YAML nodes%s; a template's YAML file may hold at most %d: use fewer aliases or fewer entries",
			maxYAMLNodes, expanded, maxYAMLNodes)
	case c.depth > maxYAMLDepth:
		return fmt.Errorf("nests lists and mappings more than %d levels deep%s; a template's YAML file may nest at most %d: flatten it",
			maxYAMLDepth, expanded, maxYAMLDepth)
	case c.paths > maxYAMLPathBytes:
		return fmt.Errorf("nests long keys too deep: the paths naming its values (services.app.environment.KEY and the like) add up to more than %s%s; a template's YAML file may have at most %s of them: use shorter keys, nest less deeply, or alias less below long keys",
			mib(maxYAMLPathBytes), expanded, mib(maxYAMLPathBytes))
	}
	return nil
}

// mib writes n bytes, a whole number of MiB, as "8 MiB".
func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

// interpolationBudget bounds the text a load's interpolation makes: at
// most maxYAMLValueBytes over every value of compose.yml and the files it
// includes, as their own text is bounded. The text bounds are judged
// before interpolation, and a parameter's value can be as long as a file:
// each ${P} naming it copies it (a 91 KB compose file and a 1 MB default
// would have made 16 GB). compose-go interpolates one string at a time,
// in one goroutine.
type interpolationBudget struct{ left int64 }

func newInterpolationBudget() *interpolationBudget {
	return &interpolationBudget{left: maxYAMLValueBytes}
}

// errInterpolatedTooLarge is the refusal of a load whose values,
// interpolated, would pass the bound: the values given (or defaulted) are
// what make it so.
type errInterpolatedTooLarge struct{ name string }

func (e errInterpolatedTooLarge) Error() string {
	longest := ""
	if e.name != "" {
		longest = fmt.Sprintf(" (${%s} the longest of them)", e.name)
	}
	return fmt.Sprintf("interpolated, its values would come to more than %s: each ${NAME} copies its variable's value%s; a template's compose file may interpolate to at most %s: give shorter values, or name the long ones in fewer places",
		mib(maxYAMLValueBytes), longest, mib(maxYAMLValueBytes))
}

// refused reports whether take has refused a string.
func (b *interpolationBudget) refused() bool { return b.left < 0 }

// maxInterpolationDepth bounds how deep ${...} nest in one value
// (${A:-${B:-x}} is two). compose-go substitutes a default's text again
// for each level, so its time grows faster than the depth: 8,000 levels
// in 48 KB took it 32 s. A product nests two or three.
const maxInterpolationDepth = 16

// errInterpolationTooDeep refuses a value whose ${...} nest past
// maxInterpolationDepth: the template's text, not the values given.
type errInterpolationTooDeep struct{}

func (errInterpolationTooDeep) Error() string {
	return fmt.Sprintf("nests ${...} more than %d deep (${A:-${B:-...}}); a template's value may nest at most %d: nest fewer defaults", maxInterpolationDepth, maxInterpolationDepth)
}

// take reserves the most that interpolating s with m can make, before it
// is made: s itself, and for each variable s names (a default's own
// variables too), that variable's value. A value nested past
// maxInterpolationDepth is refused first.
func (b *interpolationBudget) take(s string, m func(string) (string, bool)) error {
	if interpolationDepth(s) > maxInterpolationDepth {
		b.left = -1 // refused: the load ends with this one error
		return errInterpolationTooDeep{}
	}
	n, longest, longestLen := int64(len(s)), "", -1
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			continue
		}
		if s[i+1] == '$' { // an escaped $
			i++
			continue
		}
		start := i + 1
		if s[start] == '{' {
			start++
		}
		end := start
		for end < len(s) && (s[end] == '_' || s[end] >= 'a' && s[end] <= 'z' || s[end] >= 'A' && s[end] <= 'Z' || s[end] >= '0' && s[end] <= '9') {
			end++
		}
		if name := s[start:end]; name != "" {
			if v, ok := m(name); ok {
				n += int64(len(v))
				if len(v) > longestLen {
					longest, longestLen = name, len(v)
				}
			}
		}
		i = end - 1
	}
	b.left -= n
	if b.left < 0 {
		return errInterpolatedTooLarge{name: longest}
	}
	return nil
}

// interpolationDepth is how deep ${ nest in s ($$ escapes a $).
func interpolationDepth(s string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '$':
			i++
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{':
			depth++
			deepest = max(deepest, depth)
			i++
		case s[i] == '}' && depth > 0:
			depth--
		}
	}
	return deepest
}
