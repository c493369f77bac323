// Package sim is normsim's domain: the simulated manager's nodes, instances,
// migrations and their states, the error codes the API maps to HTTP, and the
// interfaces the technology packages plug into (Store, Runtime, Catalog,
// Socket). It imports nothing from the rest of the project; the
// implementations live in subpackages named after their technology
// (sim/sqlite, sim/jobsocket, sim/template, sim/docker, ...) and the app
// package wires them together.
package sim
