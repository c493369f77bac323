package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/normsim/normsim/sim"
)

// ui holds the dashboard's templates and static assets, compiled into the
// binary so the dashboard works offline and from any directory.
//
//go:embed ui
var ui embed.FS

// assets are the dashboard's parsed templates and static files.
type assets struct {
	pages  map[string]*template.Template
	static fs.FS
	// version is a hash of the static files, appended to their URLs so a
	// browser never runs a stale app.js against a newer server.
	version string
}

// pageNames are the page templates under ui/templates, each rendered inside
// layout.html.
var pageNames = []string{"overview", "instance", "migration", "migrations", "conformance", "conformance-run", "error"}

func loadAssets() *assets {
	static, err := fs.Sub(ui, "ui/static")
	if err != nil {
		panic(err)
	}
	h := sha256.New()
	fs.WalkDir(static, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(static, p)
			h.Write([]byte(p))
			h.Write(b)
		}
		return nil
	})
	a := &assets{pages: map[string]*template.Template{}, static: static, version: hex.EncodeToString(h.Sum(nil))[:12]}
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(ui, "ui/templates/layout.html", "ui/templates/partials.html"))
	for _, name := range pageNames {
		a.pages[name] = template.Must(template.Must(base.Clone()).ParseFS(ui, "ui/templates/"+name+".html"))
	}
	return a
}

// render writes a page with status. It renders into a buffer first so a
// template error becomes a clean 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	s.renderPage(w, status, name, data, false)
}

// renderFramingSelf renders a page that frames a page of this origin (a
// conformance run's HTML report).
func (s *Server) renderFramingSelf(w http.ResponseWriter, status int, name string, data any) {
	s.renderPage(w, status, name, data, true)
}

func (s *Server) renderPage(w http.ResponseWriter, status int, name string, data any, framesSelf bool) {
	var buf bytes.Buffer
	if err := s.assets().pages[name].ExecuteTemplate(&buf, "layout.html", data); err != nil {
		s.log.Error("render page", "page", name, "err", err)
		http.Error(w, "normsim: could not render the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	setPageHeaders(w.Header())
	if framesSelf {
		w.Header().Set("Content-Security-Policy", pageCSP+"; frame-src 'self'")
	}
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// pageCSP is every page's Content-Security-Policy: nothing but this
// origin may script, style, frame or receive it.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// setPageHeaders adds what an HTML page needs to be safe to open: nothing
// but this origin may script, style, frame or receive it.
func setPageHeaders(h http.Header) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
}

// pageBase is what the layout needs from every page.
type pageBase struct {
	Title string
	// Nav is the active navigation entry: overview, migrations or
	// conformance.
	Nav     string
	CSRF    string
	Version string
	Asset   string // static asset version
	// Page names the page for app.js; Live lists the event kinds that make
	// it refresh; RefreshURL is the page's canonical GET address (a form
	// error is rendered at the POST address).
	Page       string
	RefreshURL string
	// Instance, Migration and Conformance scope the live updates of an
	// instance, migration or conformance run page; Ended stops a finished
	// migration page's clock.
	Instance    string
	Migration   string
	Conformance string
	Ended       bool
	// StoreProblem says, on every page, that the store cannot write.
	StoreProblem string
}

func (s *Server) base(r *http.Request, title, nav, page, refresh string) pageBase {
	b := pageBase{Title: title, Nav: nav, CSRF: s.csrf.Token(), Version: s.cfg.Version, Asset: s.assets().version,
		Page: page, RefreshURL: refresh}
	if err := s.svc.StoreError(); err != nil {
		b.StoreProblem = "The store cannot write (" + err.Error() + "): launches and migrations are refused until it can; " +
			"what is recorded meanwhile is held and written then."
	}
	return b
}

// errorPage is a page that explains why a request failed.
type errorPage struct {
	pageBase
	Status  int
	Code    string
	Message string
	Hint    string
	Back    string
}

// renderError renders an HTML error page.
func (s *Server) renderError(w http.ResponseWriter, r *http.Request, status int, code, msg, hint string) {
	p := errorPage{pageBase: s.base(r, http.StatusText(status), "", "error", ""), Status: status, Code: code, Message: msg, Hint: hint, Back: "/"}
	// An error page may be read by whoever caused it (a refused Host is a
	// DNS-rebinding page), so it carries no CSRF token.
	p.CSRF = ""
	s.render(w, status, "error", p)
}

// wantsHTML reports whether a refusal should be a page rather than JSON: any
// request outside the API made by a browser.
func wantsHTML(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/readyz" {
		return false
	}
	return true
}

var funcs = template.FuncMap{
	"ms":        fmtMs,
	"msv":       func(v float64) string { return fmtMs(&v) },
	"msp":       fmtMsPrecise,
	"clock":     func(t time.Time) string { return t.Local().Format("15:04:05.000") },
	"date":      func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
	"stateTone": stateTone,
	"migTone":   migTone,
	"confTone":  conformanceStateTone,
	"gradeTone": gradeTone,
	"runCounts": runCounts,
	// seamTone colours a migration's seam by whether it broke its
	// strategy's promise (seamTone).
	"seamTone": func(m *sim.Migration) string { return seamTone(m.Strategy, m.Output) },
	"ended":    func(s sim.MigrationState) bool { return s.Ended() },
	// judged is a migration's one judgement (sim.Judge).
	"judged": func(m *sim.Migration) sim.Judgement { return m.Judged() },
	"deref":  func(p *int64) int64 { return *p },
	"bytes":  fmtBytes,
	"pos": func(left, top float64) template.CSS {
		return template.CSS(fmt.Sprintf("left:%.3f%%;top:%.0fpx", left, top))
	},
	"span": func(left, width float64) template.CSS {
		return template.CSS(fmt.Sprintf("left:%.3f%%;width:%.3f%%", left, width))
	},
	"left":   func(v float64) template.CSS { return template.CSS(fmt.Sprintf("left:%.3f%%", v)) },
	"height": func(px float64) template.CSS { return template.CSS(fmt.Sprintf("height:%.0fpx", px)) },
	"top":    func(px float64) template.CSS { return template.CSS(fmt.Sprintf("top:%.0fpx", px)) },
	// pathEscape puts an id into a link's path: html/template only
	// normalises a URL, which leaves a "?" or "#" in an id to end the path.
	"pathEscape": url.PathEscape,
	"thousands":  thousands,
	"sub":        func(a, b int) int { return a - b },
}

// fmtMs formats milliseconds as the CLI does (sim.FormatMs); "—" for none.
func fmtMs(p *float64) string {
	if p == nil {
		return "—"
	}
	return sim.FormatMs(*p)
}

// fmtMsPrecise formats a time on the timeline; the same format as every
// duration, which keeps a tenth of a millisecond below ten seconds.
func fmtMsPrecise(v float64) string { return sim.FormatMs(v) }

func fmtBytes(n int) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/1024)
}

// stateTone is the colour family of an instance state.
func stateTone(s sim.InstanceState) string {
	switch s {
	case sim.InstanceRunning:
		return "ok"
	case sim.InstanceStarting, sim.InstanceStopping, sim.InstanceCreated:
		return "busy"
	case sim.InstanceFailed:
		return "bad"
	}
	return "muted"
}

// migTone is the colour family of a migration state.
func migTone(s sim.MigrationState) string {
	switch s {
	case sim.MigrationCompleted:
		return "ok"
	case sim.MigrationRunning:
		return "busy"
	case sim.MigrationRefused:
		return "warn"
	case sim.MigrationAborted, sim.MigrationFailed:
		return "bad"
	}
	return "muted"
}

// prettyJSON indents a JSON value for reading; anything that is not JSON is
// shown as it is.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}
