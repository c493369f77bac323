package web

import (
	"bytes"
	"net/http"
	"net/url"

	"github.com/normsim/normsim/sim"
)

// The conformance API: runs of the graded matrix `normsim conform` runs,
// started and followed inside the sim (Config.Conformance).

// errNoConformance is the answer of a server built without a
// conformance service.
var errNoConformance = sim.Errorf(sim.EUnavailable, "conformance runs are not available in this normsim (it was started without a conformance service); run `normsim conform TEMPLATE` against it instead")

// conformance is the service, or writes why there is none.
func (s *Server) conformance(w http.ResponseWriter) (sim.ConformanceService, bool) {
	if s.cfg.Conformance == nil {
		writeError(w, errNoConformance)
		return nil, false
	}
	return s.cfg.Conformance, true
}

func (s *Server) startConformance(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.conformance(w)
	if !ok {
		return
	}
	var req sim.ConformanceRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	run, err := svc.StartConformance(r.Context(), req)
	if err != nil {
		s.logConformanceError("start", err)
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/conformance/"+url.PathEscape(run.ID))
	writeJSON(w, http.StatusAccepted, run)
}

func (s *Server) listConformance(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.conformance(w)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, svc.ConformanceRuns())
}

func (s *Server) getConformance(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.conformance(w)
	if !ok {
		return
	}
	run, err := svc.ConformanceRun(pathParam(r, "id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

func (s *Server) cancelConformance(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.conformance(w)
	if !ok {
		return
	}
	id := pathParam(r, "id")
	if err := svc.CancelConformance(id); err != nil {
		writeError(w, err)
		return
	}
	run, err := svc.ConformanceRun(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, run)
}

// conformanceReport serves an ended run's report in format. It is written
// to a buffer first, so a refusal (the run still running) is the API's
// JSON error rather than half a report.
func (s *Server) conformanceReport(format string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		svc, ok := s.conformance(w)
		if !ok {
			return
		}
		var buf bytes.Buffer
		if err := svc.WriteConformanceReport(pathParam(r, "id"), format, &buf); err != nil {
			s.logConformanceError("report", err)
			writeError(w, err)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		switch format {
		case sim.ReportHTML:
			setReportHeaders(h)
		case sim.ReportJUnit:
			h.Set("Content-Type", "application/xml; charset=utf-8")
		default:
			h.Set("Content-Type", "application/json")
		}
		w.WriteHeader(http.StatusOK)
		w.Write(buf.Bytes())
	}
}

// setReportHeaders lets the HTML report be framed by the run's page (and
// no other origin's), with the inline style and script a self-contained
// report carries, sandboxed: what a job printed into its logs is in it.
func setReportHeaders(h http.Header) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "+
		"frame-ancestors 'self'; base-uri 'none'; form-action 'none'; sandbox allow-scripts allow-popups allow-popups-to-escape-sandbox")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("Referrer-Policy", "same-origin")
}

// logConformanceError logs an internal error of the conformance service;
// a refusal is the caller's answer and nothing to log.
func (s *Server) logConformanceError(action string, err error) {
	if sim.ErrorCode(err) == sim.EInternal {
		s.log.Error("conformance "+action+" failed", "err", err)
	}
}
