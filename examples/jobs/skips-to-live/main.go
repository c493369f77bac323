// Command skips-to-live is the counter example job made to misbehave on purpose: as a handover target it rejoins the live edge (the clock's number, a little ahead) instead of continuing from the position the source handed over, so the numbers due in between are lost at the seam.
// normsim's scenario examples/scenarios/misbehaving-skips-to-live.yaml proves normsim catches it.
package main

import "github.com/normsim/normsim/examples/jobs/internal/counterjob"

func main() { counterjob.Main("skips-to-live") }
