// Command refuser is the counter example job made to misbehave on purpose: it answers every get-state with state-refused.
// normsim's scenario examples/scenarios/refuser.yaml proves normsim catches it.
package main

import "github.com/normsim/normsim/examples/jobs/internal/counterjob"

func main() { counterjob.Main("refuse") }
