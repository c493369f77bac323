package web

import (
	"net/http"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/normsim/normsim/sim"
)

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Stats == nil {
		writeError(w, sim.Errorf(sim.EUnavailable, "this normsim keeps no statistics"))
		return
	}
	gc, err := trueOrFalse(r.URL.Query(), "gc", false)
	if err != nil {
		writeError(w, err)
		return
	}
	if gc {
		runtime.GC() // so heapLiveBytes is exact, not as of the last cycle
	}
	st, err := s.cfg.Stats.Stats(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// routeProfiles serves the runtime's profiles in the format `go tool
// pprof` reads, when `normsim up --pprof` asks for them. They are written
// with runtime/pprof directly: net/http/pprof would register itself on
// http.DefaultServeMux and run its init (and expvar's) at every start.
func (s *Server) routeProfiles(r chi.Router) {
	r.Get("/debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
		secs := 30
		if v := r.URL.Query().Get("seconds"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 600 {
				writeError(w, sim.Errorf(sim.EInvalid, "seconds: must be a number from 1 to 600; got %q", v))
				return
			}
			secs = n
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := pprof.StartCPUProfile(w); err != nil {
			writeError(w, sim.Errorf(sim.EConflict, "a CPU profile is already being taken: %v", err))
			return
		}
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-r.Context().Done():
		}
		pprof.StopCPUProfile()
	})
	r.Get("/debug/pprof/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "name")
		p := pprof.Lookup(name)
		if p == nil {
			writeError(w, sim.Errorf(sim.ENotFound, "no profile %q: try heap, allocs, goroutine, mutex, block or threadcreate", name))
			return
		}
		if name == "heap" && r.URL.Query().Get("gc") != "" {
			runtime.GC()
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		p.WriteTo(w, 0)
	})
}
