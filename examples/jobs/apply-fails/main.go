// Command apply-fails is the counter example job made to misbehave on purpose: as a target it continues exactly, but reports in target-applied that its overlay participant could not be applied.
// normsim's scenario examples/scenarios/misbehaving-apply-fails.yaml proves normsim reports it.
package main

import "github.com/normsim/normsim/examples/jobs/internal/counterjob"

func main() { counterjob.Main("apply-fails") }
