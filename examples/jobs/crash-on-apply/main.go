// Command crash-on-apply is the counter example job made to misbehave on purpose: as a target it exits with code 3 on cutover-apply, after the point of no return.
// normsim's scenario examples/scenarios/crash-on-apply.yaml proves normsim catches it.
package main

import "github.com/normsim/normsim/examples/jobs/internal/counterjob"

func main() { counterjob.Main("crash-on-apply") }
