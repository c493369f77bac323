// Package bench is normsim's load and latency machinery, shared by the
// `normsim bench` command, the `go test -bench` benchmarks and the load and
// crash tests: handovers played with internal/jobplay's jobs, the API
// client (package apiclient) on a transport sized for load, a raw
// coder/websocket relay to compare the handover's cutover relay against,
// start/stop timing of a server process, percentiles, and /proc readings.
// It starts simulators (app, web), so the domain's unit tests do not import
// it; they play jobs with internal/jobplay or internal/testjob directly.
//
// Nothing here asserts a timing: it measures, and the figures with the
// commands that produced them live in docs/benchmarks.md.
package bench
