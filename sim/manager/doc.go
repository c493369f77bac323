// Package manager is the simulated Norsk manager: it places instances of
// templates on nodes through a runtime, tracks their state and socket
// connections, and drives migrations between nodes with the contract's three
// strategies, recording a timeline of every phase and frame.
//
// It knows the technology packages only through sim's interfaces: a node's
// sim.JobSocket, the sim.OutputSink, the sim.Store and sim.Catalog, and the
// runtimes of a sim.RuntimeRegistry, whose answer may come after New (Wait
// blocks until then). Recovery after a restart is runtime-agnostic: each
// runtime's sim.Recoverer says what became of its instances, and a
// sim.RefRecorder's RuntimeRef is kept in the store for it. So tests run the
// manager on real loopback listeners with in-memory stores and fake
// runtimes. External, the runtime that starts nothing, lives here because
// the manager always has it.
package manager
