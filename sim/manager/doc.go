// Package manager is the simulated Norsk manager: it places instances of
// templates on nodes through a runtime, tracks their state and socket
// connections, and drives migrations between nodes with the contract's three
// strategies, recording a timeline of every phase and frame.
//
// It composes the technology packages through small interfaces (Socket is
// what a node's job-socket listener offers; sim.Runtime, sim.Store and
// sim.Catalog the rest) so tests can run it on real loopback listeners with
// in-memory stores.
package manager
