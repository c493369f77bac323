package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/normsim/normsim/sim"
)

// Service is what the web layer needs from the simulator (*manager.Manager
// implements it).
type Service interface {
	Nodes() []sim.Node
	Catalog() sim.Catalog
	DefaultRuntime() string
	// Runtimes lists the runtimes a launch may ask for.
	Runtimes() []string
	// Timeouts are the run's per-phase timeouts (normsim up --timeouts
	// over the defaults): what a migration that sets none gets.
	Timeouts() sim.Timeouts
	Bus() *sim.Bus
	// InstancePage lists the instances oldest first, cut to f;
	// InstanceCounts counts each node's, nodes of an earlier run included.
	InstancePage(ctx context.Context, f sim.InstanceFilter) (sim.Page[sim.Instance], error)
	InstanceCounts(ctx context.Context) (map[string]int, error)
	Instance(ctx context.Context, id string) (sim.Instance, error)
	// AwaitInstance waits until until holds for the instance or it has
	// ended, and returns it; when ctx ends first, it returns the instance
	// as it is with ctx's error.
	AwaitInstance(ctx context.Context, id string, until sim.Until) (sim.Instance, error)
	Launch(ctx context.Context, req sim.LaunchRequest) (sim.Instance, error)
	Stop(ctx context.Context, id string) error
	// RemoveStopped removes an instance that is not running, as its
	// stopped record (DELETE ?stopped=true).
	RemoveStopped(ctx context.Context, id string) error
	// Logs reads an instance's captured output (see manager.Manager.Logs).
	Logs(ctx context.Context, id string, q sim.LogQuery, follow bool, each func(*sim.LogPage) error) error
	// MigrationLogs fills in a migration's Logs, with the last tail
	// lines of each side when it failed, aborted or was judged fail.
	MigrationLogs(ctx context.Context, m *sim.Migration, tail int) error
	// Census is what the runtimes have running as the host sees it, each
	// unit marked known or not, and the runtimes that cannot tell.
	Census(ctx context.Context) ([]sim.RunningUnit, []string, error)
	// InstanceEvents are the last tail changes of an instance, oldest
	// first.
	InstanceEvents(ctx context.Context, id string, tail int) ([]sim.Event, error)
	// Frames are the last tail frames between an instance's job and its
	// node, oldest first.
	Frames(ctx context.Context, id string, tail int) ([]sim.FrameRecord, error)
	// FrameCounts says what of an instance's frame records the store keeps
	// and let go of.
	FrameCounts(ctx context.Context, id string) (sim.FrameCounts, error)
	// Output is what an instance sent to the output sink since then.
	Output(ctx context.Context, id string, since time.Time) (sim.OutputSummary, error)
	Migrate(ctx context.Context, id string, req sim.MigrateRequest) (*sim.Migration, error)
	// AbortMigration rolls a running migration back, as a job's abort
	// would, unless it is past the point of no return (EConflict).
	AbortMigration(ctx context.Context, id, reason string) (*sim.Migration, error)
	Migration(ctx context.Context, id string) (*sim.Migration, error)
	// MigrationSummary is Migration without the timeline (Events nil).
	MigrationSummary(ctx context.Context, id string) (*sim.Migration, error)
	// SeamCapture is the media a receiver got around the migration's
	// switch, as MPEG-TS; ENotFound when none was kept.
	SeamCapture(ctx context.Context, id string) (*sim.SeamCapture, error)
	// AwaitMigration waits until the migration's timeline has more than
	// after events or it has ended (after < 0: until it ends), and returns
	// it; when ctx ends first, it returns the migration as it is with
	// ctx's error. AwaitMigrationSummary answers without the timeline.
	AwaitMigration(ctx context.Context, id string, after int) (*sim.Migration, error)
	AwaitMigrationSummary(ctx context.Context, id string, after int) (*sim.Migration, error)
	// MigrationPage lists migrations newest first, cut to f's page, with
	// how many match f.
	MigrationPage(ctx context.Context, f sim.MigrationFilter) (sim.Page[*sim.Migration], error)
	// StoreError is why the store cannot write right now, or nil; while
	// it fails, launches and migrations are refused (503).
	StoreError() error
}

// Config configures the handler.
type Config struct {
	Service Service
	// Addr is the address the server is bound to; requests for any other
	// host than it or localhost are refused (DNS rebinding).
	Addr    string
	Logger  *slog.Logger
	Version string
	// Ready reports whether every listener and the store are up.
	Ready func() bool
	// CSRFKey signs the dashboard's CSRF tokens; random when nil.
	CSRFKey []byte
	// EventWriteTimeout bounds each write to an /api/v1/events
	// subscriber; one that does not read for that long is dropped.
	// Default 5s.
	EventWriteTimeout time.Duration
	// Conformance runs conformance matrices inside the sim; nil when
	// this normsim has none (the pages and the API say so).
	Conformance sim.ConformanceService
	// Stats reads the sim's figures for GET /api/v1/stats; nil answers 503.
	Stats sim.StatsReader
	// Profiling serves runtime profiles under /debug/pprof/ (normsim up
	// --pprof).
	Profiling bool
	// Streaming, when set, is told of each stream as it begins
	// (/api/v1/events, a logs follow; connlimit.HTTPConns.Streaming): a
	// stream may then be closed to make room for a newer connection, as
	// its client resumes it.
	Streaming func(context.Context)
	// BodyTimeout bounds how long a request's body may take to arrive
	// whole (default 30s): one that dribbles in would hold its
	// connection busy, never to be closed for a newer one.
	BodyTimeout time.Duration
}

// Server is the HTTP handler.
type Server struct {
	cfg    Config
	svc    Service
	log    *slog.Logger
	router chi.Router
	csrf   *csrf
	// assets are parsed on first use (or by Warm): parsing every page is
	// work start-up does not need to wait for.
	assets func() *assets
	// eventWriteTimeout is Config.EventWriteTimeout with its default.
	eventWriteTimeout time.Duration
	// waits ends when the server shuts down (EndWaits): requests waiting
	// on a migration answer then.
	waits    context.Context
	endWaits context.CancelFunc
}

// maxBodyBytes bounds every request body.
const maxBodyBytes = 1 << 20

// New builds the handler.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Ready == nil {
		cfg.Ready = func() bool { return true }
	}
	if cfg.EventWriteTimeout <= 0 {
		cfg.EventWriteTimeout = 5 * time.Second
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, svc: cfg.Service, log: cfg.Logger, csrf: newCSRF(cfg.CSRFKey), assets: sync.OnceValue(loadAssets),
		eventWriteTimeout: cfg.EventWriteTimeout}
	s.waits, s.endWaits = context.WithCancel(context.Background())
	r := chi.NewRouter()
	r.Use(routeOnEscapedPath)
	// HEAD wherever GET is (RFC 9110 9.3.2); net/http sends no body.
	r.Use(middleware.GetHead)
	r.Use(s.recoverPanics)
	r.Use(s.logInternalErrors)
	r.Use(s.checkHost)
	r.Use(s.checkOrigin)
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
			if r.ContentLength != 0 {
				r.Body = bodyWithin(w, r.Body, cfg.BodyTimeout)
			}
			next.ServeHTTP(w, r)
		})
	})
	r.Get("/readyz", s.readyz)
	if cfg.Profiling {
		s.routeProfiles(r)
	}
	r.Route("/api/v1", func(r chi.Router) {
		// Each endpoint names the query parameters it reads (takes).
		r.With(takes()).Get("/nodes", s.listNodes)
		r.With(takes()).Get("/templates", s.listTemplates)
		r.With(takes()).Get("/templates/{name}", s.getTemplate)
		r.With(takes("node", "limit", "offset")).Get("/instances", s.listInstances)
		r.With(takes()).Post("/instances", s.launch)
		r.With(takes("wait", "until")).Get("/instances/{id}", s.getInstance)
		r.With(takes("tail")).Get("/instances/{id}/frames", s.frames)
		r.With(takes("tail")).Get("/instances/{id}/events", s.instanceEvents)
		r.With(takes("stopped")).Delete("/instances/{id}", s.stop)
		r.With(takes("follow", "timestamps", "format", "since", "tail", "after")).Get("/instances/{id}/logs", s.logs)
		r.With(takes("since")).Get("/instances/{id}/output", s.output)
		r.With(takes()).Get("/instances/{id}/frames/counts", s.frameCounts)
		r.With(takes()).Post("/instances/{id}/migrate", s.migrate)
		r.With(takes("job", "state", "limit", "offset")).Get("/migrations", s.listMigrations)
		r.With(takes("logTail", "logs", "events", "wait", "after")).Get("/migrations/{id}", s.getMigration)
		r.With(takes()).Post("/migrations/{id}/abort", s.abortMigration)
		r.With(takes("side")).Get("/migrations/{id}/seam.ts", s.seamCapture)
		r.With(takes()).Get("/migrations/{id}/seam.rtp", s.seamRTP)
		r.With(takes("after")).Get("/events", s.events)
		r.With(takes()).Get("/census", s.census)
		r.With(takes("gc")).Get("/stats", s.stats)
		r.With(takes()).Post("/conformance", s.startConformance)
		r.With(takes()).Get("/conformance", s.listConformance)
		r.With(takes()).Get("/conformance/{id}", s.getConformance)
		r.With(takes()).Post("/conformance/{id}/cancel", s.cancelConformance)
		r.With(takes()).Get("/conformance/{id}/report.json", s.conformanceReport(sim.ReportJSON))
		r.With(takes()).Get("/conformance/{id}/report.html", s.conformanceReport(sim.ReportHTML))
		r.With(takes()).Get("/conformance/{id}/report.junit.xml", s.conformanceReport(sim.ReportJUnit))
		r.NotFound(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, sim.Errorf(sim.ENotFound, "no API endpoint %s %s", r.Method, r.URL.Path))
		})
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			writeErrorStatus(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" is not allowed on "+r.URL.Path)
		})
	})
	s.mountPages(r)
	s.router = r
	return s
}

// Warm parses the dashboard's pages now, so the first page view does not;
// call it in the background once the server is up.
func (s *Server) Warm() { s.assets() }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// checkHost refuses requests whose Host is not the bound address or a
// loopback name, so a DNS-rebinding page cannot drive the local sim.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			s.refuse(w, r, http.StatusForbidden, "HOST_REFUSED", "host "+r.Host+" is not this normsim's address; use localhost or "+s.cfg.Addr,
				"normsim only answers requests addressed to it by its bound address or a loopback name, so a web page that rebinds a DNS name to this machine cannot drive it.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	h := host
	if hh, port, err := net.SplitHostPort(host); err == nil {
		// A port is digits: "127.0.0.1:7788.evil.com" names no port. It
		// need not be the bound one, which a port forward may change.
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return false
		}
		h = hh
	}
	h = strings.Trim(h, "[]")
	switch strings.ToLower(h) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	if s.cfg.Addr != "" {
		bh, _, err := net.SplitHostPort(s.cfg.Addr)
		if err == nil && bh != "" && bh != "0.0.0.0" && bh != "::" && strings.EqualFold(h, bh) {
			return true
		}
		if err == nil && (bh == "0.0.0.0" || bh == "::" || bh == "") {
			// Bound to every interface on purpose: any address of this
			// machine is fine, a name is not.
			return net.ParseIP(h) != nil
		}
	}
	return false
}

// checkOrigin refuses state-changing requests from another origin. Requests
// without Origin (the CLI, curl, jobs) are not from a browser page.
func (s *Server) checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
			s.refuse(w, r, http.StatusForbidden, "ORIGIN_REFUSED", "origin "+o+" may not change this normsim", "")
			return
		}
		if sf := r.Header.Get("Sec-Fetch-Site"); sf == "cross-site" || sf == "same-site" {
			s.refuse(w, r, http.StatusForbidden, "ORIGIN_REFUSED", "cross-site requests may not change this normsim", "")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func sameOrigin(origin, host string) bool {
	return origin == "http://"+host
}

// recoverPanics turns a handler's panic into a logged stack and a 500, so
// one bad request never takes the sim down. (chi's middleware.Recoverer does
// the same, but its package links net/http/pprof and expvar into normsim and
// runs their init at every start.)
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if rec == http.ErrAbortHandler {
				panic(rec) // net/http's own way to abort a response
			}
			s.log.Error("request handler panicked", "method", r.Method, "path", r.URL.Path, "panic", rec, "stack", string(debug.Stack()))
			if r.Header.Get("Connection") != "Upgrade" {
				writeErrorStatus(w, http.StatusInternalServerError, sim.EInternal, "internal error: the request handler panicked (see normsim's log)")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// internalNoted is the response writer of logInternalErrors: writeError
// notes an internal error on it for the log. Streaming handlers reach
// the writer under it through http.ResponseController (Unwrap), which
// says when it cannot flush.
type internalNoted struct {
	http.ResponseWriter
	err error
}

func (n *internalNoted) Unwrap() http.ResponseWriter { return n.ResponseWriter }

// logInternalErrors logs each request answered with an internal error,
// with the error: the answer may say only "internal error", and a user
// who got a 500 from the API found nothing in the log to go on.
func (s *Server) logInternalErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := &internalNoted{ResponseWriter: w}
		next.ServeHTTP(n, r)
		if n.err != nil {
			s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", n.err)
		}
	})
}

// noteInternal notes err on the internalNoted under w, through any
// writer that wraps it.
func noteInternal(w http.ResponseWriter, err error) {
	for {
		if n, ok := w.(*internalNoted); ok {
			n.err = err
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Ready() {
		writeErrorStatus(w, http.StatusServiceUnavailable, sim.EUnavailable, "not ready")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

// statusOf maps an error code to an HTTP status.
func statusOf(code string) int {
	switch code {
	case sim.ENotFound:
		return http.StatusNotFound
	case sim.EInvalid:
		return http.StatusBadRequest
	case sim.EConflict:
		return http.StatusConflict
	case sim.EUnavailable:
		return http.StatusServiceUnavailable
	case sim.EInternal:
		return http.StatusInternalServerError
	case sim.EImageMissing:
		return http.StatusUnprocessableEntity
	case sim.EGone:
		return http.StatusGone
	default:
		return http.StatusUnprocessableEntity
	}
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		// Ended is, for GONE, the state the migration ended in.
		Ended sim.MigrationState `json:"ended,omitempty"`
	} `json:"error"`
}

// timedBody is a request body that must arrive whole by a deadline, set
// on the connection's reads when the body is wrapped and lifted once it
// is read to its end: the server's own read that then watches for the
// client going away must not find the deadline past.
type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	done    bool
}

// bodyWithin is body, to be read whole within timeout.
func bodyWithin(w http.ResponseWriter, body io.ReadCloser, timeout time.Duration) io.ReadCloser {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
		return body // a writer that cannot (a test's recorder)
	}
	return &timedBody{ReadCloser: body, rc: rc, timeout: timeout}
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case b.done || err == nil:
	case errors.Is(err, io.EOF):
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	default:
		// The deadline stays: the server's read of what the handler left
		// of the body fails at once, and the connection closes after the
		// answer instead of waiting for the rest.
		b.done = true
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			err = sim.Errorf(sim.EInvalid, "the request body did not arrive whole within %s; send it at once", b.timeout)
		}
	}
	return n, err
}

// takes refuses a request whose query names a parameter the endpoint does
// not read, or names one twice: either was a mistake the answer would
// otherwise hide (?limt=5 listed everything; ?limit=5&limit=6 took the
// first), so the 400 says which parameter and what the endpoint takes.
func takes(params ...string) func(http.Handler) http.Handler {
	known := make(map[string]bool, len(params))
	for _, p := range params {
		known[p] = true
	}
	takesWhat := "takes no query parameters"
	if len(params) > 0 {
		takesWhat = "takes " + strings.Join(params, ", ")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q, err := url.ParseQuery(r.URL.RawQuery)
			if err != nil {
				writeError(w, sim.Errorf(sim.EInvalid, "the query %q is not a URL query: %v; write name=value pairs joined by &, with %%XX escapes", r.URL.RawQuery, err))
				return
			}
			// Sorted: the same answer every time for the same query.
			for _, name := range slices.Sorted(maps.Keys(q)) {
				switch {
				case !known[name]:
					writeError(w, sim.Errorf(sim.EInvalid, "%s %s has no query parameter %q; it %s", r.Method, r.URL.Path, name, takesWhat))
					return
				case len(q[name]) > 1:
					writeError(w, sim.Errorf(sim.EInvalid, "%s: given %d times; give it once", name, len(q[name])))
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

func writeErrorStatus(w http.ResponseWriter, status int, code, msg string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, b)
}

func writeError(w http.ResponseWriter, err error) {
	var b errorBody
	b.Error.Code, b.Error.Message = sim.ErrorCode(err), sim.ErrorMessage(err)
	if b.Error.Code == sim.EInternal {
		noteInternal(w, err)
	}
	var e *sim.Error
	if errors.As(err, &e) {
		b.Error.Ended = e.Ended
	}
	status := statusOf(b.Error.Code)
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		status = http.StatusRequestEntityTooLarge
	}
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	e := jsonEncoders.Get().(*jsonEncoder)
	defer e.put()
	if err := e.enc.Encode(v); err != nil {
		// Every value the API answers with encodes; say so if one did not,
		// rather than send half of it.
		writeError(w, sim.Errorf(sim.EInternal, "encode the answer: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(e.buf.Len()))
	w.WriteHeader(status)
	w.Write(e.buf.Bytes())
}

// jsonEncoder is an indenting encoder with its buffer, pooled: a new
// json.Encoder allocates its indent buffer afresh, which at 10,000
// handovers polled was a seventh of all the sim allocated.
type jsonEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var jsonEncoders = sync.Pool{New: func() any {
	e := &jsonEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetIndent("", "  ")
	return e
}}

// maxPooledJSON is the largest answer whose buffers go back to the pool:
// one huge list must not stay in memory for good.
const maxPooledJSON = 256 << 10

func (e *jsonEncoder) put() {
	if e.buf.Cap() > maxPooledJSON {
		return
	}
	e.buf.Reset()
	jsonEncoders.Put(e)
}

// decode reads a JSON body strictly: unknown fields and trailing data are
// errors that name the problem.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			// 413, still INVALID_INPUT: writeError finds the MaxBytesError.
			return errors.Join(sim.Errorf(sim.EInvalid, "request body is larger than %d bytes; send less", mbe.Limit), mbe)
		}
		return sim.Errorf(sim.EInvalid, "request body: %v", err)
	}
	return decodeStrict(body, v, "request body")
}

// decodeStrict reads one JSON value into v: keys spelled exactly as the
// fields (case included), each once, no unknown fields, nothing after it. what names
// the input in errors.
func decodeStrict(data []byte, v any, what string) error {
	if err := checkKeyCase(data, reflect.TypeOf(v), what); err != nil {
		return err
	}
	if err := checkDuplicateKeys(data, what); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return sim.Errorf(sim.EInvalid, "%s is empty; send JSON", what)
		}
		var se *sim.Error
		if errors.As(err, &se) {
			// A type's own refusal (a duration's) does not say where it
			// stood: name the field.
			var named *sim.Error
			if errors.As(fieldError(data, reflect.TypeOf(v), ""), &named) {
				return named
			}
			return se
		}
		if ute, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			// Go's words name the Go struct ("Go struct field
			// LaunchRequest.node"): a client knows the JSON. No field:
			// the whole body is of the wrong type (an array for an object).
			at := what
			if field := ute.Field; field != "" {
				if isMapOf(reflect.TypeOf(v), field, ute.Type) {
					field += ": each value" // Go names the map, not its key
				}
				at += ": " + field
			}
			return sim.Errorf(sim.EInvalid, "%s: want %s; got %s", at, jsonKind(ute.Type), sim.WithArticle(ute.Value))
		}
		if _, ok := errors.AsType[*json.SyntaxError](err); ok {
			return sim.Errorf(sim.EInvalid, "%s is not JSON (%v); send a JSON object with Content-Type: application/json", what, err)
		}
		return sim.Errorf(sim.EInvalid, "%s: %v", what, err)
	}
	if dec.More() {
		noun := "value"
		switch reflect.Indirect(reflect.ValueOf(v)).Kind() {
		case reflect.Struct:
			noun = "object"
		case reflect.Slice:
			noun = "array"
		}
		return sim.Errorf(sim.EInvalid, "%s: one JSON %s expected, found more after it", what, noun)
	}
	return nil
}

// isMapOf says whether the field at path (JSON names, dotted) of root is
// a map whose values are of type elem.
func isMapOf(root reflect.Type, path string, elem reflect.Type) bool {
	t := root
	for name := range strings.SplitSeq(path, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return false
		}
		ft, ok := jsonFields(t)[name]
		if !ok {
			return false
		}
		t = ft
	}
	return t.Kind() == reflect.Map && t.Elem() == elem
}

// jsonKind says what JSON a Go type takes.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another value"
}

// routeOnEscapedPath makes chi match every request on its escaped path.
// Left to itself chi matches on r.URL.RawPath when the request's escaping
// differs from Go's default and on the decoded r.URL.Path otherwise, so a
// param came back escaped or not depending on the client's encoder
// (encodeURIComponent escapes "+" and "@", url.PathEscape does not; it
// escapes "," and ";", which Go's default does not). Matching always on the
// escaped form keeps an escaped "/" inside its segment, and pathParam
// decodes every param the same way.
func routeOnEscapedPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePath == "" {
			rctx.RoutePath = r.URL.EscapedPath()
		}
		next.ServeHTTP(w, r)
	})
}

// pathParam is the decoded value of a route param ("id", "name", "*"):
// the one place ids are read from a path.
func pathParam(r *http.Request, key string) string {
	v := chi.URLParam(r, key)
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v // EscapedPath is always valid; kept for a hand-built request
}
