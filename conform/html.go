package conform

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/normsim/normsim/sim"
)

// The HTML report is one file that needs nothing else: its style and its
// few lines of script are inline, and its Content-Security-Policy allows
// exactly those two (by hash) and no fetch of any kind, so it reads the
// same from a CI artifact opened over file:// offline, and a job's output
// that slipped through unescaped could not run or load anything.

var (
	//go:embed report.html.tmpl
	reportHTML string
	//go:embed report.css
	reportCSS string
	//go:embed report.js
	reportJS string

	// reportTmpl is parsed on first use: parsing it in the package's init
	// cost every normsim command, normsim up's start-up among them, 0.2 ms.
	reportTmpl = sync.OnceValue(func() *template.Template {
		return template.Must(template.New("report").Funcs(template.FuncMap{
			"add1":    func(i int) int { return i + 1 },
			"maxLogs": func() int { return MaxCaseLogLines },
		}).Parse(reportHTML))
	})
)

// cspHash is the CSP source that allows one inline element's exact text.
func cspHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// WriteHTML writes the report as one self-contained HTML page: a header
// with the run and its counts per grade, a table of every case grouped by
// section, and per case a section with what was expected and observed,
// each migration's timeline and the job's log lines; the chaos runs last.
func (r *Report) WriteHTML(w io.Writer) error {
	var buf bytes.Buffer
	if err := reportTmpl().Execute(&buf, r.htmlPage()); err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	_, err := buf.WriteTo(w)
	return err
}

type htmlPage struct {
	R        *Report
	Verdict  string
	CSP      string
	Style    template.CSS
	Script   template.JS
	Started  string
	Duration string
	Counts   []htmlCount
	Params   []labelled
	Groups   []htmlGroup
	Cases    []*htmlCase
	// Causes are cases of one grade that ended for one reason.
	Causes []htmlCause
	Chaos  *htmlChaos
}

type htmlCount struct {
	Grade Grade
	Class string
	N     int
}

type htmlCause struct {
	Grade Grade
	Class string
	Why   string
	Cases []*htmlCase
}

type htmlGroup struct {
	Name  string
	Cases []*htmlCase
}

type htmlCase struct {
	*Result
	Anchor     string
	Class      string
	Duration   string
	Started    string
	Observed   []labelled
	Moves      []htmlMove
	Migrations []htmlMigration
	Logs       []htmlLog
}

type htmlMove struct {
	N      int
	Words  string
	Faults string
}

type htmlMigration struct {
	M      *sim.Migration
	Title  string
	Fields []labelled
	Faults string
	// Tails are the last lines of each side a failed or aborted
	// migration carries, as text.
	Tails  string
	Events []htmlEvent
}

type htmlEvent struct {
	sim.MigrationEvent
	Offset  string
	At      string
	Frame   string
	Snippet string
	// Payload is the whole payload, indented, when Snippet had to cut it.
	Payload string
}

type htmlLog struct {
	sim.LogLine
	Time   string
	At     string
	Offset string
}

type htmlChaos struct {
	*ChaosReport
	Violations []htmlViolation
	Trials     []htmlTrial
}

type htmlViolation struct {
	*Violation
	Schedule  string
	Minimised string
	Trial     string
}

type htmlTrial struct {
	*Trial
	Anchor   string
	Class    string
	Moves    string
	States   string
	Broken   string
	Duration string
}

func (r *Report) htmlPage() *htmlPage {
	p := &htmlPage{
		R:        r,
		Verdict:  r.verdict(),
		Style:    template.CSS(reportCSS),
		Script:   template.JS(reportJS),
		Started:  clockText(r.StartedAt, "2006-01-02 15:04:05 MST"),
		Duration: sim.FormatMs(r.DurationMs),
	}
	p.CSP = "default-src 'none'; style-src " + cspHash(reportCSS) + "; script-src " + cspHash(reportJS) +
		"; img-src data:; base-uri 'none'; form-action 'none'"
	for _, c := range r.counts() {
		p.Counts = append(p.Counts, htmlCount{c.Grade, gradeClass(c.Grade), c.N})
	}
	for _, k := range sortedKeys(r.Params) {
		p.Params = append(p.Params, labelled{k, r.Params[k]})
	}
	for _, res := range r.ordered() {
		hc := htmlCaseOf(res)
		p.Cases = append(p.Cases, hc)
		if n := len(p.Groups); n == 0 || p.Groups[n-1].Name != res.Group {
			p.Groups = append(p.Groups, htmlGroup{Name: res.Group})
		}
		g := &p.Groups[len(p.Groups)-1]
		g.Cases = append(g.Cases, hc)
	}
	byResult := map[*Result]*htmlCase{}
	for _, hc := range p.Cases {
		byResult[hc.Result] = hc
	}
	for _, c := range Causes(r.ordered()) {
		hcause := htmlCause{Grade: c.Grade, Class: gradeClass(c.Grade), Why: c.Why}
		for _, res := range c.Results {
			hcause.Cases = append(hcause.Cases, byResult[res])
		}
		p.Causes = append(p.Causes, hcause)
	}
	if r.Chaos != nil {
		p.Chaos = htmlChaosOf(r.Chaos)
	}
	return p
}

// anchorUnsafe is what an element id made from a case ID must not hold.
var anchorUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func htmlCaseOf(res *Result) *htmlCase {
	hc := &htmlCase{
		Result:   res,
		Anchor:   "case-" + anchorUnsafe.ReplaceAllString(res.ID, "-"),
		Class:    gradeClass(res.Grade),
		Duration: sim.FormatMs(res.DurationMs),
		Started:  clockText(res.StartedAt, "15:04:05.000 MST"),
		Observed: observedFields(res.Observed),
	}
	for i, m := range res.Moves {
		words := scheduleWords(Schedule{Moves: []Move{m}})
		hc.Moves = append(hc.Moves, htmlMove{N: i + 1, Words: words, Faults: faultsJSON(m.Faults)})
	}
	for _, m := range res.Migrations {
		hc.Migrations = append(hc.Migrations, htmlMigrationOf(m))
	}
	for _, l := range res.Logs {
		hc.Logs = append(hc.Logs, htmlLog{
			LogLine: l,
			Time:    clockText(l.At, "15:04:05.000"),
			At:      l.At.UTC().Format(time.RFC3339Nano),
			Offset:  offsetText(l.At, res.StartedAt),
		})
	}
	return hc
}

func htmlMigrationOf(m *sim.Migration) htmlMigration {
	hm := htmlMigration{M: m, Title: migrationTitle(m)}
	if len(m.Faults) > 0 {
		hm.Faults = faultsJSON(m.Faults)
	}
	if m.Logs != nil {
		hm.Tails = sim.FormatLogTails(m.Logs.Tails)
	}
	end := func(e sim.MigrationEndpoint) string {
		if e.Instance == "" && e.Node == "" {
			return "—"
		}
		return fmt.Sprintf("%s on node %s", orNone(e.Instance), orNone(e.Node))
	}
	hm.Fields = []labelled{
		{"id", m.ID},
		{"source", end(m.Source)},
		{"target", end(m.Target)},
		{"state", string(m.State)},
		{"phase", orNone(string(m.Phase))},
		{"reason", orNone(m.Reason)},
	}
	if o := m.Output; o != nil {
		seam := o.Verdict
		if o.Lost > 0 || o.Duplicated > 0 {
			seam += fmt.Sprintf(" (%d lost, %d duplicated)", o.Lost, o.Duplicated)
		}
		if o.AtFault != "" {
			seam += ", at fault: " + o.AtFault
		}
		if o.Detail != "" {
			seam += ": " + o.Detail
		}
		hm.Fields = append(hm.Fields, labelled{"output seam", seam})
	}
	durs := []struct {
		name string
		ms   *float64
	}{{"total", m.Durations.TotalMs}, {"target ready", m.Durations.TargetReadyMs}, {"cutover", m.Durations.CutoverMs}}
	var ds []string
	for _, d := range durs {
		if d.ms != nil {
			ds = append(ds, d.name+" "+sim.FormatMs(*d.ms))
		}
	}
	if len(ds) > 0 {
		hm.Fields = append(hm.Fields, labelled{"durations", strings.Join(ds, ", ")})
	}
	if sim.AppliedReported(m) {
		// Whole, as every tool prints it: applied, failed with reasons, skewMs.
		hm.Fields = append(hm.Fields, labelled{"target-applied", sim.FormatResult(m.Result)})
	}
	for _, ev := range m.Events {
		he := htmlEvent{
			MigrationEvent: ev,
			Offset:         fmt.Sprintf("%.1f", msSince(ev.At, m.StartedAt)),
			At:             ev.At.UTC().Format(time.RFC3339Nano),
		}
		if f := ev.Frame; f != nil {
			he.Frame = fmt.Sprintf("%s %s %d B", f.Type, f.Direction, f.Size)
			he.Snippet = strings.TrimSpace(sim.PayloadSnippet(ev))
			if strings.HasSuffix(he.Snippet, "…") {
				he.Payload = indentJSON(f.Payload)
			}
		}
		hm.Events = append(hm.Events, he)
	}
	return hm
}

func htmlChaosOf(c *ChaosReport) *htmlChaos {
	hc := &htmlChaos{ChaosReport: c}
	runs := map[int]bool{}
	for _, t := range c.Trials {
		runs[t.Run] = true
		ht := htmlTrial{
			Trial:    t,
			Anchor:   fmt.Sprintf("chaos-run-%d", t.Run),
			Class:    gradeClass(GradePass),
			Moves:    scheduleWords(t.Schedule),
			States:   orNone(strings.Join(t.Observed.States, "; ")),
			Broken:   orNone(strings.Join(t.Broken, ", ")),
			Duration: sim.FormatMs(t.DurationMs),
		}
		if len(t.Broken) > 0 {
			ht.Class = gradeClass(GradeFail)
		}
		hc.Trials = append(hc.Trials, ht)
	}
	for _, v := range c.Violations {
		hv := htmlViolation{Violation: v, Schedule: scheduleJSON(v.Schedule), Minimised: scheduleJSON(v.Minimised)}
		if runs[v.Run] {
			hv.Trial = fmt.Sprintf("chaos-run-%d", v.Run)
		}
		hc.Violations = append(hc.Violations, hv)
	}
	return hc
}

// clockText is t in UTC in layout, "—" for a time never set.
func clockText(t time.Time, layout string) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(layout)
}

// offsetText is "+12.3 ms" (or "-4.0 ms") from start, "" when either is unset.
func offsetText(t, start time.Time) string {
	if t.IsZero() || start.IsZero() {
		return ""
	}
	ms := msSince(t, start)
	if ms < 0 { // a line the job printed just before the case began
		return sim.FormatMs(ms)
	}
	return "+" + sim.FormatMs(ms)
}

// indentJSON is a payload laid out for reading, or as it came when it is
// not JSON.
func indentJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
