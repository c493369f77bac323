package docker_test

import (
	"context"
	"strings"
	"testing"
)

// What validate's warning on network_mode service:x, with x on network
// mode none, rests on: Docker runs the pair without a word (so normsim
// warns rather than refuses), and the joiner has no network of its own,
// only x's namespace, which has none.
func TestJoiningANamespaceWithoutNetworkRunsWithNoNetwork(t *testing.T) {
	img, cli := mustJobImage(t)
	r, _ := newRuntime(t)
	spec := launchTemplate(t, cli, img, `
services:
  app:
    image: ${IMAGE}
  side:
    image: ${IMAGE}
    network_mode: none
  probe:
    image: ${IMAGE}
    network_mode: service:side
`)
	if !strings.Contains(strings.Join(spec.Adjustments, "\n"), `services.probe.network_mode: "service:side" joins service side, which has network_mode none`) {
		t.Errorf("adjustments %q do not name the join", spec.Adjustments)
	}
	prepareStart(t, r, spec)
	ctx := context.Background()
	side, err := cli.ContainerInspect(ctx, spec.Project+"-side-1")
	if err != nil {
		t.Fatal(err)
	}
	probe, err := cli.ContainerInspect(ctx, spec.Project+"-probe-1")
	if err != nil {
		t.Fatal(err)
	}
	if !probe.State.Running {
		t.Errorf("probe is %s, want running: Docker refuses nothing here", probe.State.Status)
	}
	if got := string(probe.HostConfig.NetworkMode); got != "container:"+side.ID {
		t.Errorf("probe's network mode %q, want side's namespace", got)
	}
	for name, n := range side.NetworkSettings.Networks {
		if name != "none" || n.IPAddress != "" {
			t.Errorf("side is on network %s (%s), want none", name, n.IPAddress)
		}
	}
	stopGone(t, r, cli, spec.InstanceID, 0)
}
