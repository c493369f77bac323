package docker

import (
	"errors"
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestBuildHintOffersTheFastBuildFirst: a missing example image is built
// alone, in seconds, by normsim build-examples NAME; the script that builds
// every example comes second; an image of another kind is for docker.
func TestBuildHintOffersTheFastBuildFirst(t *testing.T) {
	got := buildHint([]string{"normsim/myjob:src-0123456789ab"})
	if !strings.HasPrefix(got, "from a normsim checkout, build it in seconds with: normsim build-examples myjob (") ||
		!strings.Contains(got, "scripts/build-examples builds every example") {
		t.Errorf("one example image: %q", got)
	}
	if got := buildHint([]string{"normsim/myjob:src-0123456789ab", "normsim/otherjob:src-ba9876543210"}); !strings.Contains(got, "build them in seconds with: normsim build-examples myjob otherjob") {
		t.Errorf("two example images: %q", got)
	}
	if got := buildHint([]string{"normsim/myjob:src-0123456789ab", "acme/encoder:1.2"}); strings.Contains(got, "build-examples") {
		t.Errorf("an image that is no example's: %q", got)
	}
}

// TestAnEngineOutOfNetworksSaysSo (attack round 10c, 3): the engine's
// default address pools hold about 31 bridge networks, one per Docker
// instance; the next launch failed 422 with the engine's words alone, as
// if the template were wrong. It is the engine's state: 503, the cause and
// the fix named.
func TestAnEngineOutOfNetworksSaysSo(t *testing.T) {
	for _, said := range []string{
		"Error response from daemon: could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network",
		"Error response from daemon: all predefined address pools have been fully subnetted",
	} {
		err := (&Runtime{}).composeErr("start instance i1", errors.New(said))
		if sim.ErrorCode(err) != sim.EUnavailable || !strings.Contains(err.Error(), "no address pool left") || !strings.Contains(err.Error(), "default-address-pools") || !strings.Contains(err.Error(), said) {
			t.Errorf("%q: %v (%s)", said, err, sim.ErrorCode(err))
		}
	}
}
