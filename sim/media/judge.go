package media

import "github.com/normsim/normsim/sim"

// Judge is Analyze and Remux as the manager's sim.MediaJudge.
type Judge struct{}

var _ sim.MediaJudge = Judge{}

// Analyze is the package's Analyze.
func (Judge) Analyze(source, target []sim.MediaDatagram, at sim.SeamMoments) *sim.MediaReport {
	return Analyze(source, target, at)
}

// Remux is the package's Remux.
func (Judge) Remux(dgs []sim.MediaDatagram) ([]byte, error) { return Remux(dgs) }
