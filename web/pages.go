package web

import "github.com/go-chi/chi/v5"

// mountPages adds the dashboard (issue #6 grows it).
func (s *Server) mountPages(r chi.Router) {}
