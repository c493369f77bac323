// Package junittest checks a JUnit report the way CI systems read one:
// against the common junit-4 schema's rules (in Go, and with xmllint and
// junit-4.xsd where xmllint is installed), with the counts adding up.
package junittest

import (
	_ "embed"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

//go:embed junit-4.xsd
var schema []byte

// xnode is any XML element, for checking a report's structure.
type xnode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []xnode    `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n *xnode) attr(name string) (string, bool) {
	for _, a := range n.Attrs {
		if a.Name.Local == name && a.Name.Space == "" {
			return a.Value, true
		}
	}
	return "", false
}

// junitRule is what the junit-4 schema allows of an element: its required
// and optional attributes, and its children in sequence order (each name's
// rank; a child may not come after a child of a higher rank).
type junitRule struct {
	required, optional []string
	children           map[string]int
	single             []string // children that may appear at most once
	text               bool     // mixed or simple content
}

var junitRules = map[string]junitRule{
	"testsuites": {optional: []string{"name", "time", "tests", "failures", "disabled", "errors"}, children: map[string]int{"testsuite": 0}},
	"testsuite": {required: []string{"name", "tests", "failures", "errors", "skipped", "time"},
		optional: []string{"disabled", "timestamp", "hostname", "id", "package"},
		children: map[string]int{"properties": 0, "testcase": 1, "system-out": 2, "system-err": 3},
		single:   []string{"properties", "system-out", "system-err"}},
	"properties": {children: map[string]int{"property": 0}},
	"property":   {required: []string{"name", "value"}},
	// file is not in junit-4.xsd; it is the attribute the common readers
	// (GitLab, Jenkins, the GitHub report actions) link a case's source by.
	"testcase": {required: []string{"name", "classname", "time"}, optional: []string{"assertions", "status", "file"},
		children: map[string]int{"skipped": 0, "error": 1, "failure": 2, "system-out": 3, "system-err": 4},
		single:   []string{"skipped"}},
	"failure":    {required: []string{"message", "type"}, text: true},
	"error":      {required: []string{"message", "type"}, text: true},
	"skipped":    {text: true},
	"system-out": {text: true},
	"system-err": {text: true},
}

var (
	decimalRe  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	dateTimeRe = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$`)
)

// Check validates a report against the rules of the common junit-4
// schema, with the attributes normsim promises made required, and checks
// the counts add up.
func Check(data []byte) error {
	var root xnode
	if err := xml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("not well-formed XML: %w", err)
	}
	if root.XMLName.Local != "testsuites" {
		return fmt.Errorf("root is <%s>, want <testsuites>", root.XMLName.Local)
	}
	if err := checkElement(&root, "testsuites"); err != nil {
		return err
	}
	var tests, failures, errs int
	for i := range root.Nodes {
		s := &root.Nodes[i]
		name, _ := s.attr("name")
		var t, f, e, sk int
		for j := range s.Nodes {
			c := &s.Nodes[j]
			if c.XMLName.Local != "testcase" {
				continue
			}
			t++
			for _, k := range c.Nodes {
				switch k.XMLName.Local {
				case "failure":
					f++
				case "error":
					e++
				case "skipped":
					sk++
				}
			}
		}
		for attr, want := range map[string]int{"tests": t, "failures": f, "errors": e, "skipped": sk} {
			if got, _ := s.attr(attr); got != strconv.Itoa(want) {
				return fmt.Errorf("testsuite %q: %s=%q, but it holds %d", name, attr, got, want)
			}
		}
		tests, failures, errs = tests+t, failures+f, errs+e
	}
	for attr, want := range map[string]int{"tests": tests, "failures": failures, "errors": errs} {
		if got, ok := root.attr(attr); ok && got != strconv.Itoa(want) {
			return fmt.Errorf("testsuites: %s=%q, but the suites hold %d", attr, got, want)
		}
	}
	return nil
}

func checkElement(n *xnode, path string) error {
	name := n.XMLName.Local
	rule, ok := junitRules[name]
	if !ok {
		return fmt.Errorf("%s: element <%s> is not in the schema", path, name)
	}
	if n.XMLName.Space != "" {
		return fmt.Errorf("%s: element in namespace %q", path, n.XMLName.Space)
	}
	for _, a := range n.Attrs {
		if !slices.Contains(rule.required, a.Name.Local) && !slices.Contains(rule.optional, a.Name.Local) {
			return fmt.Errorf("%s: attribute %s is not allowed", path, a.Name.Local)
		}
	}
	for _, r := range rule.required {
		v, ok := n.attr(r)
		if !ok {
			return fmt.Errorf("%s: attribute %s is required", path, r)
		}
		switch r {
		case "tests", "failures", "errors", "skipped":
			if _, err := strconv.ParseUint(v, 10, 32); err != nil {
				return fmt.Errorf("%s: %s=%q is not a count", path, r, v)
			}
		case "time":
			if !decimalRe.MatchString(v) {
				return fmt.Errorf("%s: time=%q is not a decimal number of seconds", path, v)
			}
		}
	}
	if v, ok := n.attr("timestamp"); ok && !dateTimeRe.MatchString(v) {
		return fmt.Errorf("%s: timestamp=%q is not an xs:dateTime", path, v)
	}
	if !rule.text && strings.TrimSpace(n.Text) != "" {
		return fmt.Errorf("%s: text %q is not allowed here", path, n.Text)
	}
	if rule.text && len(n.Nodes) > 0 {
		return fmt.Errorf("%s: <%s> holds text only; found <%s>", path, name, n.Nodes[0].XMLName.Local)
	}
	if name == "properties" && len(n.Nodes) == 0 {
		return fmt.Errorf("%s: <properties> needs at least one <property>", path)
	}
	rank, seen := -1, map[string]int{}
	for i := range n.Nodes {
		c := &n.Nodes[i]
		r, ok := rule.children[c.XMLName.Local]
		if !ok {
			return fmt.Errorf("%s: <%s> may not hold <%s>", path, name, c.XMLName.Local)
		}
		if r < rank {
			return fmt.Errorf("%s: <%s> comes after an element the schema puts after it", path, c.XMLName.Local)
		}
		rank = r
		seen[c.XMLName.Local]++
		if seen[c.XMLName.Local] > 1 && slices.Contains(rule.single, c.XMLName.Local) {
			return fmt.Errorf("%s: more than one <%s>", path, c.XMLName.Local)
		}
		if err := checkElement(c, fmt.Sprintf("%s/%s[%d]", path, c.XMLName.Local, i)); err != nil {
			return err
		}
	}
	return nil
}

// RequireValid checks a report with Check and, where xmllint is
// installed, against junit-4.xsd.
func RequireValid(t testing.TB, data []byte) {
	t.Helper()
	if err := Check(data); err != nil {
		t.Fatalf("JUnit report is not valid: %v\n%s", err, data)
	}
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Log("xmllint not installed; checked the junit-4 rules in Go only")
		return
	}
	dir := t.TempDir()
	xsd := filepath.Join(dir, "junit-4.xsd")
	if err := os.WriteFile(xsd, schema, 0o644); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "report.xml")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(xmllint, "--noout", "--schema", xsd, f).CombinedOutput(); err != nil {
		t.Fatalf("xmllint --schema junit-4.xsd: %v\n%s\n%s", err, out, data)
	}
}
