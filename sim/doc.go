// Package sim is normsim's domain: the simulated manager's nodes, instances,
// migrations and their states, the error codes the API maps to HTTP, and
// every interface the rest plugs into: the store (Store), the template
// catalog (Catalog), the runtimes (Runtime, found through a
// RuntimeRegistry) and what some of them can do beside running services
// (Recoverer and RefRecorder for recovery after a restart, Signaler,
// PortReporter, OrphanRemover, EngineReporter), a node's job socket
// (JobSocket, with its SocketRegistration and SocketEvent), the output sink
// (OutputSink), the log book and the event bus.
//
// It imports nothing from the rest of the project but protocol, the wire
// contract. The implementations live in subpackages named after their
// technology (sim/sqlite, sim/jobsocket, sim/template, sim/docker,
// sim/process, ...); they import sim and not each other, sim/manager
// composes them through these interfaces only, and the app package wires
// them together.
package sim
