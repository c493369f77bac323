// Package wired holds the tests of the migration engine (sim/manager)
// wired to the real job-socket listener (sim/jobsocket), with test jobs
// over loopback WebSockets: the orderings only the real listener makes
// (hello-ack written before the manager hears of the connection, answers
// read on a socket a newer connection replaced, a frame held behind
// another of the same connection). The engine's own tests use fakes of
// the sim interfaces, in memory (sim/manager); this package has no code.
package wired
