// Command video-no-psi is the video example job made to misbehave on purpose: the target sends no PAT/PMT before its first frame, only 1 s later.
// It exists so normsim's media seam checks have a real defect to find.
package main

import "github.com/normsim/normsim/examples/jobs/internal/videojob"

func main() { videojob.Main("no-psi") }
