package web

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/normsim/normsim/sim"
)

// The overview: nodes, their instances, the templates and their launch forms.

type overviewPage struct {
	pageBase
	Nodes     []nodeView
	Templates []templateView
	// Running are the first running migrations, of RunningTotal.
	Running      []*sim.Migration
	RunningTotal int
	// Conforming are the conformance runs running: their cases' instances
	// come and go on the nodes below.
	Conforming     []sim.ConformanceRun
	DefaultRuntime string
	Runtimes       []string
	NodeNames      []string
	Problem        string
}

type nodeView struct {
	sim.Node
	Capabilities []string
	// Instances are a page of the node's Total; Pager pages them.
	Instances []instanceRow
	Total     int
	Pager     pager
	Unknown   bool // instances on a node this normsim does not run
}

type instanceRow struct {
	sim.Instance
	// Migration is the running migration the instance takes part in, and
	// Side its side in it.
	Migration, Side string
}

type templateView struct {
	*sim.Template
	Allowed []sim.Strategy
	Params  []paramView
	// The launch form as submitted, when it is shown again with an error.
	Node, Runtime string
	LaunchError   string
	LaunchCode    string
}

type paramView struct {
	Name, Purpose, Type string
	ID                  string
	Input               string // number | text | password | select
	Step                string
	Min, Max            string
	Options             []string
	Value               string
	Required            bool
	Hint                string
	Error               string
}

// launchForm is a submitted launch form.
type launchForm struct {
	Template, Node, Runtime string
	Params                  map[string]string
	Err                     error
}

func (s *Server) overviewPage(w http.ResponseWriter, r *http.Request) {
	s.renderOverview(w, r, http.StatusOK, nil)
}

// renderOverview renders the overview. Each node's card shows a page of
// its instances, oldest first: page.NODE=N asks for a node's page N.
func (s *Server) renderOverview(w http.ResponseWriter, r *http.Request, status int, lf *launchForm) {
	ctx := r.Context()
	p := overviewPage{pageBase: s.base(r, "Overview", "overview", "overview", "/"), DefaultRuntime: s.svc.DefaultRuntime()}
	p.Runtimes = runtimeChoices(s.svc.DefaultRuntime(), s.svc.Runtimes())
	counts, err := s.svc.InstanceCounts(ctx)
	if err != nil {
		p.Problem = "could not list instances: " + sim.ErrorMessage(err)
	}
	// Every running one, for the rows' "migrating" marks; the banner
	// names the first few.
	running, err := s.svc.MigrationPage(ctx, sim.MigrationFilter{State: sim.MigrationRunning})
	if err != nil {
		p.Problem = "could not list migrations: " + sim.ErrorMessage(err)
	}
	p.Running, p.RunningTotal = running.Items[:min(overviewRunning, len(running.Items))], running.Total
	if s.cfg.Conformance != nil {
		for _, run := range s.cfg.Conformance.ConformanceRuns() {
			if !run.State.Ended() {
				p.Conforming = append(p.Conforming, run)
			}
		}
	}
	inMig := map[string][2]string{}
	for _, m := range running.Items {
		inMig[m.Source.Instance] = [2]string{m.ID, "source"}
		if m.Target.Instance != "" {
			inMig[m.Target.Instance] = [2]string{m.ID, "target"}
		}
	}
	// This run's nodes in their order, then those only earlier runs had.
	known := map[string]bool{}
	for _, n := range s.svc.Nodes() {
		p.NodeNames = append(p.NodeNames, n.Name)
		p.Nodes = append(p.Nodes, nodeView{Node: n, Capabilities: n.Capabilities()})
		known[n.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if !known[name] && counts[name] > 0 {
			p.Nodes = append(p.Nodes, nodeView{Node: sim.Node{Name: name}, Unknown: true})
		}
	}
	// Which page of each node: the canonical address keeps those past the
	// first, so the live refresh fetches the pages shown.
	q := r.URL.Query()
	shown := url.Values{}
	pages := make([][3]int, len(p.Nodes)) // page, pages, offset
	for i, n := range p.Nodes {
		param := "page." + n.Name
		asked, err := pageParam(q, param)
		if err != nil {
			p.Problem, status = sim.ErrorMessage(err), http.StatusBadRequest
		}
		page, last, offset := pageOf(asked, counts[n.Name], overviewPageSize)
		pages[i] = [3]int{page, last, offset}
		if page > 1 {
			shown.Set(param, strconv.Itoa(page))
		}
	}
	if len(shown) > 0 {
		p.RefreshURL = "/?" + shown.Encode()
	}
	for i := range p.Nodes {
		n := &p.Nodes[i]
		insts, err := s.svc.InstancePage(ctx, sim.InstanceFilter{Node: n.Name, Limit: overviewPageSize, Offset: pages[i][2]})
		if err != nil {
			p.Problem = "could not list instances: " + sim.ErrorMessage(err)
		}
		n.Total = insts.Total
		for _, in := range insts.Items {
			row := instanceRow{Instance: safeInstance(in)}
			row.Migration, row.Side = inMig[in.ID][0], inMig[in.ID][1]
			n.Instances = append(n.Instances, row)
		}
		param, name := "page."+n.Name, n.Name
		n.Pager = newPager("pages-"+name, "Pages of node "+name+"'s instances", pages[i][0], pages[i][1], insts.Total, overviewPageSize, len(n.Instances),
			func(page int) string { return withPage("/", shown, param, page) + "#node-" + name + "-h" })
	}
	for _, t := range s.svc.Catalog().List() {
		tv := templateView{Template: t}
		if t.Valid {
			tv.Allowed = sim.AllowedStrategies(t.Strategy)
		}
		var given map[string]string
		if lf != nil && lf.Template == t.Name {
			given = lf.Params
			tv.Node, tv.Runtime = lf.Node, lf.Runtime
			if lf.Err != nil {
				tv.LaunchError, tv.LaunchCode = sim.ErrorMessage(lf.Err), sim.ErrorCode(lf.Err)
			}
		}
		if tv.Node == "" && len(p.NodeNames) > 0 {
			tv.Node = p.NodeNames[0]
		}
		tv.Params = paramViews(t, given, fieldErrors(tv.LaunchError))
		p.Templates = append(p.Templates, tv)
	}
	if lf != nil && lf.Err != nil && !slices.ContainsFunc(p.Templates, func(t templateView) bool { return t.Name == lf.Template }) {
		// No card to show the refusal on (the form named no known template).
		p.Problem = "Launch refused: " + sim.ErrorMessage(lf.Err)
	}
	s.render(w, status, "overview", p)
}

// runtimeChoices lists the runtimes available for a launch, the default
// first.
func runtimeChoices(def string, available []string) []string {
	out := []string{def}
	for _, rt := range available {
		if rt != def {
			out = append(out, rt)
		}
	}
	return out
}

// paramViews describes the launch form's fields: the template's parameters
// and its allocatedPorts params, each with its rules as a hint.
func paramViews(t *sim.Template, given map[string]string, errs map[string]string) []paramView {
	var out []paramView
	seen := map[string]bool{}
	isPort := map[string]bool{}
	for _, d := range t.AllocatedPorts {
		isPort[d.Param] = true
	}
	for _, p := range t.Parameters {
		seen[p.Name] = true
		v := paramView{Name: p.Name, Purpose: p.Purpose, Type: p.Type, ID: "launch-" + t.Name + "-" + p.Name, Required: p.Required, Error: errs[p.Name]}
		if v.Type == "" {
			v.Type = "string"
		}
		var hint []string
		hint = append(hint, v.Type)
		switch v.Type {
		case "int", "number":
			v.Input = "number"
			v.Step = "any"
			if v.Type == "int" {
				v.Step = "1"
			}
			if p.Min != nil {
				v.Min = strconv.FormatFloat(*p.Min, 'f', -1, 64)
			}
			if p.Max != nil {
				v.Max = strconv.FormatFloat(*p.Max, 'f', -1, 64)
			}
			switch {
			case v.Min != "" && v.Max != "":
				hint = append(hint, v.Min+"–"+v.Max)
			case v.Min != "":
				hint = append(hint, "≥ "+v.Min)
			case v.Max != "":
				hint = append(hint, "≤ "+v.Max)
			}
		case "boolean":
			v.Input = "select"
			v.Options = []string{"true", "false"}
		case "enum":
			v.Input = "select"
			v.Options = p.Values
			hint = append(hint, "one of "+strings.Join(p.Values, ", "))
		default:
			v.Input = "text"
			if p.Secret {
				v.Input = "password"
			}
		}
		if p.Default != nil {
			if p.Secret {
				// Never printed: blank keeps the default.
				hint = append(hint, "blank keeps the default")
			} else {
				v.Value = *p.Default
				hint = append(hint, "default "+strconv.Quote(*p.Default))
			}
		}
		if p.Required && p.Default == nil {
			hint = append(hint, "required")
		}
		if p.Secret {
			hint = append(hint, "secret")
		}
		if isPort[p.Name] {
			hint = append(hint, "an allocated port: blank closes it")
		}
		if g, ok := given[p.Name]; ok && !p.Secret {
			v.Value = g
		}
		v.Hint = strings.Join(hint, " · ")
		out = append(out, v)
	}
	for _, d := range t.AllocatedPorts {
		if seen[d.Param] {
			continue
		}
		v := paramView{Name: d.Param, Type: "port", ID: "launch-" + t.Name + "-" + d.Param, Input: "text", Error: errs[d.Param]}
		v.Purpose = d.Label
		hint := []string{d.Protocol + " port", "blank keeps it closed, auto picks from " + strconv.Itoa(d.Preferred) + ", or a number"}
		if d.Service != "" {
			hint = append(hint, "published on "+d.Service)
		}
		v.Hint = strings.Join(hint, " · ")
		v.Value = given[d.Param]
		out = append(out, v)
	}
	return out
}

// fieldErrors splits a launch refusal ("params.RATE: must be ...; params.X:
// ...") into a message per parameter, so each shows next to its field.
func fieldErrors(msg string) map[string]string {
	out := map[string]string{}
	// Split at each "params.X:" that starts the message or follows "; ",
	// so a message that itself holds "; " stays whole.
	parts := strings.Split("; "+msg, "; params.")
	for _, part := range parts[1:] {
		name, text, ok := strings.Cut(part, ": ")
		if !ok {
			continue
		}
		if out[name] != "" {
			out[name] += "; "
		}
		out[name] += text
	}
	return out
}
