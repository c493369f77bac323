// Command keeps-running is the counter example job made to misbehave on purpose: it keeps producing output after it said it stopped.
// normsim's scenario examples/scenarios/keeps-running.yaml proves normsim catches it.
package main

import "github.com/normsim/normsim/examples/jobs/internal/counterjob"

func main() { counterjob.Main("keep-running") }
