// Package process is the sim.Runtime that runs a template's services as host
// processes instead of Docker containers, so a developer can launch a job
// from their working tree (`go run .`, a debug build) and still have the
// simulated manager start, stop and migrate it.
//
// A service runs as a process only when its compose service carries the
// x-normsim extension (sim.ServiceSpec.Process): the argv to run and the
// directory to run it in. The runtime owns, per instance:
//
//   - the processes: each service is the leader of its own process group, so
//     stopping it signals everything it spawned (`go run` starts the real
//     program as a child; SIGTERM must reach that child, not only the go
//     tool). A group is treated like a container: when its leader exits on
//     its own the rest of the group is killed, and a stop waits until the
//     whole group is gone, not only the leader.
//   - the output: stdout and stderr go to a log file per service (a file, not
//     a pipe, so a process left running by Close(ctx, true) can keep writing
//     after normsim exits instead of dying of SIGPIPE). The runtime tails the
//     files into a ring buffer per instance, each line prefixed with
//     "<service> | ", which Logs reads and follows. The files are removed
//     when the instance stops; the ring buffer of a stopped instance stays
//     readable (the last 100 stopped instances are kept).
//   - exit watching: one goroutine per process notices its exit at once
//     (a pidfd in the netpoller on Linux, polling elsewhere) and reports an
//     exit that Stop did not cause as sim.ServiceExited.
//
// Host processes outlive a killed normsim but cannot be adopted: the
// runtime is a sim.RefRecorder (each service's pid and start time go into
// the instance's RuntimeRef) and a sim.Recoverer that stops, after a
// restart, every process an earlier run of the same store started, found by
// that record or by the instance ID in its environment.
//
// Processes have no health checks, so a depends_on condition of
// service_healthy is satisfied once the dependency has started;
// service_completed_successfully waits for the dependency to exit with code 0.
// The runtime needs a Unix system; elsewhere Prepare refuses every spec.
package process
