// Command wrong-position is the counter example job made to misbehave on purpose: it reports a stopped position 5 packets behind the last one it sent.
// normsim's scenario examples/scenarios/wrong-position.yaml proves normsim catches it.
package main

import "github.com/normsim/normsim/examples/jobs/internal/counterjob"

func main() { counterjob.Main("wrong-position") }
