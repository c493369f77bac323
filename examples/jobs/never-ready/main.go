// Command never-ready is the counter example job made to misbehave on purpose: as a target it never sends target-ready.
// normsim's scenario examples/scenarios/never-ready.yaml proves normsim catches it.
package main

import "github.com/normsim/normsim/examples/jobs/internal/counterjob"

func main() { counterjob.Main("never-ready") }
