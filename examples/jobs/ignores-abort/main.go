// Command ignores-abort is the counter example job made to misbehave on purpose: as a handover target it starts its output as soon as it is ready instead of on cutover-apply, and when the handover rolls back it ignores abort and SIGTERM, producing beside the source until it is killed.
// normsim's scenario examples/scenarios/misbehaving-ignores-abort.yaml proves normsim catches it.
package main

import "github.com/normsim/normsim/examples/jobs/internal/counterjob"

func main() { counterjob.Main("ignores-abort") }
