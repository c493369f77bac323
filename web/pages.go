package web

import (
	"io/fs"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/normsim/normsim/sim"
)

// mountPages adds the dashboard: the pages, the form endpoints under /ui
// (CSRF token and same-origin Origin required) and the embedded assets.
func (s *Server) mountPages(r chi.Router) {
	r.Get("/", s.overviewPage)
	r.Get("/instances/{id}", s.instancePage)
	r.Get("/migrations", s.migrationsPage)
	r.Get("/migrations/{id}", s.migrationPage)
	r.Get("/conformance", s.conformancePage)
	r.Get("/conformance/{id}", s.conformanceRunPage)
	r.Get("/static/*", s.static)
	r.Route("/ui", func(r chi.Router) {
		r.Use(s.requireForm)
		r.Post("/instances", s.uiLaunch)
		r.Post("/instances/{id}/migrate", s.uiMigrate)
		r.Post("/instances/{id}/stop", s.uiStop)
		r.Post("/migrations/{id}/abort", s.uiAbort)
		r.Post("/conformance", s.uiConformance)
		r.Post("/conformance/{id}/cancel", s.uiCancelConformance)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.renderError(w, r, http.StatusNotFound, sim.ENotFound, "There is no page at "+r.URL.Path+".", "")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.renderError(w, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" is not allowed on "+r.URL.Path+".",
			"Dashboard actions are forms on the pages; open the page and use its buttons.")
	})
}

// static serves the embedded CSS and JavaScript. A request naming the
// current asset version may be cached for good; anything else is revalidated.
func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	name := pathParam(r, "*")
	b, err := fs.ReadFile(s.assets().static, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".svg"):
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	if r.URL.Query().Get("v") == s.assets().version {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(b)
}
