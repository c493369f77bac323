package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/normsim/normsim/sim"
)

// NodeJSON is a node as the API shows it.
type NodeJSON struct {
	Name string `json:"name"`
	// Address is the host address the node's published ports bind
	// (127.0.1.1, …); SharedAddress says other nodes bind it too.
	Address       string      `json:"address,omitempty"`
	SharedAddress bool        `json:"sharedAddress,omitempty"`
	Socket        *SocketJSON `json:"socket"`
	Capabilities  []string    `json:"capabilities"`
	// Engine is the Docker engine the node's containers run on (the
	// docker context, its address and version); absent without one.
	Engine *sim.Engine `json:"engine,omitempty"`
}

// SocketJSON is a node's job-socket listener.
type SocketJSON struct {
	URL  string `json:"url"`
	Port int    `json:"port"`
}

func nodeJSON(n sim.Node) NodeJSON {
	j := NodeJSON{Name: n.Name, Address: n.Address, SharedAddress: n.SharedAddress, Capabilities: n.Capabilities(), Engine: n.Engine}
	if n.HasJobSocket() {
		j.Socket = &SocketJSON{URL: n.SocketURL, Port: n.SocketPort}
	}
	return j
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	out := []NodeJSON{}
	for _, n := range s.svc.Nodes() {
		out = append(out, nodeJSON(n))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	list := s.svc.Catalog().List()
	if list == nil {
		list = []*sim.Template{}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	t, err := s.svc.Catalog().Get(pathParam(r, "name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func views(list []sim.Instance) []sim.Instance {
	out := make([]sim.Instance, 0, len(list))
	for _, in := range list {
		out = append(out, in.View())
	}
	return out
}

func (s *Server) listInstances(w http.ResponseWriter, r *http.Request) {
	list, err := s.svc.Instances(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if node := r.URL.Query().Get("node"); node != "" {
		var keep []sim.Instance
		for _, in := range list {
			if in.Node == node {
				keep = append(keep, in)
			}
		}
		list = keep
	}
	writeJSON(w, http.StatusOK, views(list))
}

func (s *Server) launch(w http.ResponseWriter, r *http.Request) {
	var req sim.LaunchRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	in, err := s.svc.Launch(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/instances/"+url.PathEscape(in.ID))
	writeJSON(w, http.StatusCreated, in.View())
}

func (s *Server) getInstance(w http.ResponseWriter, r *http.Request) {
	in, err := s.svc.Instance(r.Context(), pathParam(r, "id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, in.View())
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Stop(r.Context(), pathParam(r, "id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// flushWriter flushes after every write so a followed log streams.
type flushWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func (fw flushWriter) Write(p []byte) (int, error) {
	n, err := fw.w.Write(p)
	if fw.f != nil {
		fw.f.Flush()
	}
	return n, err
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	id := pathParam(r, "id")
	if _, err := s.svc.Instance(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	follow := r.URL.Query().Get("follow")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	f, _ := w.(http.Flusher)
	if err := s.svc.Logs(r.Context(), id, follow == "1" || follow == "true", flushWriter{w, f}); err != nil && r.Context().Err() == nil {
		fmt.Fprintf(w, "\nnormsim: could not read logs: %s\n", sim.ErrorMessage(err))
	}
}

func (s *Server) migrate(w http.ResponseWriter, r *http.Request) {
	var req sim.MigrateRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	m, err := s.svc.Migrate(r.Context(), pathParam(r, "id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/migrations/"+url.PathEscape(m.ID))
	writeJSON(w, http.StatusAccepted, m)
}

func (s *Server) listMigrations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := sim.MigrationFilter{JobID: q.Get("job"), State: sim.MigrationState(q.Get("state"))}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			writeError(w, sim.Errorf(sim.EInvalid, "limit: must be a non-negative integer; got %q", l))
			return
		}
		f.Limit = n
	}
	list, err := s.svc.Migrations(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getMigration(w http.ResponseWriter, r *http.Request) {
	m, err := s.svc.Migration(r.Context(), pathParam(r, "id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// events streams the bus as Server-Sent Events. A client that falls behind
// is dropped (the stream ends) and its EventSource reconnects.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if _, ok := w.(http.Flusher); !ok {
		writeErrorStatus(w, http.StatusInternalServerError, sim.EInternal, "streaming unsupported")
		return
	}
	rc := http.NewResponseController(w)
	sub := s.svc.Bus().Subscribe(512)
	defer sub.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	// send writes one chunk with a deadline: a subscriber that stops
	// reading is dropped (its connection closed) instead of holding this
	// goroutine, its connection and its buffered events for ever.
	send := func(format string, args ...any) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(s.eventWriteTimeout)); err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: 1000\n: connected\n\n") {
		return
	}
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				return
			}
			data, _ := json.Marshal(ev)
			if !send("event: %s\ndata: %s\n\n", ev.Kind, data) {
				return
			}
		case <-ping.C:
			if !send(": ping\n\n") {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
