package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/normsim/normsim/sim"
)

// Problem is one thing wrong with a scenario file, at a position.
type Problem struct {
	File string `json:"file"`
	Pos
	Message string `json:"message"`
}

func (p Problem) Error() string { return p.File + ":" + p.Pos.String() + ": " + p.Message }

// Problems are every problem found in one or more files, in file order. A
// non-empty Problems is an error.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Limits that keep a hostile or mistaken file from running forever.
const (
	MaxRepeat = 1000
	MaxSteps  = 1000
	// maxFaultNodes bounds the YAML nodes of one step's faults once aliases
	// are expanded.
	maxFaultNodes = 10000
)

// ParseFile reads and parses a scenario file.
func ParseFile(path string) ([]*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Problems{{File: path, Message: fmt.Sprintf("cannot read the scenario file: %v", errors.Unwrap(err))}}
	}
	return Parse(path, data)
}

// Parse parses the scenarios of a file: one per YAML document (documents
// are separated by ---). The error, when not nil, is Problems listing
// everything wrong, each with its line and column; unknown keys are
// problems.
func Parse(file string, data []byte) ([]*Scenario, error) {
	p := &parser{file: file}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*Scenario
	docs := 0
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p.syntax(err, data)
			break
		}
		docs++
		if len(doc.Content) == 0 || isNull(doc.Content[0]) {
			continue
		}
		if s := p.scenario(doc.Content[0], docs); s != nil {
			out = append(out, s)
		}
	}
	if len(p.probs) == 0 && len(out) == 0 {
		p.probs = append(p.probs, Problem{File: file, Pos: Pos{Line: 1, Column: 1},
			Message: "no scenario in the file; a scenario needs at least template and steps"})
	}
	if len(p.probs) > 0 {
		slices.SortStableFunc(p.probs, func(a, b Problem) int {
			if a.Line != b.Line {
				return a.Line - b.Line
			}
			return a.Column - b.Column
		})
		return nil, p.probs
	}
	if len(out) > 1 {
		names := map[string]Pos{}
		for _, s := range out {
			if at, dup := names[s.Name]; dup {
				p.probs = append(p.probs, Problem{File: file, Pos: s.Pos,
					Message: fmt.Sprintf("name: %q is already the name of the scenario at line %d; names must be unique within a file", s.Name, at.Line)})
			}
			names[s.Name] = s.Pos
		}
		if len(p.probs) > 0 {
			return nil, p.probs
		}
	}
	return out, nil
}

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntax turns a YAML syntax error into a problem at its line.
func (p *parser) syntax(err error, data []byte) {
	line, msg := splitYAMLError(err)
	if l := firstBadLine(data, msg); l > 0 {
		line = l
	}
	p.probs = append(p.probs, Problem{File: p.file, Pos: Pos{Line: max(line, 1)}, Message: "not valid YAML: " + msg})
}

func splitYAMLError(err error) (int, string) {
	msg := err.Error()
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return line, m[2]
	}
	return 0, strings.TrimPrefix(msg, "yaml: ")
}

// firstBadLine finds the line a syntax error is on. yaml.v3 reports the line
// where the enclosing block starts, which for a mis-indented step is the
// "steps:" line; the shortest prefix of the file that fails with the same
// message ends on the line at fault. A binary search finds it, assuming a
// prefix that fails goes on failing as lines are added (true of the errors
// this is for). 0 when that cannot be told.
func firstBadLine(data []byte, msg string) int {
	lines := splitLines(data)
	ends := make([]int, len(lines)) // ends[i] is where line i+1 ends
	n := 0
	for i, l := range lines {
		n += len(l)
		ends[i] = n
	}
	fails := func(k int) bool {
		dec := yaml.NewDecoder(bytes.NewReader(data[:ends[k-1]]))
		for {
			var doc yaml.Node
			err := dec.Decode(&doc)
			if err == nil {
				continue
			}
			if errors.Is(err, io.EOF) {
				return false
			}
			_, m := splitYAMLError(err)
			return m == msg
		}
	}
	if len(lines) == 0 || !fails(len(lines)) {
		return 0
	}
	lo, hi := 1, len(lines) // the answer is in [lo, hi]; hi fails
	for lo < hi {
		mid := lo + (hi-lo)/2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}

// splitLines splits after every line break YAML counts: \r\n, \r, \n,
// and the Unicode NEL, LS and PS.
func splitLines(data []byte) [][]byte {
	var out [][]byte
	start := 0
	for i := 0; i < len(data); {
		n := 0
		switch {
		case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
			n = 2
		case data[i] == '\r' || data[i] == '\n':
			n = 1
		case bytes.HasPrefix(data[i:], []byte("\u0085")):
			n = 2
		case bytes.HasPrefix(data[i:], []byte("\u2028")), bytes.HasPrefix(data[i:], []byte("\u2029")):
			n = 3
		}
		if n == 0 {
			i++
			continue
		}
		i += n
		out = append(out, data[start:i])
		start = i
	}
	if start < len(data) {
		out = append(out, data[start:])
	}
	return out
}

type parser struct {
	file  string
	probs Problems
}

func (p *parser) errf(n *yaml.Node, format string, args ...any) {
	p.probs = append(p.probs, Problem{File: p.file, Pos: Pos{Line: n.Line, Column: n.Column}, Message: fmt.Sprintf(format, args...)})
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		if n.Alias == nil {
			break
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// describe names what a node is, for "got ..." in messages.
func describe(n *yaml.Node) string {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing"
		case "!!str":
			return strconv.Quote(n.Value)
		}
		return n.Value
	}
	return "an alias"
}

// field is one key of a mapping.
type field struct {
	key  *yaml.Node
	val  *yaml.Node
	name string
}

// mapping returns the keys of a mapping node by name. Unknown and repeated
// keys are problems (reported here); ok is false when n is not a mapping.
func (p *parser) mapping(n *yaml.Node, what string, allowed ...string) (map[string]field, bool) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		p.errf(n, "%s: must be a mapping of %s; got %s", what, strings.Join(allowed, ", "), describe(n))
		return nil, false
	}
	out := map[string]field{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errf(k, "%s: keys must be plain words; got %s", what, describe(k))
			continue
		}
		if prev, dup := out[k.Value]; dup {
			p.errf(k, "%s: key %q is repeated (first at line %d)", what, k.Value, prev.key.Line)
			continue
		}
		if !slices.Contains(allowed, k.Value) {
			p.errf(k, "%s: unknown key %q%s; allowed: %s", what, k.Value, suggest(k.Value, allowed), strings.Join(allowed, ", "))
			continue
		}
		out[k.Value] = field{key: k, val: v, name: k.Value}
	}
	return out, true
}

// suggest offers the allowed key closest to a misspelt one.
func suggest(got string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := editDistance(strings.ToLower(got), strings.ToLower(a)); d < bestD {
			best, bestD = a, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// str reads a scalar as text. Numbers and booleans are taken as written.
func (p *parser) str(f field, what string) (string, bool) {
	n := resolve(f.val)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errf(n, "%s: must be text; got %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}

// word reads a non-empty scalar without spaces or slashes (a node, alias or
// template name).
func (p *parser) word(f field, what string) (string, bool) {
	s, ok := p.str(f, what)
	if !ok {
		return "", false
	}
	if s == "" || strings.ContainsAny(s, " /\t\n") {
		p.errf(resolve(f.val), "%s: must be a non-empty name without spaces or slashes; got %q", what, s)
		return "", false
	}
	return s, true
}

func (p *parser) enum(f field, what string, values []string) (string, bool) {
	s, ok := p.str(f, what)
	if !ok {
		return "", false
	}
	if !slices.Contains(values, s) {
		p.errf(resolve(f.val), "%s: must be one of %s; got %q%s", what, strings.Join(values, ", "), s, suggest(s, values))
		return "", false
	}
	return s, true
}

func (p *parser) runtime(f field, what string) (string, bool) {
	s, ok := p.str(f, what)
	if !ok {
		return "", false
	}
	if s == sim.RuntimeExternal {
		p.errf(resolve(f.val), "%s: external is not for ci: it waits for a job you start yourself; use process or docker", what)
		return "", false
	}
	if !slices.Contains(Runtimes, s) {
		p.errf(resolve(f.val), "%s: must be process or docker; got %q", what, s)
		return "", false
	}
	return s, true
}

func (p *parser) boolean(f field, what string) (bool, bool) {
	n := resolve(f.val)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.errf(n, "%s: must be true or false; got %s", what, describe(n))
		return false, false
	}
	b, err := strconv.ParseBool(n.Value)
	if err != nil {
		// YAML 1.1 spellings yaml.v3 also tags !!bool.
		b = slices.Contains([]string{"y", "Y", "yes", "Yes", "YES", "on", "On", "ON"}, n.Value)
	}
	return b, true
}

func (p *parser) integer(f field, what string, lo, hi int) (int, bool) {
	n := resolve(f.val)
	v, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil {
		p.errf(n, "%s: must be a whole number; got %s", what, describe(n))
		return 0, false
	}
	if v < lo || v > hi {
		p.errf(n, "%s: must be between %d and %d; got %d", what, lo, hi, v)
		return 0, false
	}
	return v, true
}

func (p *parser) number(f field, what string) (float64, bool) {
	n := resolve(f.val)
	v, err := strconv.ParseFloat(n.Value, 64)
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		p.errf(n, "%s: must be a number of milliseconds; got %s", what, describe(n))
		return 0, false
	}
	if v < 0 {
		p.errf(n, "%s: must not be negative; got %s", what, n.Value)
		return 0, false
	}
	return v, true
}

// duration reads a positive duration: a Go duration string ("5s", "500ms")
// or a number of milliseconds, as the API takes them.
// timeouts reads a mapping of phase names (sim.TimeoutNames) to
// durations, as a scenario's or a migrate step's timeouts.
func (p *parser) timeouts(g field, what string) sim.Timeouts {
	var t sim.Timeouts
	if tm, ok := p.mapping(g.val, what, timeoutKeys...); ok {
		for k, h := range tm {
			if d, ok := p.duration(h, what+"."+k); ok {
				f, _ := t.Field(k) // the keys were checked against the names
				*f = sim.Duration(d)
			}
		}
	}
	return t
}

func (p *parser) duration(f field, what string) (time.Duration, bool) {
	n := resolve(f.val)
	bad := func() (time.Duration, bool) {
		p.errf(n, "%s: must be a positive duration like \"5s\" or \"500ms\", or a number of milliseconds; got %s", what, describe(n))
		return 0, false
	}
	if n.Kind != yaml.ScalarNode {
		return bad()
	}
	var d time.Duration
	switch n.Tag {
	case "!!int", "!!float":
		ms, err := strconv.ParseFloat(n.Value, 64)
		if err != nil || math.IsNaN(ms) || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
			return bad()
		}
		d = time.Duration(ms * float64(time.Millisecond))
	case "!!str":
		v, err := time.ParseDuration(n.Value)
		if err != nil {
			return bad()
		}
		d = v
	default:
		return bad()
	}
	if d <= 0 {
		return bad()
	}
	// The API's bound on a phase: longer is a typo, and would park a CI
	// job until someone kills it.
	if d > sim.MaxTimeout {
		p.errf(n, "%s: %s is longer than normsim waits (%s); give at most 24h", what, d, sim.MaxTimeout)
		return 0, false
	}
	return d, true
}

// params reads a mapping of parameter names to values; values are taken as
// written (RATE: 100 is "100").
func (p *parser) params(f field, what string) (map[string]string, bool) {
	n := resolve(f.val)
	if n.Kind != yaml.MappingNode {
		p.errf(n, "%s: must be a mapping of parameter names to values; got %s", what, describe(n))
		return nil, false
	}
	out := map[string]string{}
	ok := true
	lines := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			p.errf(k, "%s: parameter names must be plain words; got %s", what, describe(k))
			ok = false
			continue
		}
		if l, dup := lines[k.Value]; dup {
			p.errf(k, "%s: parameter %q is repeated (first at line %d)", what, k.Value, l)
			ok = false
			continue
		}
		lines[k.Value] = k.Line
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			p.errf(v, "%s.%s: must be a value (text, number or boolean); got %s", what, k.Value, describe(v))
			ok = false
			continue
		}
		out[k.Value] = v.Value
	}
	return out, ok
}

// Scenario keys.
var (
	scenarioKeys = []string{"name", "description", "template", "templates", "params", "runtime", "nodes", "repeat", "timeouts", "steps"}
	stepKeys     = []string{"name", "launch", "wait", "migrate", "expect"}
	launchKeys   = []string{"node", "as", "template", "runtime", "params", "until", "timeout"}
	waitKeys     = []string{"instance", "connected", "running", "timeout"}
	migrateKeys  = []string{"instance", "to", "strategy", "runtime", "timeouts", "faults", "timeout"}
	timeoutKeys  = sim.TimeoutNames()
	expectKeys   = []string{"state", "phase", "reason", "seam", "maxGapMs", "minOverlapMs", "maxTotalMs", "keyframeAtJoin", "mediaDefects", "applied", "failed", "atFault", "judgement", "error"}
	untils       = []string{UntilConnected, UntilRunning, UntilNone}
	strategies   = []string{string(sim.Handover), string(sim.StopThenStart), string(sim.Overlap)}
)

func (p *parser) scenario(root *yaml.Node, doc int) *Scenario {
	before := len(p.probs)
	m, ok := p.mapping(root, "scenario", scenarioKeys...)
	if !ok {
		return nil
	}
	root = resolve(root)
	s := &Scenario{File: p.file, Pos: Pos{Line: root.Line, Column: root.Column}, Repeat: 1, Nodes: []string{"a", "b"}}
	base := strings.TrimSuffix(filepath.Base(p.file), filepath.Ext(p.file))
	s.Name = base
	if doc > 1 {
		s.Name = fmt.Sprintf("%s #%d", base, doc)
	}
	if f, ok := m["name"]; ok {
		if v, ok := p.str(f, "name"); ok {
			if strings.TrimSpace(v) == "" {
				p.errf(resolve(f.val), "name: must not be empty")
			} else {
				s.Name = v
			}
		}
	}
	if f, ok := m["description"]; ok {
		s.Description, _ = p.str(f, "description")
	}
	if f, ok := m["template"]; ok {
		s.Template, _ = p.word(f, "template")
		s.TemplatePos = Pos{Line: resolve(f.val).Line, Column: resolve(f.val).Column}
	} else {
		p.errf(root, "scenario: template is required (the product template to launch, e.g. template: counter)")
	}
	if f, ok := m["templates"]; ok {
		s.TemplateDirs = p.templateDirs(f)
	}
	if f, ok := m["params"]; ok {
		s.Params, _ = p.params(f, "params")
	}
	if f, ok := m["runtime"]; ok {
		s.Runtime, _ = p.runtime(f, "runtime")
	}
	if f, ok := m["nodes"]; ok {
		s.Nodes = p.nodes(f)
	}
	if f, ok := m["repeat"]; ok {
		if v, ok := p.integer(f, "repeat", 1, MaxRepeat); ok {
			s.Repeat = v
		}
	}
	if f, ok := m["timeouts"]; ok {
		s.Timeouts = p.timeouts(f, "timeouts")
	}
	if f, ok := m["steps"]; ok {
		s.Steps = p.steps(f, s)
		for _, st := range s.Steps {
			if st.Migrate != nil {
				// A step's own timeouts win over the scenario's.
				st.Migrate.Timeouts = st.Migrate.Timeouts.Over(s.Timeouts)
			}
		}
	} else {
		p.errf(root, "scenario: steps is required (launch, wait and migrate steps)")
	}
	if len(p.probs) > before {
		return nil
	}
	return s
}

// templateDirs reads templates: a list of directories, relative to the
// scenario file, each of which must exist.
func (p *parser) templateDirs(f field) []string {
	n := resolve(f.val)
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.errf(n, "templates: must be a non-empty list of template directories, relative to this file, e.g. [../templates]; got %s", describe(n))
		return nil
	}
	var out []string
	for i, c := range n.Content {
		at := fmt.Sprintf("templates[%d]", i)
		d, ok := p.str(field{val: c}, at)
		if !ok {
			continue
		}
		if strings.TrimSpace(d) == "" {
			p.errf(resolve(c), "%s: must not be empty", at)
			continue
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(filepath.Dir(p.file), d)
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			p.errf(resolve(c), "%s: %s is not a directory", at, d)
			continue
		}
		out = append(out, d)
	}
	return out
}

func (p *parser) nodes(f field) []string {
	n := resolve(f.val)
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.errf(n, "nodes: must be a non-empty list of node names, e.g. [a, b]; got %s", describe(n))
		return nil
	}
	var out []string
	for i, c := range n.Content {
		name, ok := p.word(field{val: c}, fmt.Sprintf("nodes[%d]", i))
		if !ok {
			continue
		}
		if slices.Contains(out, name) {
			p.errf(resolve(c), "nodes[%d]: node %q is listed twice", i, name)
			continue
		}
		out = append(out, name)
	}
	return out
}

// stepState tracks the jobs the steps so far launched, to check references.
type stepState struct {
	jobs map[string]int // alias → line of its launch
	last string
}

func (p *parser) steps(f field, s *Scenario) []Step {
	n := resolve(f.val)
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.errf(n, "steps: must be a non-empty list of steps (launch, wait, migrate); got %s", describe(n))
		return nil
	}
	if len(n.Content) > MaxSteps {
		p.errf(n, "steps: at most %d steps; got %d", MaxSteps, len(n.Content))
		return nil
	}
	st := &stepState{jobs: map[string]int{}}
	var out []Step
	for i, c := range n.Content {
		if step, ok := p.step(c, fmt.Sprintf("steps[%d]", i), s, st); ok {
			out = append(out, step)
		}
	}
	return out
}

func (p *parser) step(n *yaml.Node, what string, s *Scenario, st *stepState) (Step, bool) {
	before := len(p.probs)
	n = resolve(n)
	m, ok := p.mapping(n, what, stepKeys...)
	if !ok {
		return Step{}, false
	}
	step := Step{Pos: Pos{Line: n.Line, Column: n.Column}}
	var action *field
	for _, k := range []string{KindLaunch, KindWait, KindMigrate} {
		f, ok := m[k]
		if !ok {
			continue
		}
		if action != nil {
			p.errf(f.key, "%s: a step does one thing; this one has both %s and %s (split it into two steps)", what, action.name, k)
			continue
		}
		action = &f
	}
	if action == nil {
		p.errf(n, "%s: must have one of launch, wait or migrate", what)
		return Step{}, false
	}
	if f, ok := m["name"]; ok {
		step.Name, _ = p.str(f, what+".name")
	}
	at := what + "." + action.name
	switch action.name {
	case KindLaunch:
		step.Launch = p.launch(*action, at, s, st)
	case KindWait:
		step.Wait = p.wait(*action, at, st)
	case KindMigrate:
		step.Migrate = p.migrate(*action, at, s, st)
	}
	if f, ok := m["expect"]; ok {
		if action.name != KindMigrate {
			p.errf(f.key, "%s.expect: expectations belong to a migrate step; this step is a %s", what, action.name)
		} else {
			step.Expect = p.expect(f, what+".expect")
		}
	} else if action.name == KindMigrate {
		step.Expect = &Expect{State: sim.MigrationCompleted}
	}
	if len(p.probs) > before {
		return Step{}, false
	}
	if step.Name == "" {
		step.Name = defaultName(step, s)
	}
	return step, true
}

// defaultName says what a step does, for reports.
func defaultName(step Step, s *Scenario) string {
	switch {
	case step.Launch != nil:
		l := step.Launch
		tmpl := l.Template
		if tmpl == "" {
			tmpl = s.Template
		}
		name := fmt.Sprintf("launch %s on %s", tmpl, l.Node)
		if l.asGiven {
			name += " as " + l.As
		}
		return name
	case step.Wait != nil:
		w := step.Wait
		switch {
		case w.Sleep > 0:
			return "wait " + w.Sleep.String()
		case w.Connected:
			return "wait until " + w.Job + " is connected"
		}
		return "wait until " + w.Job + " is running"
	}
	m := step.Migrate
	name := "migrate"
	if m.jobGiven {
		name += " " + m.Job
	}
	if m.To != "" {
		name += " to " + m.To
	}
	if m.Strategy != "" {
		name += " (" + m.Strategy + ")"
	}
	return name
}

func (p *parser) node(f field, what string, s *Scenario) (string, bool) {
	name, ok := p.word(f, what)
	if !ok {
		return "", false
	}
	if len(s.Nodes) == 0 {
		return name, true // nodes itself was refused; nothing to hold it to
	}
	if !slices.Contains(s.Nodes, name) {
		p.errf(resolve(f.val), "%s: node %q is not one of the scenario's nodes (%s); list it in nodes", what, name, strings.Join(s.Nodes, ", "))
		return "", false
	}
	return name, true
}

// job resolves the instance key of wait and migrate: a launched alias, by
// default the job launched last.
func (p *parser) job(m map[string]field, n *yaml.Node, what string, st *stepState) string {
	if f, ok := m["instance"]; ok {
		name, ok := p.word(f, what+".instance")
		if !ok {
			return ""
		}
		if _, known := st.jobs[name]; !known {
			names := make([]string, 0, len(st.jobs))
			for k := range st.jobs {
				names = append(names, k)
			}
			slices.Sort(names)
			known := "no launch step comes before it"
			if len(names) > 0 {
				known = "launched so far: " + strings.Join(names, ", ")
			}
			p.errf(resolve(f.val), "%s.instance: no earlier launch step is named %q (as: %s); %s", what, name, name, known)
			return ""
		}
		return name
	}
	if st.last == "" {
		p.errf(n, "%s: there is no instance yet; put a launch step before it", what)
	}
	return st.last
}

func (p *parser) launch(f field, what string, s *Scenario, st *stepState) *Launch {
	l := &Launch{Until: UntilConnected, Timeout: 60 * time.Second}
	if len(s.Nodes) > 0 {
		l.Node = s.Nodes[0]
	}
	var m map[string]field
	if !isNull(f.val) {
		var ok bool
		if m, ok = p.mapping(f.val, what, launchKeys...); !ok {
			return nil
		}
	}
	if g, ok := m["node"]; ok {
		l.Node, _ = p.node(g, what+".node", s)
	}
	if g, ok := m["template"]; ok {
		l.Template, _ = p.word(g, what+".template")
		l.TemplatePos = Pos{Line: resolve(g.val).Line, Column: resolve(g.val).Column}
	}
	if g, ok := m["runtime"]; ok {
		l.Runtime, _ = p.runtime(g, what+".runtime")
	}
	if g, ok := m["params"]; ok {
		l.Params, _ = p.params(g, what+".params")
	}
	if g, ok := m["until"]; ok {
		l.Until, _ = p.enum(g, what+".until", untils)
	}
	if g, ok := m["timeout"]; ok {
		l.Timeout, _ = p.duration(g, what+".timeout")
	}
	if g, ok := m["as"]; ok {
		name, ok := p.word(g, what+".as")
		switch {
		case !ok:
		case !validAlias(name):
			p.errf(resolve(g.val), "%s.as: must start with a letter and hold only letters, digits, - and _; got %q", what, name)
		case st.jobs[name] != 0:
			p.errf(resolve(g.val), "%s.as: %q already names the job launched at line %d", what, name, st.jobs[name])
		default:
			l.As, l.asGiven = name, true
		}
	} else {
		l.As = "job"
		for i := 2; st.jobs[l.As] != 0; i++ {
			l.As = fmt.Sprintf("job%d", i)
		}
	}
	if l.As != "" {
		st.jobs[l.As] = resolve(f.key).Line
		st.last = l.As
	}
	return l
}

func (p *parser) wait(f field, what string, st *stepState) *Wait {
	n := resolve(f.val)
	if n.Kind == yaml.ScalarNode {
		d, ok := p.duration(f, what)
		if !ok {
			return nil
		}
		return &Wait{Sleep: d}
	}
	m, ok := p.mapping(n, what, waitKeys...)
	if !ok {
		return nil
	}
	w := &Wait{Timeout: 60 * time.Second}
	for _, k := range []string{"connected", "running"} {
		g, ok := m[k]
		if !ok {
			continue
		}
		if v, ok := p.boolean(g, what+"."+k); ok && !v {
			p.errf(resolve(g.val), "%s.%s: only true makes sense (wait until the instance is %s); remove it", what, k, k)
		} else if k == "connected" {
			w.Connected = v
		} else {
			w.Running = v
		}
	}
	if _, c := m["connected"]; !c {
		if _, r := m["running"]; !r {
			p.errf(n, "%s: say what to wait for: connected: true or running: true (or write a duration, e.g. wait: 500ms)", what)
		}
	}
	if g, ok := m["timeout"]; ok {
		w.Timeout, _ = p.duration(g, what+".timeout")
	}
	w.Job = p.job(m, n, what, st)
	return w
}

func (p *parser) migrate(f field, what string, s *Scenario, st *stepState) *Migrate {
	mg := &Migrate{}
	var m map[string]field
	n := resolve(f.val)
	if !isNull(n) {
		var ok bool
		if m, ok = p.mapping(n, what, migrateKeys...); !ok {
			return nil
		}
	} else {
		n = resolve(f.key)
	}
	mg.Job = p.job(m, n, what, st)
	_, mg.jobGiven = m["instance"]
	if g, ok := m["to"]; ok {
		mg.To, _ = p.node(g, what+".to", s)
	}
	if g, ok := m["strategy"]; ok {
		mg.Strategy, _ = p.enum(g, what+".strategy", strategies)
	}
	if g, ok := m["runtime"]; ok {
		mg.Runtime, _ = p.runtime(g, what+".runtime")
	}
	if g, ok := m["timeout"]; ok {
		mg.Timeout, _ = p.duration(g, what+".timeout")
	}
	if g, ok := m["timeouts"]; ok {
		mg.Timeouts = p.timeouts(g, what+".timeouts")
	}
	if g, ok := m["faults"]; ok {
		mg.Faults = p.faults(g, what+".faults")
	}
	return mg
}

// faults reads the faults as JSON objects, checking only that each names a
// kind: the API judges the rest, so new kinds need no change here.
func (p *parser) faults(f field, what string) []json.RawMessage {
	n := resolve(f.val)
	if n.Kind != yaml.SequenceNode {
		p.errf(n, "%s: must be a list of faults, e.g. [{kind: target-fail-start}]; got %s", what, describe(n))
		return nil
	}
	var out []json.RawMessage
	budget := maxFaultNodes
	for i, c := range n.Content {
		at := fmt.Sprintf("%s[%d]", what, i)
		c = resolve(c)
		if c.Kind != yaml.MappingNode {
			p.errf(c, "%s: must be a mapping with at least kind; got %s", at, describe(c))
			continue
		}
		v, err := toJSONValue(c, &budget)
		if err != nil {
			p.errf(c, "%s: %v", at, err)
			continue
		}
		obj := v.(map[string]any)
		if k, ok := obj["kind"].(string); !ok || k == "" {
			p.errf(c, "%s: kind is required (the fault to inject, e.g. kind: target-fail-start)", at)
			continue
		}
		b, err := json.Marshal(obj)
		if err != nil {
			p.errf(c, "%s: cannot be sent as JSON: %v", at, err)
			continue
		}
		out = append(out, b)
	}
	return out
}

// toJSONValue converts a YAML node to what encoding/json marshals, within a
// budget of nodes so aliases cannot blow it up.
func toJSONValue(n *yaml.Node, budget *int) (any, error) {
	n = resolve(n)
	if *budget--; *budget < 0 {
		return nil, errors.New("too large (aliases expand to too many values)")
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: keys must be plain words; got %s", k.Line, describe(k))
			}
			if _, dup := out[k.Value]; dup {
				return nil, fmt.Errorf("line %d: key %q is repeated", k.Line, k.Value)
			}
			v, err := toJSONValue(n.Content[i+1], budget)
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		return out, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := toJSONValue(c, budget)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			return n.Value == "true" || n.Value == "True" || n.Value == "TRUE", nil
		case "!!int":
			if v, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
				return v, nil
			}
		case "!!float":
			if v, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsInf(v, 0) && !math.IsNaN(v) {
				return v, nil
			}
			return nil, fmt.Errorf("line %d: %s is not a number JSON can carry", n.Line, n.Value)
		}
		return n.Value, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML value", n.Line)
}

func (p *parser) expect(f field, what string) *Expect {
	m, ok := p.mapping(f.val, what, expectKeys...)
	if !ok {
		return nil
	}
	e := &Expect{}
	if g, ok := m["state"]; ok {
		s, _ := p.enum(g, what+".state", States)
		e.State = sim.MigrationState(s)
	}
	if g, ok := m["phase"]; ok {
		e.Phase, _ = p.enum(g, what+".phase", sim.PhaseNames())
	}
	if g, ok := m["reason"]; ok {
		e.Reason, _ = p.str(g, what+".reason")
	}
	if g, ok := m["seam"]; ok {
		e.Seam, _ = p.enum(g, what+".seam", Seams)
	}
	for k, dst := range map[string]**float64{"maxGapMs": &e.MaxGapMs, "minOverlapMs": &e.MinOverlapMs, "maxTotalMs": &e.MaxTotalMs} {
		if g, ok := m[k]; ok {
			if v, ok := p.number(g, what+"."+k); ok {
				*dst = &v
			}
		}
	}
	for k, dst := range map[string]**[]string{"applied": &e.Applied, "failed": &e.Failed} {
		if g, ok := m[k]; ok {
			if ids, ok := p.ids(g, what+"."+k); ok {
				*dst = &ids
			}
		}
	}
	if g, ok := m["keyframeAtJoin"]; ok {
		if v, ok := p.boolean(g, what+".keyframeAtJoin"); ok {
			e.KeyframeAtJoin = &v
		}
	}
	if g, ok := m["mediaDefects"]; ok {
		e.MediaDefects, _ = p.mediaChecks(g, what+".mediaDefects")
	}
	if g, ok := m["atFault"]; ok {
		e.AtFault, _ = p.enum(g, what+".atFault", Sides)
	}
	if g, ok := m["judgement"]; ok {
		e.Judgement, _ = p.enum(g, what+".judgement", Grades)
	}
	if g, ok := m["error"]; ok {
		e.Error, _ = p.integer(g, what+".error", 400, 599)
		for _, k := range []string{"state", "phase", "seam", "maxGapMs", "minOverlapMs", "maxTotalMs", "keyframeAtJoin", "mediaDefects", "applied", "failed", "atFault", "judgement"} {
			if h, ok := m[k]; ok {
				p.errf(h.key, "%s.%s: with error the request is refused and no migration runs, so there is no %s to check; remove one of them", what, k, k)
			}
		}
		return e
	}
	if e.State == "" {
		e.State = sim.MigrationCompleted
	}
	if g, ok := m["phase"]; ok && e.State == sim.MigrationCompleted {
		p.errf(g.key, "%s.phase: is where an aborted, failed or refused migration ended; a completed one went through every phase (set state)", what)
	}
	if e.State == sim.MigrationAborted || e.State == sim.MigrationRefused {
		for _, k := range []string{"seam", "maxGapMs", "minOverlapMs", "keyframeAtJoin", "mediaDefects"} {
			h, ok := m[k]
			switch {
			case !ok:
			case e.State == sim.MigrationAborted && k == "seam" && e.Seam == sim.VerdictOverlap:
				// A rolled-back target that produced is judged (overlap,
				// the target at fault); there is no other seam to expect.
			case e.State == sim.MigrationAborted && k == "seam":
				p.errf(h.key, "%s.seam: an aborted migration has a seam only when its target produced beside the source (overlap); expect seam: overlap, or completed or failed, or remove seam", what)
			default:
				p.errf(h.key, "%s.%s: %s migration leaves the source running and measures no gap or overlap; expect completed or failed, or remove %s", what, k, sim.WithArticle(string(e.State)), k)
			}
		}
		for _, k := range []string{"applied", "failed"} {
			if h, ok := m[k]; ok {
				p.errf(h.key, "%s.%s: %s migration ends before the point of no return, so its target never sends target-applied; expect completed or failed, or remove %s", what, k, sim.WithArticle(string(e.State)), k)
			}
		}
	}
	if h, ok := m["minOverlapMs"]; ok && e.Seam != "" && e.Seam != sim.VerdictOverlap {
		p.errf(h.key, "%s.minOverlapMs: only an overlap seam has an overlap; seam is %s", what, e.Seam)
	}
	if h, ok := m["maxGapMs"]; ok && e.Seam == sim.VerdictOverlap {
		p.errf(h.key, "%s.maxGapMs: an overlap seam has no gap; use minOverlapMs", what)
	}
	return e
}

// mediaChecks reads a list of media checks, each one of sim.MediaChecks.
func (p *parser) mediaChecks(f field, what string) ([]string, bool) {
	n := resolve(f.val)
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.errf(n, "%s: must be a list of one or more media checks, e.g. [Continuity_count_error]; got %s", what, describe(n))
		return nil, false
	}
	var out []string
	ok := true
	for i, c := range n.Content {
		check, good := p.enum(field{val: c}, fmt.Sprintf("%s[%d]", what, i), sim.MediaChecks)
		switch {
		case !good:
			ok = false
		case slices.Contains(out, check):
			p.errf(resolve(c), "%s[%d]: %q is listed twice", what, i, check)
			ok = false
		default:
			out = append(out, check)
		}
	}
	return out, ok
}

// ids reads a list of participant ids, as target-applied names them;
// [] is a list too (none).
func (p *parser) ids(f field, what string) ([]string, bool) {
	n := resolve(f.val)
	if n.Kind != yaml.SequenceNode {
		p.errf(n, "%s: must be a list of participant ids, e.g. [overlay], or [] for none; got %s", what, describe(n))
		return nil, false
	}
	out := []string{}
	ok := true
	for i, c := range n.Content {
		at := fmt.Sprintf("%s[%d]", what, i)
		id, good := p.str(field{val: c}, at)
		switch {
		case !good:
			ok = false
		case id == "":
			p.errf(resolve(c), "%s: must not be empty", at)
			ok = false
		case slices.Contains(out, id):
			p.errf(resolve(c), "%s: %q is listed twice; the ids are a set", at, id)
			ok = false
		default:
			out = append(out, id)
		}
	}
	return out, ok
}

// validAlias reports whether name is a letter then up to 62 letters, digits,
// '_' or '-'. (Written out: as a regexp, the bounded repeat was most of
// the package's start-up cost, paid by every normsim command.)
func validAlias(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for i, c := range []byte(name) {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '_' || c == '-')) {
			return false
		}
	}
	return true
}
