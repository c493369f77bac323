// Package junit writes JUnit XML reports in the common junit-4 schema
// (the one Jenkins, GitLab, GitHub's test-report actions and most CI
// systems read): testsuites > testsuite > properties?, testcase* >
// skipped?, error?, failure?, system-out?. normsim ci and normsim conform
// both report through it, so a CI page shows them alike.
//
// Callers fill in names, times and bodies; Write counts the tests,
// failures, errors and skips from the cases, and drops what XML 1.0
// cannot carry (most control characters, invalid UTF-8) from every string,
// where encoding/xml would otherwise refuse the document or garble it.
package junit

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Report is a testsuites document.
type Report struct {
	Name string
	// Time is the whole run's duration.
	Time   time.Duration
	Suites []Suite
}

// Suite is one testsuite.
type Suite struct {
	Name       string
	Time       time.Duration
	Timestamp  time.Time
	Hostname   string
	Properties []Property
	Cases      []Case
	// SystemOut is the suite's own output (empty: none).
	SystemOut string
}

// Property is a name and value of a suite's properties.
type Property struct{ Name, Value string }

// Case is one testcase: it passed unless Skipped, Error or Failure is set.
type Case struct {
	Name, Classname string
	// File is where the case is defined (GitHub's and GitLab's reporters
	// link it); empty: no attribute.
	File string
	Time time.Duration
	// Skipped, when not empty, says why the case did not run.
	Skipped string
	// Error: the case could not be carried out.
	Error *Problem
	// Failure: the case ran and what it checked did not hold.
	Failure   *Problem
	SystemOut string
}

// Problem is an error or a failure: its one-line message, its type (the
// schema requires one: empty is written as "error" or "failure") and its
// multi-line body.
type Problem struct{ Message, Type, Text string }

// Write writes the report as JUnit XML.
func Write(w io.Writer, r Report) error {
	doc := XMLSuites{Name: safe(r.Name), Time: secs(r.Time)}
	for i, s := range r.Suites {
		xs := XMLSuite{Name: safe(s.Name), Time: secs(s.Time), Timestamp: s.Timestamp.UTC().Format("2006-01-02T15:04:05"),
			Hostname: safe(s.Hostname), ID: i, SystemOut: text(s.SystemOut)}
		if len(s.Properties) > 0 {
			xs.Properties = &XMLProps{}
			for _, p := range s.Properties {
				xs.Properties.Props = append(xs.Properties.Props, XMLProp{Name: safe(p.Name), Value: safe(p.Value)})
			}
		}
		for _, c := range s.Cases {
			xs.Tests++
			xc := XMLCase{Name: safe(c.Name), Classname: safe(c.Classname), File: safe(c.File), Time: secs(c.Time),
				Skipped: text(c.Skipped), Error: problem(c.Error, "error"), Failure: problem(c.Failure, "failure"), SystemOut: text(c.SystemOut)}
			switch {
			case c.Failure != nil:
				xs.Failures++
			case c.Error != nil:
				xs.Errors++
			case c.Skipped != "":
				xs.Skipped++
			}
			xs.Cases = append(xs.Cases, xc)
		}
		doc.Tests += xs.Tests
		doc.Failures += xs.Failures
		doc.Errors += xs.Errors
		doc.Suites = append(doc.Suites, xs)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// Parse reads a report as written, for tests that look into one.
func Parse(data []byte) (XMLSuites, error) {
	var doc XMLSuites
	err := xml.Unmarshal(data, &doc)
	return doc, err
}

// XMLSuites and the types below are the document as written.
type XMLSuites struct {
	XMLName  xml.Name   `xml:"testsuites"`
	Name     string     `xml:"name,attr"`
	Tests    int        `xml:"tests,attr"`
	Failures int        `xml:"failures,attr"`
	Errors   int        `xml:"errors,attr"`
	Time     string     `xml:"time,attr"`
	Suites   []XMLSuite `xml:"testsuite"`
}

type XMLSuite struct {
	Name       string    `xml:"name,attr"`
	Tests      int       `xml:"tests,attr"`
	Failures   int       `xml:"failures,attr"`
	Errors     int       `xml:"errors,attr"`
	Skipped    int       `xml:"skipped,attr"`
	Time       string    `xml:"time,attr"`
	Timestamp  string    `xml:"timestamp,attr"`
	Hostname   string    `xml:"hostname,attr,omitempty"`
	ID         int       `xml:"id,attr"`
	Properties *XMLProps `xml:"properties,omitempty"`
	Cases      []XMLCase `xml:"testcase"`
	SystemOut  *XMLText  `xml:"system-out,omitempty"`
}

type XMLProps struct {
	Props []XMLProp `xml:"property"`
}

type XMLProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type XMLCase struct {
	Name      string      `xml:"name,attr"`
	Classname string      `xml:"classname,attr"`
	File      string      `xml:"file,attr,omitempty"`
	Time      string      `xml:"time,attr"`
	Skipped   *XMLText    `xml:"skipped,omitempty"`
	Error     *XMLProblem `xml:"error,omitempty"`
	Failure   *XMLProblem `xml:"failure,omitempty"`
	SystemOut *XMLText    `xml:"system-out,omitempty"`
}

// XMLText is text kept as CDATA, so multi-line bodies stay readable.
type XMLText struct {
	Text string `xml:",cdata"`
}

type XMLProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",cdata"`
}

func problem(p *Problem, kind string) *XMLProblem {
	if p == nil {
		return nil
	}
	typ := p.Type
	if typ == "" {
		typ = kind
	}
	return &XMLProblem{Message: safe(p.Message), Type: safe(typ), Text: safe(p.Text)}
}

func text(s string) *XMLText {
	if s == "" {
		return nil
	}
	return &XMLText{Text: safe(s)}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// safe drops what XML 1.0 cannot carry at all (most control characters,
// invalid UTF-8): each becomes U+FFFD.
func safe(s string) string {
	ok := true
	for _, r := range s {
		if !xmlChar(r) {
			ok = false
			break
		}
	}
	if ok && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if xmlChar(r) {
			b.WriteRune(r)
		} else {
			b.WriteRune('\uFFFD')
		}
	}
	return b.String()
}

func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		(r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}
